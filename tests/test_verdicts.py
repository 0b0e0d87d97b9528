"""A comparison's interval method, test and undetermined reason are data in stats.json (bracket.stats.reasons),
worded in one place (bracket.article.verdicts): each code from its numbers, and the analysis decides on the
codes, never on the words."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest
from bracket.article.verdicts import ci_method_words, significance_words, undetermined_words
from bracket.stats import conservatism
from bracket.stats.bootstrap import Sample
from bracket.stats.compare import MAX_ROUNDS, UNDETERMINED, compare
from bracket.stats.reasons import Center, CiKind, CiMethod, SignificanceTest, Undetermined, Variance, Why
from bracket.stats.simulate import simulate


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
    numbers = dict(blocks=1, arms_short=1, vif=5.0, df=1.0, ci_low=0.9, ci_high=1.2, band=0.01, wide=2.0)
    seq = dict(status="settled", rounds_run=3, max_rounds=4, look="budget spent", text="t", rounds_needed=3)
    words = {w: undetermined_words(Undetermined(w, **numbers, **seq).record()) for w in Why}
    assert all(words.values()) and len(set(words.values())) == len(Why)
    assert all(text != w.value for w, text in words.items())


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
    allowed = {"raw.py"}  # `"decode tok/s" in out`: a column of the raw table raw.py builds
    assert [m for m in found if m.split(":")[0] not in allowed] == []


def test_the_scan_finds_what_it_forbids(tmp_path):
    p = tmp_path / "m.py"
    p.write_text('def f(c):\n    return "requests only" in c["ci_method"] or c["how"].startswith("open")\n')
    assert _prose_matches(p) == ["m.py:2 'requests only' in ...", "m.py:2 .startswith('open')"]
