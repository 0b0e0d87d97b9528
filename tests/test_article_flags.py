"""The arm's launch flags the article and its recommendation print, for each engine's speculative flags: read from
the blocks' launch commands by the analysis (bracket.stats.provenance), printed by the article."""

from __future__ import annotations

from types import SimpleNamespace

from bracket.article.advice import arm_flags
from bracket.stats import provenance
from bracket.typed.experiment import Arm

LLAMA = [
    "/b/llama-server",
    "-m",
    "/m.gguf",
    "--port",
    "8033",
    "--metrics",
    "--spec-type",
    "ngram-simple",
    "--spec-ngram-simple-size-n",
    "3",
    "--spec-ngram-simple-size-m",
    "8",
    "--spec-draft-n-max",
    "8",
    "-ngl",
    "999",
    "-c",
    "2048",
    "-fa",
    "on",
    "--slots",
]
DRAFT = [
    "/b/llama-server",
    "-m",
    "/m.gguf",
    "--spec-type",
    "draft-simple",
    "--spec-draft-model",
    "/m.gguf",
    "--spec-draft-n-max",
    "4",
    "-ngl",
    "999",
    "--spec-draft-ngl",
    "999",
]
VLLM = [
    "python",
    "-m",
    "vllm.entrypoints.openai.api_server",
    "--model",
    "/m",
    "--speculative-config",
    '{"method":"ngram","num_speculative_tokens":4}',
    "--port",
    "8000",
]


def _data(argv_by_arm: dict, args_by_arm: dict | None = None, speculative: dict | None = None):
    """The article's view of arms whose blocks ran `argv_by_arm`, as stats.json's provenance states them."""
    args_by_arm = args_by_arm or {}
    metas = [{"block": i, "arm": arm, "argv": argv} for i, (arm, argv) in enumerate(argv_by_arm.items())]
    arms = [provenance.arm_record(a, metas, Arm(args=args_by_arm.get(a, []), env={})) for a in argv_by_arm]
    return SimpleNamespace(
        provenance={"arms": arms},
        arm_config=lambda arm: {
            "arm": arm,
            "args": args_by_arm.get(arm, []),
            "speculative": (speculative or {}).get(arm),
        },
        experiment={"engine": {"kind": "vllm"}},
    )


def test_llamacpp_speculative_flags_are_the_arms_flags():
    d = _data(
        {"ngram_8": LLAMA, "self_draft_4": DRAFT, "baseline": ["/b/llama-server", "-m", "/m.gguf", "--slots"]},
        {"self_draft_4": ["--spec-draft-ngl", "999"]},
    )
    assert arm_flags(d, "ngram_8") == (
        "--spec-type ngram-simple --spec-ngram-simple-size-n 3 --spec-ngram-simple-size-m 8 --spec-draft-n-max 8"
    )
    # the arm's own --spec-draft-ngl is one of the --spec flags already: printed once
    assert arm_flags(d, "self_draft_4") == (
        "--spec-type draft-simple --spec-draft-model /m.gguf --spec-draft-n-max 4 --spec-draft-ngl 999"
    )
    assert arm_flags(d, "baseline") == "(no speculative flags)"


def test_vllm_speculative_config_and_extra_args():
    d = _data({"ngram_4": VLLM}, {"ngram_4": ["--max-num-seqs", "1", "--enforce-eager"]})
    assert arm_flags(d, "ngram_4") == (
        '--speculative-config \'{"method":"ngram","num_speculative_tokens":4}\' --max-num-seqs 1 --enforce-eager'
    )
    assert d.provenance["arms"][0]["flags"] == [
        "--speculative-config",
        '{"method":"ngram","num_speculative_tokens":4}',
        "--max-num-seqs",
        "1",
        "--enforce-eager",
    ]


def test_an_arm_without_a_launch_record_is_said_from_the_experiment():
    spec = {"method": "ngram", "draft_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 5}
    d = _data({"ngram_4": []}, speculative={"ngram_4": spec})
    assert d.provenance["arms"][0]["flags"] is None  # its block recorded no launch command (attach)
    assert arm_flags(d, "ngram_4") == "ngram, draft budget 4, lookup 2–5 tokens (from the experiment: no launch record)"
    assert arm_flags(_data({"base": []}), "base") == "(no speculative flags)"


def test_spec_words_read_the_lookup_as_the_engine_does():
    from bracket.article.text import spec_words

    ngram = {"method": "ngram", "draft_tokens": 8, "prompt_lookup_min": 2, "prompt_lookup_max": 3}
    assert spec_words(ngram, "vllm") == "ngram, draft budget 8, lookup 2–3 tokens"
    assert spec_words(ngram, "llamacpp") == "ngram, draft budget 8, ngram-simple: a 3-token match"
    mod = {**ngram, "engine_method": "ngram-mod", "prompt_lookup_max": 5}
    assert (
        spec_words(mod, "llamacpp")
        == "ngram, draft budget 8, ngram-mod: 1–8 tokens a draft, llama.cpp's own match length"
    )
    assert spec_words(ngram, "sglang") == "ngram, draft budget 8, sglang's own match length"
    assert spec_words(None, "llamacpp") == "off"


def test_the_acceptance_figure_marks_arms_that_share_a_budget(tmp_path, monkeypatch):
    import matplotlib
    import pandas as pd
    from bracket.article import figures

    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    rows = [
        {"arm": arm, "workload": wl, "draft_budget": 8, "acceptance_length": al, "valid": True}
        for arm, al in (("ngram_8", 3.9), ("ngram_mod_8", 2.3))
        for wl in ("code", "prose")
    ]
    runs = pd.DataFrame(
        rows + [{"arm": "baseline", "workload": "code", "draft_budget": None, "acceptance_length": None, "valid": True}]
    )
    d = SimpleNamespace(
        runs=runs, workloads=["code", "prose"], arms=["baseline", "ngram_8", "ngram_mod_8"], out_dir=tmp_path
    )
    seen = {}
    real = figures._save
    monkeypatch.setattr(
        figures,
        "_save",
        lambda fig, d, name: (
            seen.setdefault("labels", [t.get_text() for t in fig.axes[0].get_legend().get_texts()])
            and real(fig, d, name)
        ),
    )
    fig = figures.figure_acceptance(d)
    assert "arm (marker)" in fig.caption and {"ngram_8", "ngram_mod_8"} <= set(seen["labels"])
    d.runs = runs[runs["arm"] != "ngram_mod_8"]  # one arm per budget: workload colours only
    assert "marker" not in figures.figure_acceptance(d).caption
