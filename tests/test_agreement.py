"""Greedy agreement: exact-match rate, first differing character, and the lossless flag."""

import hashlib

from bracket import article
from bracket.block import runner
from bracket.controls import agreement


def rec(arm, block, run, text, workload="code", error=None):
    return {
        "arm": arm,
        "block": block,
        "run": run,
        "workload": workload,
        "prompt_id": f"{workload}-{run}",
        "output_text": text,
        "output_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "error": error,
        "started_at": block * 100 + run,
    }


def test_first_difference_counts_characters():
    assert agreement.first_difference("def f(x):", "def f(x):") is None
    assert agreement.first_difference("def f(x):", "def F(x):") == 4
    assert agreement.first_difference("abc", "abcd") == 3


def test_identical_outputs_agree_and_a_lossless_divergence_is_flagged():
    recs = [rec("base", 0, r, f"out {r}") for r in range(3)]
    recs += [rec("spec", 1, 0, "out 0"), rec("spec", 1, 1, "out X"), rec("spec", 1, 2, "out 2")]
    recs += [rec("base", 2, r, f"out {r}") for r in range(3)]  # the reference again, in a fresh server
    res = agreement.agreement(recs, "base", {"base": False, "spec": True}, temperature=0)
    cells = {c["arm"]: c for c in res["cells"]}
    assert (cells["base"]["exact"], cells["base"]["pairs"], cells["base"]["flag"]) == (3, 3, None)
    s = cells["spec"]
    assert (s["exact"], s["pairs"], s["exact_match_rate"]) == (2, 3, 2 / 3)
    assert s["first_difference_min"] == 4
    assert "should be lossless" in s["flag"] and "batch shape" in s["flag"]
    assert res["flags"] == [s["flag"]]
    md = article.section_agreement(None, article.Controls([], None, res, None))._repr_markdown_()
    assert "2 / 3" in md and "67%" in md


def test_an_arm_that_diverges_on_several_workloads_is_one_flag_naming_them():
    recs = []
    for wl in ("code", "prose", "chat"):
        recs += [{**rec("base", 0, r, f"out {r}"), "workload": wl} for r in range(2)]
        recs += [{**rec("spec", 1, r, "out X" if wl != "chat" else f"out {r}"), "workload": wl} for r in range(2)]
    res = agreement.agreement(recs, "base", {"base": False, "spec": True}, temperature=0)
    assert [c["workload"] for c in res["cells"] if c["flag"]] == ["code", "prose"]
    (flag,) = res["flags"]
    assert flag.startswith("spec should be lossless") and "from the reference's on code, prose; first suspect" in flag


def test_sampled_outputs_are_not_judged_and_errors_are_skipped():
    recs = [rec("base", 0, 0, "a"), rec("spec", 1, 0, "b"), rec("spec", 1, 1, "", error="HTTP 500")]
    res = agreement.agreement(recs, "base", {"spec": True}, temperature=0.7)
    assert res["judged"] is False and res["flags"] == []
    assert res["cells"][0]["pairs"] == 1


def test_a_reference_that_disagrees_with_itself_is_flagged():
    recs = [rec("base", 0, 0, "a"), rec("base", 2, 0, "b")]
    res = agreement.agreement(recs, "base", {}, temperature=0)
    assert "disagrees with itself" in res["flags"][0]


def test_lossless_arms_differ_from_the_reference_by_speculation_only():
    from bracket.experiment import config

    cfg = config.validate(
        {
            "reference": "b",
            "arms": {
                "b": {"args": [], "env": {}},
                "n4": {"speculative": {"method": "ngram", "draft_tokens": 4}, "args": [], "env": {}},
                "n4x": {"speculative": {"method": "ngram", "draft_tokens": 4}, "args": ["--x"], "env": {}},
            },
        }
    )
    assert agreement.lossless_arms(cfg) == {"b": False, "n4": True, "n4x": False}


def test_every_arm_sees_the_same_prompt_at_the_same_run():
    """The prefix depends on (design seed, workload, run), not on the block: equal across arms, new each run."""
    assert runner.unique_prefix(1, "code", 3) == runner.unique_prefix(1, "code", 3)
    assert len({runner.unique_prefix(1, "code", r) for r in range(10)}) == 10
    assert runner.unique_prefix(1, "code", 0) != runner.unique_prefix(1, "chat", 0)
    assert runner.unique_prefix(1, "code", 0) != runner.unique_prefix(2, "code", 0)


def test_attached_servers_get_a_prefix_per_block_and_agreement_says_why_it_is_skipped():
    from bracket.block import runner
    from bracket.experiment import config

    # native: one prompt text per (seed, workload, run) for every block; attach: per block too
    assert runner.unique_prefix(1, "code", 2) == runner.unique_prefix(1, "code", 2)
    assert runner.unique_prefix(1, "code", 2, 0) != runner.unique_prefix(1, "code", 2, 3)
    assert runner.unique_prefix(1, "code", 2) != runner.unique_prefix(1, "code", 3)
    cfg = config.validate(
        {
            "arms": {"a": {}},
            "engine": {"kind": "openai", "launch": "attach", "embedded": False, "base_url": "http://127.0.0.1:9"},
        }
    )
    result = agreement.from_experiment([], cfg)
    assert result["cells"] == [] and "attach" in result["skipped"]
