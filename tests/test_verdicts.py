"""A comparison's interval method, test and undetermined reason are data in stats.json (bracket.stats.reasons),
worded in one place (bracket.article.verdicts): each code from its numbers, and the analysis decides on the
codes, never on the words."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from bracket.article.advice import levels_words
from bracket.article.hypotheses import k_reason_words
from bracket.article.looks import rule
from bracket.article.results import ci_label
from bracket.article.verdicts import (
    ci_method_words,
    family_words,
    look_words,
    significance_words,
    undetermined_words,
)
from bracket.experiment import config
from bracket.stats import analyze, conservatism
from bracket.stats.bootstrap import Sample
from bracket.stats.compare import MAX_ROUNDS, UNDETERMINED, compare
from bracket.stats.contract import OLD_SEQUENTIAL_METHOD, current
from bracket.stats.levels import Advice
from bracket.stats.multiplicity import Family
from bracket.stats.reasons import (
    Center,
    CiKind,
    CiMethod,
    Outcome,
    SignificanceTest,
    Structural,
    Undetermined,
    Variance,
    Why,
)
from bracket.stats.results import Levels, Sequential
from bracket.stats.sequential import METHOD, judge
from bracket.stats.simulate import simulate
from bracket.stats.speculative import KReason
from bracket.stats.summary import summarize


def test_each_interval_method_in_words():
    block = CiMethod(CiKind.BLOCK_FIT, Center.MEDIAN, 4, 4.0, Variance.BLOCKS, 0.5).record()
    assert ci_method_words(block) == "OLS on log block medians, t with 4 df"
    floored = CiMethod(CiKind.BLOCK_FIT, Center.MEDIAN, 1, 1.0, Variance.FLOORED, 0.5).record()
    assert ci_method_words(floored) == (
        "OLS on log block medians, t with 1 df; block variance below the within-block noise, which is its floor "
        "(not pooled on 1 df)"
    )
    pooled = CiMethod(CiKind.BLOCK_FIT, Center.MEAN, 2, 38.0, Variance.POOLED, 0.5).record()
    assert ci_method_words(pooled) == (
        "OLS on log block means (two paths); block variance not above within-block noise (F test at 0.5), pooled "
        "with it: t with 38 df"
    )
    assert ci_method_words(CiMethod(CiKind.NO_BLOCK_DF).record()) == "no residual degrees of freedom at the block level"
    few = CiMethod(CiKind.REQUESTS_ONLY, bootstrap="percentile").record()
    assert ci_method_words(few) == "percentile; requests only, block-to-block variation unmeasured"
    assert ci_method_words("an older file's words") == "an older file's words"
    one = CiMethod(CiKind.ONE_BLOCK, bootstrap="percentile", unit="runs").record()
    assert ci_method_words(one) == "percentile bootstrap of runs; one block, so block-to-block variation is unmeasured"
    assert ci_method_words(CiMethod(CiKind.BOOTSTRAP, bootstrap="percentile").record()) == "percentile"


def test_a_cells_interval_method_is_a_record_that_survives_json():
    """One cell's CI: no block ids (a bootstrap), one block (a bootstrap that says blocks are unmeasured), two
    blocks of 5 and 5 requests (OLS on the intercept: 2 - 1 = 1 block df)."""
    x = [100.0, 101.0, 99.0, 102.0, 98.0, 100.5, 99.5, 101.5, 98.5, 100.0]
    said = {}
    for name, blocks in (("none", None), ("one", [0] * 10), ("two", [0] * 5 + [1] * 5)):
        m = json.loads(json.dumps(summarize(x, blocks=blocks, n_resamples=200, rng=1).ci_method))
        said[name] = (m["kind"], ci_method_words(m))
    assert said["none"] == (CiKind.BOOTSTRAP, "percentile")
    assert said["one"] == (
        CiKind.ONE_BLOCK,
        "percentile bootstrap of requests; one block, so block-to-block variation is unmeasured",
    )
    assert said["two"][0] == CiKind.BLOCK_FIT and said["two"][1].startswith("OLS on log block medians, t with 1 df")


def test_each_test_in_words():
    t = SignificanceTest("t", Center.MEDIAN, drift_term=True, df=3.0, pooled=True).record()
    assert significance_words(t) == "t test on log block medians (arm + drift), 3 df (pooled)"
    assert significance_words(SignificanceTest("t", Center.MEDIAN, df=6.0).record()) == (
        "t test on log block medians (arm), 6 df"
    )
    assert significance_words(SignificanceTest("none").record()) == "none: a test needs two blocks per arm"


def test_each_undetermined_reason_in_words_from_its_numbers():
    # 0.970-1.090 beside a 1 % band: 1 / (1 + 2 x 0.01) = 0.980, 1 + 2 x 0.01 = 1.020; 7 rounds for +/-2.0 %
    wide = Undetermined(Why.WIDE, ci_low=0.97, ci_high=1.09, band=0.01, wide=2.0)
    news = {"rounds_needed": 7, "half_width": 0.02, "rounds_now": 3, "max_rounds_searched": 200}
    assert undetermined_words({**wide.record(), **news}) == (
        "the CI 0.970-1.090 neither clears the 1.0% noise band nor stays within 2 x it (0.980-1.020): too few "
        "blocks for their noise; about 7 rounds of A/B/A/B would give a CI of +/-2.0%"
    )
    # as many rounds as ran already: nothing to add; none found within the search: say so
    assert undetermined_words({**wide.record(), **news, "rounds_needed": 3}).endswith("for their noise")
    assert undetermined_words({**wide.record(), **news, "rounds_needed": None}).endswith(
        "; more than 200 rounds would be needed for a CI of +/-2.0%"
    )
    thin = Undetermined(Why.THIN, blocks=4, df=1.0).record()
    assert undetermined_words(thin) == (
        "4 blocks leave 1 degree of freedom for block-to-block noise, too few to tell an effect from it"
    )
    confounded = Undetermined(Why.CONFOUNDED, vif=5.0).record()
    assert undetermined_words(confounded).startswith(
        "arm is confounded with time (the drift term inflates the arm's variance 5.0-fold"
    )
    few = Undetermined(Why.FEW_BLOCKS, blocks=1, arms_short=2, rounds_needed=4).record()
    assert undetermined_words(few) == (
        "one block for each arm: how much fresh servers differ is not measured, and arm is confounded with time; "
        "run the arms interleaved (design.kind: abab) for at least 4 rounds"
    )
    assert undetermined_words({**few, "blocks": 0, "arms_short": 1}).startswith("no block for one arm:")
    open_ = Undetermined(Why.SEQUENTIAL, status="open", rounds_run=4, max_rounds=6, look="open: the CI is wide")
    assert undetermined_words(open_.record()) == (
        "still open after 4 of at most 6 rounds (open: the CI is wide); raise design.max_rounds or state the "
        "smallest difference that matters as design.margin"
    )
    assert undetermined_words(Undetermined(Why.RECORDED, text="as it was").record()) == "as it was"


def test_every_reason_code_is_worded():
    """The closed set: each Why says something of its own (not the empty string, not the code)."""
    numbers = dict(blocks=1, arms_short=1, vif=5.0, df=1.0, ci_low=0.9, ci_high=1.2, band=0.01, wide=2.0, at=3.0)
    numbers |= dict(q=3.2, step_ci_low=0.95, step_ci_high=1.1)
    seq = dict(status="settled", rounds_run=3, max_rounds=4, look="budget spent", text="t", rounds_needed=3)
    words = {w: undetermined_words(Undetermined(w, **numbers, **seq).record()) for w in Why}
    assert all(words.values()) and len(set(words.values())) == len(Why)
    assert all(text != w.value for w, text in words.items())


# judge at z 1.959964 on 1e6 df: the repeated CI is exp(estimate +/- 1.96 se); band 1 %, margin 2 %
Z = 1.959964


def test_each_look_in_words_from_its_numbers():
    # ln 1.10 +/- 0.0196: 1.10 x 0.98059 = 1.0787, 1.10 x 1.01979 = 1.1218
    up = judge(math.log(1.10), 0.01, 1e6, 0.01, Z, 0.02, final=False)
    assert up["outcome"] == Outcome.CLEARS
    assert look_words(up) == "the repeated CI 1.079-1.122 lies above the 1.0% noise band"
    # ln 0.90 +/- 0.0196: 0.8825, 0.9178
    down = judge(math.log(0.90), 0.01, 1e6, 0.01, Z, 0.02, final=True)
    assert look_words(down) == "the repeated CI 0.883-0.918 lies below the 1.0% noise band"
    # 0 +/- 0.0098: 0.9902-1.0098, inside 1 / 1.02 = 0.9804 and 1.02
    same = judge(0.0, 0.005, 1e6, 0.01, Z, 0.02, final=False)
    assert same["outcome"] == Outcome.EQUIVALENT
    assert look_words(same) == "equivalent within +/-2.0%: the repeated CI 0.990-1.010 lies inside it"
    # 0 +/- 0.098: 0.9066-1.1030, neither; the equivalence interval at z 1.0: exp(+/-0.05) = 0.9512-1.0513
    wide = judge(0.0, 0.05, 1e6, 0.01, Z, 0.02, final=False)
    assert look_words(wide) == (
        "open: the repeated CI 0.907-1.103 neither clears the 1.0% band nor lies within +/-2.0%"
    )
    spent = judge(0.0, 0.05, 1e6, 0.01, Z, 0.02, final=True, eq_boundary=1.0)
    assert look_words(spent) == (
        "budget spent: the repeated CI 0.907-1.103 neither clears the 1.0% band nor lies within +/-2.0% "
        "(at the equivalence level 0.951-1.051)"
    )
    recycled = {**up, "look": 2, "interval_look": 1, "interval_round": 3, "level": 0.05}
    assert look_words(recycled) == (
        "the repeated CI 1.079-1.122 lies above the 1.0% noise band (the interval of the look after round 3, "
        "judged again at the level 0.05 recycled to it)"
    )
    confounded = judge(0.1, 0.01, 4.0, 0.01, Z, 0.02, final=False, structural=Structural.CONFOUNDED)
    assert confounded["outcome"] == Outcome.STRUCTURAL and look_words(confounded) == "open: arm confounded with time"
    no_df = judge(None, None, None, 0.01, Z, 0.02, final=True)
    assert look_words(no_df) == "budget spent: no block-level degrees of freedom yet"
    words = {look_words({**no_df, "structural": code}) for code in Structural}
    assert len(words) == len(Structural) and not {w.split(": ", 1)[1] for w in words} & set(Structural)
    assert look_words(None) == "not looked at yet" and look_words("open: as recorded") == "open: as recorded"


def test_a_look_survives_json_and_is_said_inside_its_undetermined_reason():
    wide = judge(0.0, 0.05, 1e6, 0.01, Z, 0.02, final=False)
    back = json.loads(json.dumps(wide))
    assert look_words(back) == look_words(wide)
    u = Undetermined(Why.SEQUENTIAL, status="open", rounds_run=4, max_rounds=6, look=wide).record()
    assert undetermined_words(json.loads(json.dumps(u))) == (
        "still open after 4 of at most 6 rounds (open: the repeated CI 0.907-1.103 neither clears the 1.0% band "
        "nor lies within +/-2.0%); raise design.max_rounds or state the smallest difference that matters as "
        "design.margin"
    )
    spent = judge(0.0, 0.05, 1e6, 0.01, Z, 0.02, final=True)
    u = Undetermined(Why.SEQUENTIAL, status="settled", rounds_run=6, max_rounds=6, look=spent).record()
    assert undetermined_words(json.loads(json.dumps(u))).startswith("budget spent: the repeated CI 0.907-1.103")


def test_the_stopping_rule_in_words_from_the_plan():
    plan = {"alpha": 0.05, "family": 1, "first_look": 3, "max_rounds": 6, "margin": None, "rule": None}
    seq = Sequential.model_construct(**plan)  # the plan's fields of stats.json's `sequential`, typed
    assert rule(seq) == (
        "After each round from 3 to 6, each of the 1 comparisons is judged on a repeated confidence interval "
        "(Jennison & Turnbull) at the Lan-DeMets O'Brien-Fleming-type boundary, spending 0.05: it settles as "
        "faster/slower when the interval clears the noise band, as no measurable effect when the interval at 0.05 / "
        "1 (never recycled) lies within +/-2 x its noise band; another round runs while any comparison is open "
        "(every arm in every round, so the arms stay interleaved and drift stays estimable), and at 6 rounds the "
        "open ones are undetermined. Over every look and comparison, the chance of any false faster/slower is at "
        "most 0.05, and so is the chance of any wrong no measurable effect."
    )
    four = rule(Sequential.model_construct(**{**plan, "family": 4, "margin": 0.02}))
    assert "spending 0.05 / 4 per comparison to begin with" in four and "lies within +/-2.0%;" in four
    assert rule(Sequential.model_construct(**{**plan, "rule": "as recorded"})) == "as recorded"


def test_each_k_model_reason_and_levels_advice_in_words():
    assert k_reason_words(KReason.NO_BASELINE) == "no arm without speculative decoding to serve as the baseline"
    assert k_reason_words("no_acceptance") == (
        "no acceptance data (draft/accepted/verify counters) for the calibration arms"
    )
    assert k_reason_words(KReason.ALL_CALIBRATION) == (
        "every speculative arm was used to set the band; add arms to test it"
    )
    assert k_reason_words(KReason.NO_VALID_RUNS) == "no valid runs"
    assert k_reason_words("an older file's sentence") == "an older file's sentence" and k_reason_words(None) == ""
    lv = {"runs_per_block": 10.0, "between_share": 0.6, "best_runs_per_block": 2, "advice": Advice.MORE_BLOCKS}
    assert levels_words(Levels.model_construct(**json.loads(json.dumps(lv)))) == (
        "60% of the variance is between blocks: use more blocks with fewer runs each (about 2 runs per block; "
        "now 10); raise design.rounds."
    )
    assert "(about 1 run per block; now 10)" in levels_words(Levels.model_construct(**{**lv, "best_runs_per_block": 1}))
    assert levels_words(
        Levels.model_construct(**{**lv, "between_share": 0.1, "best_runs_per_block": 25, "advice": Advice.MORE_RUNS})
    ) == (
        "blocks differ little (10% of the variance): more runs per block (about 25) buy a narrower CI more "
        "cheaply than more blocks."
    )
    assert levels_words(Levels.model_construct(**{**lv, "runs_per_block": 5.0, "advice": Advice.BALANCED})) == (
        "5 runs per block balances block and run noise; add blocks to narrow the CI."
    )
    assert levels_words(Levels.model_construct(**{**lv, "advice": Advice.BLOCKS_AGREE})).startswith(
        "blocks agree within run-to-run noise"
    )


def test_each_family_in_words_and_an_older_adaptive_method_read_as_its_code():
    assert family_words(Family.EXPERIMENT) == "every comparison of the experiment with a test (arms x workloads)"
    assert family_words("hosts") == "every host comparison (hosts x arms x workloads)"
    assert family_words(Family.WORKLOADS) == "the workloads compared here"
    assert family_words("as recorded") == "as recorded" and family_words(None) == "arms x workloads"
    old = {"method": OLD_SEQUENTIAL_METHOD, "comparisons": 2, "family": "every comparison"}
    stats = {"stats_version": 3, "multiplicity": old, "comparisons": [{"multiplicity": old}, {"multiplicity": None}]}
    new = json.loads(json.dumps(current(stats)))
    assert new["multiplicity"] == {**old, "method": METHOD} == new["comparisons"][0]["multiplicity"]
    assert new["comparisons"][1]["multiplicity"] is None and stats["multiplicity"] is old  # the input is kept
    assert ci_label(0.99, 2, new["multiplicity"]["method"]) == "repeated CI (nominal 99%, 2 comparisons)"
    holm_file = {"stats_version": 3, "multiplicity": {"method": "holm"}, "comparisons": []}
    assert current(holm_file) is holm_file


def _samples(df, arm):
    sub = df[df["arm"] == arm]
    return Sample.of(sub["value"], sub["block"], sub["position"])


@pytest.mark.parametrize("design, rounds", [("bracket", 1), ("sequential", 3), ("abab", 2), ("abab", 4)])
def test_a_comparison_carries_codes_that_survive_json(design, rounds):
    df = simulate(design, rounds=rounds, effect=1.02, block_sd=0.02, rng=np.random.default_rng(4), seed=4)
    c = compare(_samples(df, "A"), _samples(df, "B"), noise_threshold=0.01, n_resamples=200, rng=1)
    row = json.loads(json.dumps(c.__dict__ | {"notes": []}, default=str))
    assert row["ci_method"]["kind"] in set(CiKind) and row["test"]["kind"] in ("t", "none")
    assert row["block_statistic"] in {*Center, None}  # None: no block fit (requests only)
    if c.verdict == UNDETERMINED:
        u = row["undetermined"]
        assert u["why"] in set(Why) and undetermined_words(u)
        assert u["rounds_needed"] == c.rounds_needed or u["why"] == Why.FEW_BLOCKS
        assert u["max_rounds_searched"] == MAX_ROUNDS
    else:
        assert row["undetermined"] is None
    if design == "bracket":  # one block per arm: requests only, no test, and that is why
        assert row["ci_method"]["kind"] == CiKind.REQUESTS_ONLY and row["test"]["kind"] == "none"
        assert row["undetermined"]["why"] == Why.FEW_BLOCKS and row["undetermined"]["lower_bound"]


def test_the_analysis_reads_the_codes_not_the_words():
    """conservatism counts a floored variance from the code: words that merely say "floor" count nothing."""
    base = {"se": 0.01, "df": 1.0, "ci_level": 0.95, "n_baseline": 6, "n_candidate": 6}
    base |= {"blocks_baseline": 2, "blocks_candidate": 2, "block_statistic": "median", "pooled": False}
    floored = CiMethod(CiKind.BLOCK_FIT, Center.MEDIAN, 1, 1.0, Variance.FLOORED, 0.5).record()
    assert conservatism.sources({**base, "ci_method": floored}, 0.95)["floored"]
    plain = CiMethod(CiKind.BLOCK_FIT, Center.MEDIAN, 1, 1.0, Variance.BLOCKS, 0.5).record()
    assert not conservatism.sources({**base, "ci_method": plain}, 0.95)["floored"]


PACKAGE = Path(__file__).resolve().parents[1] / "workflow" / "bracket"


def _prose_matches(path: Path) -> list[str]:
    """Where a module decides on words: `"some words" in x`, or x.startswith / endswith of a word (a flag,
    "--spec", or a single character is not prose)."""
    out = []
    for n in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(n, ast.Compare)
            and any(isinstance(o, (ast.In, ast.NotIn)) for o in n.ops)
            and isinstance(n.left, ast.Constant)
            and isinstance(n.left.value, str)
            and " " in n.left.value
        ):
            out.append(f"{path.name}:{n.lineno} {n.left.value!r} in ...")
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("startswith", "endswith")
            and n.args
            and isinstance(n.args[0], ast.Constant)
            and isinstance(n.args[0].value, str)
            and len(n.args[0].value) > 1
            and not n.args[0].value.startswith("-")
        ):
            out.append(f"{path.name}:{n.lineno} .{n.func.attr}({n.args[0].value!r})")
    return out


@pytest.mark.parametrize("part", ["stats", "article"])
def test_no_judgement_rests_on_words(part):
    """The statistics decide on codes and numbers, and the article reads stats.json's codes: neither matches a
    substring of a sentence (raw.py's column names, which the article itself makes, are not judgements)."""
    found = [m for p in sorted((PACKAGE / part).glob("*.py")) for m in _prose_matches(p)]
    # `"decode tok/s" in out`: a column of the raw table raw.py builds; planning.py picks rows of the design
    # table by its `design` label ("fixed 3 x 10", "adaptive ..."), which stats/design_power.py writes
    allowed = {"raw.py", "planning.py"}
    assert [m for m in found if m.split(":")[0] not in allowed] == []


def test_the_scan_finds_what_it_forbids(tmp_path):
    p = tmp_path / "m.py"
    p.write_text('def f(c):\n    return "requests only" in c["ci_method"] or c["how"].startswith("open")\n')
    assert _prose_matches(p) == ["m.py:2 'requests only' in ...", "m.py:2 .startswith('open')"]


#: Words stats/ still writes, each a name rather than a sentence about this experiment: the bootstrap's method
#: (CiMethod.bootstrap), what the neutrality control timed, the phases rule as a formula, and planning.py's column
#: names and power warning (the design notebook's, never in stats.json).
NAMED = {
    "facts.py": ("|ln(TTFT ratio)|",),
    "bootstrap.py": ("percentile (requests", "hierarchical percentile"),
    "neutrality.py": ("wall time, after",),
    "planning.py": ("this design's power", "wall time at the budget", "# design chosen"),
    "design_power.py": ("mean rounds", "power at the point estimate"),
    # the sentence version 3 files wrote as an adaptive design's multiplicity.method, read as the code it is now
    "contract.py": ("group-sequential (repeated CIs",),
}


def _sentences(path: Path) -> list[str]:
    """String literals and f-strings of four words or more that a module may store: not a docstring, not an
    error's message (raise) nor a log's or warning's."""
    tree = ast.parse(path.read_text(), str(path))
    quiet = set()
    for n in ast.walk(tree):
        body = getattr(n, "body", None)
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body:
            if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                quiet.add(id(body[0].value))
        said = isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", "")) in (
            "warn",
            "debug",
            "info",
            "warning",
            "error",
        )
        if isinstance(n, ast.Raise) or said:
            quiet |= {id(m) for m in ast.walk(n)}
    out = []
    for n in ast.walk(tree):
        if id(n) in quiet:
            continue
        if isinstance(n, ast.JoinedStr):
            quiet |= {id(v) for v in n.values}
            text = "".join(v.value for v in n.values if isinstance(v, ast.Constant))
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            text = n.value
        else:
            continue
        if len(text.split()) >= 4:
            out.append((path.name, n.lineno, text))
    return out


def test_stats_stores_no_sentence():
    """What analyze returns holds codes and numbers; the words are made in article/ (module docstrings)."""
    found = [s for p in sorted((PACKAGE / "stats").glob("*.py")) for s in _sentences(p)]
    left = [f"{f}:{line} {t[:60]!r}" for f, line, t in found if not t.lstrip().startswith(NAMED.get(f, ()))]
    assert left == []


def test_the_sentence_scan_finds_what_it_forbids(tmp_path):
    p = tmp_path / "m.py"
    p.write_text(
        '"""A module: its docstring is words."""\n'
        "def f(x, n):\n"
        '    """So is this one."""\n'
        "    if n < 0:\n"
        '        raise ValueError(f"n must not be negative, got {n}")\n'
        '    return {"how": f"the CI lies above the {x:.1%} noise band", "kind": "no_df", "unit": "requests only"}\n'
    )
    assert _sentences(p) == [("m.py", 6, "the CI lies above the  noise band")]


def _strings(value, where=""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{where}[{i}]")
    elif isinstance(value, str):
        yield where, value


def test_an_adaptive_analysis_stores_no_sentence():
    """stats.json of an adaptive design with a comparison settled, one left undetermined at a 0.1 % margin and a
    cell of one block: every string value of four words or more is one of NAMED's."""
    cfg = config.validate(
        {
            "arms": {"A": {}, "B": {}},
            "reference": "A",
            "workloads": {"sim": {"prompts": "x.jsonl"}, "other": {"prompts": "y.jsonl"}},
            "design": {"rounds": "adaptive", "max_rounds": 4, "margin": 0.001},
        }
    )
    rng = np.random.default_rng(5)
    sim = simulate("abab", effect=1.3, rounds=4, block_sd=0.01, rng=rng, seed=3).assign(workload="sim")
    other = simulate("abab", effect=1.0, rounds=4, block_sd=0.03, rng=rng, seed=4).assign(workload="other")
    runs = (
        pd.concat([sim, other], ignore_index=True)
        .rename(columns={"value": "decode_tok_s"})
        .assign(valid=True, invalid_reason="", warmup=False, experiment="x")
    )
    out = json.loads(json.dumps(analyze(runs, cfg).data(), default=str))
    verdicts = {c["workload"]: c["verdict"] for c in out["comparisons"]}
    assert verdicts == {"sim": "faster", "other": UNDETERMINED}
    assert out["comparisons"][0]["undetermined"]["look"]["outcome"] == Outcome.NEITHER
    names = tuple(x for v in NAMED.values() for x in v)
    long = [(w, v) for w, v in _strings(out) if len(v.split()) >= 4 and not v.startswith(names)]
    assert long == []
