"""Sequential verdicts (bracket.stats.sequential): boundaries, looks, and error rates with known truth."""

import math

import numpy as np
import pytest
from bracket.article.verdicts import look_words
from bracket.stats.io import from_table
from bracket.stats.sequential import METHOD, OPEN, SETTLED, Plan, assess, judge
from bracket.stats.simulate import simulate, simulate_arms
from bracket.stats.spending import boundaries, obf_spending
from scipy import stats


def test_boundaries_match_published_lan_demets_obf():
    # the published Lan-DeMets O'Brien-Fleming-type boundaries (gsDesign sfLDOF, ldbounds): 5 equal looks, alpha 0.05
    c = boundaries(np.arange(1, 6) / 5, 0.05)
    np.testing.assert_allclose(c, [4.877, 3.357, 2.680, 2.290, 2.031], atol=2e-3)


def test_boundaries_spend_what_the_function_says():
    # independent check by the bivariate normal: corr(Z1, Z2) = sqrt(t1 / t2)
    t = np.array([0.35, 1.0])
    c = boundaries(t, 0.05)
    rho = math.sqrt(t[0] / t[1])
    mvn = stats.multivariate_normal(mean=[0, 0], cov=[[1, rho], [rho, 1]])
    inside = mvn.cdf([c[0], c[1]], lower_limit=[-c[0], -c[1]])
    assert 1 - inside == pytest.approx(0.05, abs=5e-4)
    assert 2 * stats.norm.sf(c[0]) == pytest.approx(obf_spending(t[:1], 0.05)[0], rel=1e-6)


def test_boundaries_refuse_bad_fractions():
    with pytest.raises(ValueError, match="increase"):
        boundaries([0.5, 0.4], 0.05)


def test_judge_settles_each_way_and_stays_open_between():
    # z boundary 1.96 and large df: the repeated CI is the plain 95 % CI
    up = judge(math.log(1.10), 0.01, 1e6, 0.01, 1.959964, 0.02, final=False)
    assert up["status"] == SETTLED and up["verdict"] == "faster"
    assert up["rci_low"] == pytest.approx(math.exp(math.log(1.10) - 1.959964 * 0.01), rel=1e-6)
    same = judge(0.0, 0.005, 1e6, 0.01, 1.959964, 0.02, final=False)
    assert same["verdict"] == "no measurable effect"  # 0.990-1.010 inside +/-2 %
    wide = judge(0.0, 0.05, 1e6, 0.01, 1.959964, 0.02, final=False)
    assert wide["status"] == OPEN and wide["verdict"] is None
    spent = judge(0.0, 0.05, 1e6, 0.01, 1.959964, 0.02, final=True)
    assert spent["status"] == SETTLED and spent["verdict"] == "undetermined"


def test_plan_refuses_sequential_kind_and_one_round():
    with pytest.raises(ValueError, match="interleaved"):
        Plan(arms=("A", "B"), reference="A", workloads=("w",), kind="sequential", seed=1, min_rounds=2, max_rounds=4)
    with pytest.raises(ValueError, match="min_rounds"):
        Plan(arms=("A", "B"), reference="A", workloads=("w",), kind="abab", seed=1, min_rounds=1, max_rounds=4)


def test_information_grows_to_one_and_alpha_is_shared():
    p = Plan(arms=("A", "B", "C"), reference="A", workloads=("x", "y"), kind="abab", seed=1, min_rounds=2, max_rounds=6)
    t = p.fractions("B")
    assert t[-1] == pytest.approx(1.0) and np.all(np.diff(t) > 0)
    assert p.comparisons == 4
    # the last boundary at alpha / 4 is above the fixed Bonferroni quantile, and close to it
    c = p.boundaries("B")
    assert stats.norm.isf(0.05 / 8) < c[-1] < stats.norm.isf(0.05 / 8) + 0.15


def _plan(**kw):
    return Plan(
        **{
            **dict(arms=("A", "B"), reference="A", workloads=("sim",), kind="abab", seed=1, min_rounds=2, max_rounds=6),
            **kw,
        }
    )


def test_assess_asks_for_rounds_until_settled():
    rng = np.random.default_rng(3)
    df = simulate("abab", effect=1.0, rounds=6, block_sd=0.03, drift=0.01, rng=rng, seed=1)
    frame = from_table(df)
    p = _plan()
    # two rounds leave one block df: no look yet, though min_rounds is 2 (issue 29)
    assert p.first_look == 3 and p.looks[0] == 3
    two = assess(frame[frame["position"] < 4], p)
    assert two["rounds_run"] == 2 and two["looks"] == [] and two["another_round"] and two["next_round"] == 3
    assert two["comparisons"][0]["status"] == OPEN
    early = assess(frame[frame["position"] < 6], p)  # three rounds: the first look
    assert early["rounds_run"] == 3 and [x["round"] for x in early["looks"]] == [3]
    [c] = early["comparisons"]
    assert c["status"] == OPEN and early["another_round"] and early["next_round"] == 4
    done = assess(frame, p)  # the budget: every comparison settled
    assert done["rounds_run"] == 6 and not done["another_round"]
    assert done["comparisons"][0]["status"] == SETTLED


def test_assess_stops_early_on_a_large_effect():
    rng = np.random.default_rng(4)
    frame = from_table(simulate("abab", effect=1.3, rounds=6, block_sd=0.01, drift=0.01, rng=rng, seed=2))
    a = assess(frame, _plan())
    [c] = a["comparisons"]
    assert c["verdict"] == "faster" and c["settled_round"] < 6


def _rates(effect, block_sd, reps, margin=None, seed=11):
    p = _plan(margin=margin)
    rng = np.random.default_rng(seed)
    verdicts, rounds = [], []
    for i in range(reps):
        frame = from_table(simulate("abab", effect=effect, rounds=6, block_sd=block_sd, drift=0.01, rng=rng, seed=i))
        [c] = assess(frame, p)["comparisons"]
        verdicts.append(c["verdict"])
        rounds.append(c["settled_round"] or 6)
    return verdicts, np.mean(rounds)


# A calibration over many simulated datasets (seconds of CPU): make test runs it, make test-fast leaves it out.
@pytest.mark.slow
def test_no_false_verdicts_despite_looks_3pct_block_noise():
    verdicts, _ = _rates(1.0, 0.03, 40, margin=0.05)
    # at most 5 % in truth; 5 of 40 would be > 3 binomial sd above 2 (alpha 0.05 x 40)
    assert sum(v in ("faster", "slower") for v in verdicts) <= 4


@pytest.mark.integration
def test_error_rates_and_power_with_known_truth():
    null1, _ = _rates(1.0, 0.01, 150, seed=21)
    null3, _ = _rates(1.0, 0.03, 150, margin=0.05, seed=22)
    for v in (null1, null3):
        assert np.mean([x in ("faster", "slower") for x in v]) <= 0.05
    big, r = _rates(1.2, 0.01, 60, seed=23)
    assert np.mean([x == "faster" for x in big]) >= 0.95 and r < 5


@pytest.mark.parametrize(
    "design, needles",
    [
        ({"rounds": "adaptiv"}, ["design.rounds is 'adaptiv'", "integer", "adaptive"]),
        ({"rounds": "adaptive", "kind": "sequential"}, ["design.kind is 'sequential'", "abab"]),
        ({"rounds": "adaptive", "min_rounds": 5, "max_rounds": 3}, ["min_rounds (5)", "max_rounds (3)"]),
        ({"rounds": "adaptive", "min_rounds": 1}, ["design.min_rounds", "at least 2"]),
        ({"rounds": 4, "margin": 0.05}, ["design.margin is set", "rounds: adaptive"]),
        ({"rounds": 4, "max_rounds": 6}, ["design.max_rounds is set"]),
        ({"rounds": "adaptive", "target": "fast"}, ["design.target", "'decisive'"]),
    ],
)
def test_adaptive_design_errors_name_the_problem(design, needles):
    from bracket.experiment import config

    with pytest.raises(config.ExperimentError) as err:
        config.validate({"arms": {"a": {}, "b": {}}, "design": design})
    for n in needles:
        assert n in str(err.value)


def test_adaptive_design_fills_its_keys_and_fixed_ones_stay_as_they_were():
    from bracket.experiment import config, design

    cfg = config.validate({"arms": {"a": {}, "b": {}}, "design": {"rounds": "adaptive"}})
    assert cfg.design.min_rounds == 2 and cfg.design.max_rounds == 8 and cfg.design.target == "decisive"
    assert len(design.from_config(cfg)) == 16 and len(design.from_config(cfg, 3)) == 6
    fixed = config.validate({"arms": {"a": {}, "b": {}}})
    assert fixed.design.min_rounds is None and fixed.design.max_rounds is None
    assert "min_rounds" not in config.as_data(fixed.design) and "max_rounds" not in config.as_data(fixed.design)


def test_analyze_puts_the_settling_look_on_the_comparison():
    """stats.json of an adaptive design: the verdict and its CI are the look's that settled it."""
    from bracket.experiment import config
    from bracket.stats import analyze

    cfg = config.validate(
        {
            "arms": {"A": {}, "B": {}},
            "reference": "A",
            "workloads": {"sim": {"prompts": "x.jsonl"}},
            "design": {"rounds": "adaptive", "max_rounds": 6},
        }
    )
    df = simulate("abab", effect=1.3, rounds=6, block_sd=0.01, rng=np.random.default_rng(4), seed=2)
    runs = (
        df[df["position"] < 8]
        .rename(columns={"value": "decode_tok_s"})
        .assign(valid=True, invalid_reason="", warmup=False, experiment="x")
    )
    out = analyze(runs, cfg).data()
    assert out["sequential"]["rounds_run"] == 4 and not out["sequential"]["another_round"]
    assert out["multiplicity"]["method"] == METHOD == "group_sequential"
    [c] = out["comparisons"]
    s = next(x for x in out["sequential"]["comparisons"])
    assert c["verdict"] == "faster" == s["verdict"] and c["sequential"]["settled_round"] == s["settled_round"] < 4
    assert c["ci_low"] == s["rci_low"] > 1.01 and c["ci_level"] > 0.95


def test_the_article_shows_each_look_and_when_each_question_settled():
    from types import SimpleNamespace

    import pandas as pd
    from bracket.article.looks import looks_table, section_looks
    from bracket.stats.analyze import jsonable
    from bracket.stats.results import Sequential

    rng = np.random.default_rng(5)
    df = simulate("abab", effect=1.3, rounds=6, block_sd=0.01, rng=rng, seed=3)
    df2 = simulate("abab", effect=1.0, rounds=6, block_sd=0.03, rng=rng, seed=4).assign(workload="other")
    frame = from_table(pd.concat([df, df2], ignore_index=True))
    raw = assess(frame, _plan(workloads=("sim", "other"), margin=0.001))
    seq = Sequential.model_validate(jsonable(raw))  # as stats.json holds it, typed (bracket.stats.results)
    t = looks_table(seq)
    assert list(t["after round"]) == [x["round"] for x in raw["looks"]] and t.shape[1] == 6
    big = next(c for c in seq.comparisons if c.workload == "sim")
    assert big.verdict == "faster" and big.settled_round < 6
    # after the look that settled it, its column says so
    later = t[t["after round"] > big.settled_round]
    assert later["B / sim"].str.startswith("settled (faster)").all()
    assert seq.comparisons[1].verdict == "undetermined"  # a margin of 0.1 % cannot be met: budget spent
    assert section_looks(SimpleNamespace(results=SimpleNamespace(sequential=None))) is None
    s = section_looks(SimpleNamespace(results=SimpleNamespace(sequential=seq)))
    text = " ".join(getattr(x, "text", "") for x in s.items)
    assert "the budget of 6 rounds was spent" in text and "at most 0.05" in text and "Holm" in text


def test_an_early_looks_nominal_level_never_reads_100_percent():
    """The repeated CI of an early look sits at a level like 99.9973 %: three significant digits would
    print "100%", so the label keeps the decimals that tell it from certainty (hand-rounded below)."""
    from bracket.article.results import ci_label, level_pct

    assert [level_pct(x) for x in (0.95, 0.983, 0.99774, 0.999973, 0.9995, 0.9999)] == [
        "95%",
        "98.3%",
        "99.8%",
        "99.997%",
        "99.95%",
        "99.99%",
    ]
    assert ci_label(0.999973, 9, METHOD) == "repeated CI (nominal 99.997%, 9 comparisons)"
    assert ci_label(0.983, 3, "holm") == "98.3% CI (Holm, 3 comparisons)"


# ---- Holm-type alpha recycling across comparisons (Maurer & Bretz 2013) ----------------------------------


def _stub_plan(**kw):
    # three arms, one workload: two comparisons (B vs A, C vs A), looks after rounds 3 and 4
    return Plan(
        **{
            **dict(
                arms=("A", "B", "C"),
                reference="A",
                workloads=("w",),
                kind="abab",
                seed=1,
                min_rounds=3,
                max_rounds=4,
                margin=0.02,
            ),
            **kw,
        }
    )


def _stub_assess(plan, by_look):
    """assess with each comparison's (estimate, se, df) per look given: compare_fn is the stand-in; the
    recycling, boundaries and verdicts are the real ones."""
    from types import SimpleNamespace

    import pandas as pd

    frame = pd.DataFrame({"position": range(len(plan.blocks(plan.max_rounds)))})

    def compare_fn(sub, base, cand, wl):
        look = plan.looks.index(next(r for r in plan.looks if len(plan.blocks(r)) == len(sub)))
        est, se, df = by_look[cand][look]
        return SimpleNamespace(estimate=est, se=se, df=df, vif=1.0, noise_band=0.01)

    return assess(frame, plan, compare_fn=compare_fn)


def _q(plan, cand, level, look, df):
    """Half-width factor of the repeated CI at `level` on look `look` (0-based), by hand: the boundary's
    two-sided nominal level read on t(df)."""
    c = boundaries(plan.fractions(cand), level)[look]
    return stats.t.isf(stats.norm.sf(c), df)


def test_a_settled_comparison_passes_its_alpha_and_the_other_settles_in_the_same_look():
    p = _stub_plan()
    assert p.level(0) == pytest.approx(0.025) and p.level(1) == pytest.approx(0.05)  # Holm: alpha/2, then alpha
    se, df = 0.01, 30.0
    # C's lower edge clears the 1 % band at level 0.05 but not at 0.025 (by hand, between the two factors)
    q_half, q_full = _q(p, "C", 0.025, 0, df), _q(p, "C", 0.05, 0, df)
    assert q_full < q_half
    est_c = math.log(1.01) + se * (q_full + q_half) / 2
    big = (math.log(1.5), se, df)
    seq = _stub_assess(p, {"B": [big, big], "C": [(est_c, se, df)] * 2})
    b, c = seq["comparisons"]
    assert b["verdict"] == "faster" and b["settled_round"] == 3 and b["level"] == pytest.approx(0.025)
    assert c["verdict"] == "faster" and c["settled_round"] == 3 and c["level"] == pytest.approx(0.05)
    assert c["rci_low"] == pytest.approx(math.exp(est_c - q_full * se))
    assert seq["recycled"] == 2 and seq["looks"][0]["open"] == 0 and not seq["another_round"]
    # without B settling (B equivalent: its alpha stays), C at 0.025 stays open
    seq = _stub_assess(p, {"B": [(0.0, 0.001, df)] * 2, "C": [(est_c, se, df)] * 2})
    b, c = seq["comparisons"]
    assert b["verdict"] == "no measurable effect" and seq["looks"][0]["open"] == 1
    assert c["looks"][0]["status"] == OPEN and c["looks"][0]["level"] == pytest.approx(0.025)


def test_recycled_alpha_is_spent_on_the_earlier_looks_too():
    p = _stub_plan()
    se, df = 0.01, 30.0
    # C: look 1 clears at level 0.05 (not 0.025); look 2 clears at neither; B settles only at look 2
    q1h, q1f = _q(p, "C", 0.025, 0, df), _q(p, "C", 0.05, 0, df)
    c1 = (math.log(1.01) + se * (q1f + q1h) / 2, se, df)
    c2 = (math.log(1.01), se, df)
    b1, b2 = (0.0, 0.2, df), (math.log(1.5), se, df)
    seq = _stub_assess(p, {"B": [b1, b2], "C": [c1, c2]})
    b, c = seq["comparisons"]
    assert b["verdict"] == "faster" and b["settled_round"] == 4
    assert c["verdict"] == "faster" and c["settled_round"] == 4 and c["looks"][-1]["interval_look"] == 1
    assert c["rci_low"] == pytest.approx(math.exp(c1[0] - q1f * se))
    assert "judged again at the level 0.05" in look_words(c["look"])


@pytest.mark.integration
def test_familywise_false_faster_slower_stays_below_alpha_with_recycling():
    # B truly +20 % (settles early and passes its alpha), C and D truly equal to A: a false faster/slower on
    # C or D is the familywise error; with 3 comparisons recycled, at most alpha in truth.
    p = Plan(
        arms=("A", "B", "C", "D"),
        reference="A",
        workloads=("sim",),
        kind="abab",
        seed=1,
        min_rounds=2,
        max_rounds=6,
        margin=0.05,
        noise_threshold=0.01,
    )
    rng = np.random.default_rng(31)
    reps, errors, recycled = 120, 0, 0
    for _ in range(reps):
        seq = assess(
            from_table(
                simulate_arms({"A": 1.0, "B": 1.2, "C": 1.0, "D": 1.0}, rounds=6, block_sd=0.03, drift=0.01, rng=rng)
            ),
            p,
        )
        v = {c["candidate"]: c for c in seq["comparisons"]}
        errors += any(v[x]["verdict"] in ("faster", "slower") for x in ("C", "D"))
        recycled += v["B"]["verdict"] == "faster" and v["B"]["settled_round"] < 6
    assert recycled >= 0.9 * reps  # the recycling was exercised
    assert errors <= 12  # 5 % of 120 is 6; 12 lies > 2.5 binomial sd above it


# A calibration over many simulated datasets (seconds of CPU): make test runs it, make test-fast leaves it out.
@pytest.mark.slow
def test_recycling_settles_everything_bonferroni_settles_on_the_draft_sweeps_blocks():
    """On real blocks (the draft sweep's 12, read as the first 3 rounds of its adaptive version): Holm-type
    recycling is uniformly more powerful than Bonferroni, so it settles every comparison Bonferroni settles, the
    same way and no later, and spends at least alpha / m on each."""
    import dataclasses

    import pandas as pd
    from bracket.experiment import config
    from bracket.stats.io import from_runs
    from conftest import ROOT

    class Bonferroni(Plan):
        def level(self, rejected):
            return self.alpha / self.comparisons

    p = Plan.of(config.load(ROOT / "experiments" / "draft_sweep_adaptive.yaml"))
    frame = from_runs(pd.read_csv(ROOT / "tests" / "data" / "draft_sweep" / "runs.csv"))
    holm = {(c["workload"], c["candidate"]): c for c in assess(frame, p)["comparisons"]}
    bonf = assess(frame, Bonferroni(**{f.name: getattr(p, f.name) for f in dataclasses.fields(p)}))
    assert bonf["rounds_run"] == 3 and len(holm) == 9
    settled = [c for c in bonf["comparisons"] if c["status"] == SETTLED]
    assert settled, "the real blocks settle something at round 3"
    for c in settled:
        h = holm[(c["workload"], c["candidate"])]
        assert h["verdict"] == c["verdict"] and h["settled_round"] <= c["settled_round"]
    for h in holm.values():
        assert all(j["level"] >= 0.05 / 9 - 1e-15 for j in h["looks"])
