"""The quality gate per arm: task accuracy and held-out NLL per token, each against the reference arm.

Speed that costs answers is not speed (seed 004). Each candidate arm is judged non-inferior to the
reference at a stated margin:

- **Accuracy** (a tidy frame: arm, item, correct). Each arm's accuracy has a Wilson score interval.
  The difference candidate - reference is *paired* where both arms answered the same items (Tango's
  1998 asymptotic score interval and test, built for non-inferiority of paired proportions: only the
  discordant items count), *unpaired* otherwise (Newcombe's method 10 for independent proportions).
  Newcombe's paired hybrid score interval (method 10) is here too; bench/quality_gate.py measured it
  passing up to 4.8 % of candidates exactly at the margin where 2.5 % is the aim, so the gate uses Tango. Non-inferiority at margin m (in
  proportion, 0.02 = 2 points): **held** where the interval's lower end lies above -m, **lost** where its
  upper end lies below -m, **undetermined** otherwise.
- **NLL per token** (a tidy frame: arm, doc, nll, tokens: a document's summed negative log-likelihood in
  nats and the tokens it was summed over). An arm's NLL per token is sum(nll) / sum(tokens) over the
  documents (so long documents weigh by their tokens); its interval and the difference's come from a
  percentile bootstrap over documents, the same documents drawn for every arm (paired). Higher is
  worse: **held** where the difference's upper end lies below the margin (nats per token; a margin in
  percent of perplexity is log(1 + pct/100) nats), **lost** where its lower end lies above it.

The interval is two-sided at `confidence` (default the analysis's, 0.95: a one-sided test at 2.5 %).
Across the candidate arms, Holm's step-down (stats.multiplicity.holm_adjust) adjusts each arm's
one-sided non-inferiority p-value (paired: 1 - Phi(T(-m)), Tango's statistic at the margin; unpaired:
by inverting the interval, the level at which its end meets the margin; for the bootstrap, the share of
resampled differences beyond the margin), and each
comparison's interval is recomputed at its Holm step's level, so the verdict held agrees with Holm's
rejection and the interval printed is the one it rests on. The result models are frozen pydantic values
(bracket.stats.results.quality), ready for stats.json.

References: Wilson, E.B. (1927) JASA 22:209; Newcombe, R.G. (1998) Stat Med 17:873 (independent) and
17:2635 (paired); Tango, T. (1998) Stat Med 17:891; Fagerland, Lydersen & Laake (2014) Stat Methods Med Res 24:224 (recommended paired
intervals); Holm, S. (1979) Scand J Stat 6:65.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pandas as pd
from scipy import stats as st
from scipy.optimize import brentq

from bracket.stats import defaults as D
from bracket.stats._seeds import as_generator
from bracket.stats.multiplicity import holm_adjust
from bracket.stats.results.quality import (
    AccuracyArm,
    AccuracyComparison,
    AccuracyGate,
    CiMethod,
    NllArm,
    NllComparison,
    NllGate,
    Verdict,
)

__all__ = [
    "wilson",
    "newcombe_paired",
    "tango_paired",
    "tango_statistic",
    "newcombe_unpaired",
    "non_inferiority",
    "accuracy_gate",
    "nll_gate",
    "margin_from_perplexity_percent",
    "simulate_answers",
]


_NORMAL = NormalDist()


def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie between 0 and 1, got {confidence!r}")
    return _NORMAL.inv_cdf(0.5 + confidence / 2)


def _wilson_z(x: float, n: float, z: float) -> tuple[float, float]:
    p = x / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def wilson(correct: int, n: int, confidence: float = D.CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval for a proportion x/n (Wilson 1927).

    centre = (p + z^2/2n) / (1 + z^2/n), half-width = z / (1 + z^2/n) * sqrt(p(1-p)/n + z^2/4n^2),
    z the two-sided normal quantile at `confidence`. Good coverage near 0 and 1, where the Wald interval fails.
    """
    if not (isinstance(n, (int, np.integer)) and n > 0) or not 0 <= correct <= n:
        raise ValueError(f"need 0 <= correct <= n and n > 0, got correct={correct!r}, n={n!r}")
    return _wilson_z(float(correct), float(n), _z(confidence))


def _mover(p1: float, p2: float, w1: tuple, w2: tuple, phi: float) -> tuple[float, float]:
    """Newcombe's method 10: p1 - p2 with the Wilson limits (l1,u1), (l2,u2) and correlation phi."""
    (l1, u1), (l2, u2) = w1, w2
    d = p1 - p2
    lo = d - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    hi = d + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return max(-1.0, lo), min(1.0, hi)


def newcombe_unpaired(x1: int, n1: int, x2: int, n2: int, confidence: float = D.CONFIDENCE) -> tuple[float, float]:
    """Interval for p1 - p2 of two independent proportions: Newcombe (1998, Stat Med 17:873), method 10.

    L = d - sqrt((p1 - l1)^2 + (u2 - p2)^2), U = d + sqrt((u1 - p1)^2 + (p2 - l2)^2), with (li, ui) each
    proportion's Wilson interval at the same level.
    """
    for x, n in ((x1, n1), (x2, n2)):
        if not (n > 0 and 0 <= x <= n):
            raise ValueError(f"need 0 <= x <= n and n > 0, got x={x!r}, n={n!r}")
    return _unpaired_z(x1, n1, x2, n2, _z(confidence))


def _unpaired_z(x1: int, n1: int, x2: int, n2: int, z: float) -> tuple[float, float]:
    return _mover(x1 / n1, x2 / n2, _wilson_z(x1, n1, z), _wilson_z(x2, n2, z), 0.0)


def _phi(a: int, b: int, c: int, d: int) -> float:
    """Newcombe's corrected phi: (A - n/2)/sqrt(...) for A = ad - bc > n/2, 0 for 0 <= A <= n/2, A/sqrt(...) below."""
    denom = (a + b) * (c + d) * (a + c) * (b + d)
    n = a + b + c + d
    num = a * d - b * c
    if denom == 0 or 0 <= num <= n / 2:
        return 0.0
    return (num - n / 2 if num > 0 else num) / math.sqrt(denom)


def newcombe_paired(a: int, b: int, c: int, d: int, confidence: float = D.CONFIDENCE) -> tuple[float, float]:
    """Interval for p1 - p2 of paired proportions: Newcombe (1998, Stat Med 17:2635), method 10.

    The 2x2 table of n pairs: a both right, b first right and second wrong, c first wrong and second right,
    d both wrong; p1 = (a+b)/n, p2 = (a+c)/n, p1 - p2 = (b - c)/n. With each marginal's Wilson interval
    (li, ui) and phi = A / sqrt((a+b)(c+d)(a+c)(b+d)), A = ad - bc, which Newcombe corrects to A - n/2 where
    A > n/2 and to 0 where 0 <= A <= n/2 (and 0 where a margin is empty):
    L = d - sqrt((p1-l1)^2 - 2 phi (p1-l1)(u2-p2) + (u2-p2)^2),
    U = d + sqrt((u1-p1)^2 - 2 phi (u1-p1)(p2-l2) + (p2-l2)^2).
    One of the two intervals Fagerland et al. (2014) recommend for paired proportions.
    """
    n = a + b + c + d
    if min(a, b, c, d) < 0 or n <= 0:
        raise ValueError(f"the table's counts must be >= 0 with at least one pair, got {(a, b, c, d)!r}")
    return _paired_z(a, b, c, d, _z(confidence))


def _paired_z(a: int, b: int, c: int, d: int, z: float) -> tuple[float, float]:
    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    return _mover(p1, p2, _wilson_z(a + b, n, z), _wilson_z(a + c, n, z), _phi(a, b, c, d))


def tango_statistic(b: int, c: int, n: int, delta: float) -> float:
    """Tango's (1998) score statistic for a paired difference p1 - p2 = delta.

    T(delta) = (b - c - n delta) / sqrt(n (2 q + delta (1 - delta))), with q the restricted maximum-likelihood
    estimate of the discordant cell p21 under delta: q = (sqrt(B^2 - 4AC) - B) / 2A, A = 2n,
    B = -b - c + (2n - b + c) delta, C = -c delta (1 - delta). b: first right and second wrong; c: the reverse.
    T decreases in delta; it is the test Tango built for non-inferiority of paired proportions.
    """
    A = 2.0 * n
    B = -b - c + (2.0 * n - b + c) * delta
    C = -c * delta * (1 - delta)
    q = (math.sqrt(max(0.0, B * B - 4 * A * C)) - B) / (2 * A)
    var = n * (2 * q + delta * (1 - delta))
    num = b - c - n * delta
    if var <= 0:
        return 0.0 if num == 0 else math.copysign(math.inf, num)
    return num / math.sqrt(var)


def _tango_z(b: int, c: int, n: int, z: float) -> tuple[float, float]:
    est = (b - c) / n
    eps = 1e-10
    lo = -1.0 if est <= -1 else brentq(lambda x: tango_statistic(b, c, n, x) - z, -1 + eps, min(est, 1 - eps))
    hi = 1.0 if est >= 1 else brentq(lambda x: tango_statistic(b, c, n, x) + z, max(est, -1 + eps), 1 - eps)
    return lo, hi


def tango_paired(a: int, b: int, c: int, d: int, confidence: float = D.CONFIDENCE) -> tuple[float, float]:
    """Tango's asymptotic score interval for p1 - p2 of paired proportions (Tango 1998, Stat Med 17:891).

    The table as in newcombe_paired; the ends are the deltas where tango_statistic equals +z and -z. Only the
    discordant pairs b and c and the total n enter. Fagerland et al. (2014) recommend it for paired proportions.
    """
    n = a + b + c + d
    if min(a, b, c, d) < 0 or n <= 0:
        raise ValueError(f"the table's counts must be >= 0 with at least one pair, got {(a, b, c, d)!r}")
    return _tango_z(b, c, n, _z(confidence))


def non_inferiority(lo: float, hi: float, margin: float, higher_is_better: bool = True) -> Verdict:
    """held / lost / undetermined from the difference's interval (candidate - reference) and the margin.

    Higher is better (accuracy): held where lo > -margin, lost where hi < -margin. Higher is worse (NLL):
    held where hi < margin, lost where lo > margin. Otherwise undetermined (more items or documents decide).
    """
    if not margin >= 0:
        raise ValueError(f"the margin must be >= 0, got {margin!r}")
    if higher_is_better:
        return Verdict.HELD if lo > -margin else Verdict.LOST if hi < -margin else Verdict.UNDETERMINED
    return Verdict.HELD if hi < margin else Verdict.LOST if lo > margin else Verdict.UNDETERMINED


def _crossing(end, target: float) -> float:
    """The z at which a monotone interval end `end(z)`, moving away from the estimate as z grows, meets `target`
    (bisection on (0, 12]; 12 where it never does)."""
    start = end(0.0)
    gap = abs(target - start)
    lo_z, hi_z = 0.0, 12.0
    if abs(end(hi_z) - start) < gap:
        return hi_z
    for _ in range(50):
        mid = 0.5 * (lo_z + hi_z)
        if abs(end(mid) - start) < gap:
            lo_z = mid
        else:
            hi_z = mid
    return 0.5 * (lo_z + hi_z)


def _p_from_interval(interval, estimate: float, bound: float) -> float:
    """One-sided p of H0 'the difference is at or below `bound`' from a family of two-sided intervals.

    `interval(z)` gives (lo, hi) at the two-sided normal quantile z. Where the estimate lies above the
    bound, p = 1 - Phi(z*) with z* where the lower end meets the bound; where it lies below, p = Phi(z*)
    with z* where the upper end does (p >= 0.5); 0.5 at the bound. The ends move monotonically in z.
    """
    if estimate > bound:
        return 1.0 - _NORMAL.cdf(_crossing(lambda z: interval(z)[0], bound))
    if estimate < bound:
        return _NORMAL.cdf(_crossing(lambda z: interval(z)[1], bound))
    return 0.5


def _holm_levels(p: np.ndarray, alpha_one_sided: float) -> tuple[np.ndarray, np.ndarray]:
    """Holm-adjusted p-values and each comparison's two-sided confidence level at its Holm step
    (as stats.multiplicity.holm: 1 - 2 alpha/(m - i) while the steps reject, the first non-rejected
    step's level after)."""
    m = p.size
    # one comparison: Holm is the identity (statsmodels' holm, under holm_adjust, also runs gc.collect())
    p_adj, order = (p.copy(), np.arange(m)) if m == 1 else holm_adjust(p)
    reject = p_adj < alpha_one_sided
    level = np.empty(m)
    stop = None
    for step, j in enumerate(order):
        if stop is None and not reject[j]:
            stop = step
        level[j] = 1 - 2 * alpha_one_sided / (m - (step if stop is None else stop))
    return p_adj, level


def _check_frame(df: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"the {what} frame lacks column(s) {missing}; it needs {list(columns)}")
    if df.empty:
        raise ValueError(f"the {what} frame is empty: score at least one item per arm")


def _answers(df: pd.DataFrame, arms: list[str]) -> dict[str, pd.Series]:
    """Each arm's answers as a boolean Series indexed by item, sorted by item; refuses a non-boolean `correct`."""
    correct = df["correct"]
    if correct.isna().any() or not correct.isin([True, False]).all():
        bad = correct[correct.isna() | ~correct.isin([True, False])].iloc[0]
        raise ValueError(f"`correct` must be true or false for every row, got {bad!r}; score every item first")
    out = {}
    for arm, group in df.groupby("arm", sort=False):
        out[arm] = pd.Series(group["correct"].to_numpy(bool), index=group["item"].to_numpy()).sort_index()
    missing = [a for a in arms if a not in out]
    if missing:
        raise ValueError(f"arm(s) {missing} scored no item; score each arm's answers or leave the arm out")
    return out


def _accuracy_arms(answers: dict[str, pd.Series], arms: list[str], confidence: float) -> dict[str, AccuracyArm]:
    out = {}
    for arm in arms:
        s = answers[arm]
        n, x = int(s.size), int(s.sum())
        lo, hi = wilson(x, n, confidence)
        out[arm] = AccuracyArm(arm=arm, items=n, correct=x, accuracy=x / n, ci_low=lo, ci_high=hi, ci_level=confidence)
    return out


def _pairs(c: pd.Series, r: pd.Series) -> tuple[int, int, int, int] | None:
    """The paired 2x2 table (candidate first) where both arms answered the same items, else None."""
    if c.size != r.size or not c.index.equals(r.index):
        return None
    cv, rv = c.to_numpy(bool), r.to_numpy(bool)
    return int((cv & rv).sum()), int((cv & ~rv).sum()), int((~cv & rv).sum()), int((~cv & ~rv).sum())


def accuracy_gate(
    df: pd.DataFrame,
    reference: str,
    margin: float = 0.02,
    confidence: float = D.CONFIDENCE,
    arms: list[str] | None = None,
) -> AccuracyGate:
    """Task accuracy per arm and each candidate's non-inferiority to `reference`, Holm-adjusted across arms.

    `df` is tidy: one row per (arm, item) with a boolean `correct`. Items must be unique within an arm.
    Paired (Tango's score interval and test) where the candidate and the reference answered the same items;
    unpaired (his independent method 10) otherwise. `margin` is in proportion (0.02: 2 points).
    """
    _check_frame(df, ("arm", "item", "correct"), "accuracy")
    if df.duplicated(["arm", "item"]).any():
        dup = df[df.duplicated(["arm", "item"])].iloc[0]
        raise ValueError(f"arm {dup['arm']!r} scored item {dup['item']!r} twice; score each item once per arm")
    arms = list(dict.fromkeys(df["arm"])) if arms is None else list(arms)
    if reference not in arms:
        raise ValueError(f"the reference arm {reference!r} has no scored items; arms: {arms}")
    answers = _answers(df, arms)
    per_arm = _accuracy_arms(answers, arms, confidence)
    candidates = [a for a in arms if a != reference]
    alpha = (1 - confidence) / 2
    intervals, ps = {}, []
    ref = per_arm[reference]
    for arm in candidates:
        table = _pairs(answers[arm], answers[reference])
        cand = per_arm[arm]
        if table is not None:

            def interval(z, t=table):
                return _tango_z(t[1], t[2], sum(t), z)
        else:

            def interval(z, c=cand):
                return _unpaired_z(c.correct, c.items, ref.correct, ref.items, z)

        intervals[arm] = (interval, table)
        if table is not None:  # Tango's test at the margin itself: p = 1 - Phi(T(-margin))
            ps.append(1.0 - _NORMAL.cdf(tango_statistic(table[1], table[2], sum(table), -margin)))
        else:
            ps.append(_p_from_interval(interval, cand.accuracy - ref.accuracy, -margin))
    p = np.array(ps, dtype=float)
    p_adj, levels = _holm_levels(p, alpha) if p.size else (p, p)
    comparisons = []
    for j, arm in enumerate(candidates):
        interval, table = intervals[arm]
        level = float(levels[j])
        lo, hi = interval(_z(level))
        diff = per_arm[arm].accuracy - ref.accuracy
        comparisons.append(
            AccuracyComparison(
                arm=arm,
                reference=reference,
                paired=table is not None,
                table=table,
                difference=diff,
                ci_low=lo,
                ci_high=hi,
                ci_level=level,
                ci_method=CiMethod.TANGO_PAIRED if table is not None else CiMethod.NEWCOMBE_UNPAIRED,
                margin=margin,
                p_value=float(p[j]),
                p_adjusted=float(p_adj[j]),
                verdict=non_inferiority(lo, hi, margin, higher_is_better=True),
                differs=bool(lo > 0 or hi < 0),
            )
        )
    return AccuracyGate(
        reference=reference,
        margin=margin,
        confidence=confidence,
        holm_family=len(candidates),
        arms=tuple(per_arm[a] for a in arms),
        comparisons=tuple(comparisons),
    )


def margin_from_perplexity_percent(percent: float) -> float:
    """A margin in percent of perplexity as nats per token: perplexity = exp(NLL per token), so a
    candidate's perplexity at most (1 + pct/100) times the reference's is an NLL at most log(1 + pct/100) above."""
    if not percent >= 0:
        raise ValueError(f"the perplexity margin must be >= 0 percent, got {percent!r}")
    return math.log1p(percent / 100)


def _nll_matrix(df: pd.DataFrame, arms: list[str]) -> tuple[np.ndarray, np.ndarray, list]:
    """(nll, tokens) as arms x documents over the documents every arm scored."""
    nll = df.pivot(index="doc", columns="arm", values="nll")
    tok = df.pivot(index="doc", columns="arm", values="tokens")
    nll, tok = nll[arms].dropna(), tok[arms].dropna()
    docs = [d for d in nll.index if d in tok.index]
    if not docs:
        raise ValueError(f"no document was scored by every arm ({arms}); score the same documents in each arm")
    nll, tok = nll.loc[docs], tok.loc[docs]
    t = tok.to_numpy(float).T
    v = nll.to_numpy(float).T
    if not (np.isfinite(v).all() and (v >= 0).all() and (t > 0).all()):
        raise ValueError("each document needs a finite nll >= 0 (nats, summed) over tokens > 0")
    return v, t, docs


def nll_gate(
    df: pd.DataFrame,
    reference: str,
    margin: float = 0.01,
    confidence: float = D.CONFIDENCE,
    resamples: int = D.RESAMPLES,
    rng: np.random.Generator | int | None = 0,
    arms: list[str] | None = None,
) -> NllGate:
    """NLL per token per arm and each candidate's non-inferiority to `reference`, Holm-adjusted across arms.

    `df` is tidy: one row per (arm, doc) with `nll` (nats, summed over the document's scored tokens) and
    `tokens`. Only documents every arm scored count. Per arm NLL/token = sum(nll)/sum(tokens); intervals
    and p-values from `resamples` bootstrap draws of documents with replacement, the same draw for every
    arm (paired). `margin` in nats per token (margin_from_perplexity_percent converts a percent).
    The bootstrap p-value of non-inferiority is (1 + #{d* >= margin}) / (1 + B).
    """
    _check_frame(df, ("arm", "doc", "nll", "tokens"), "NLL")
    if df.duplicated(["arm", "doc"]).any():
        raise ValueError("a document was scored twice in one arm; score each document once per arm")
    if not margin >= 0:
        raise ValueError(f"the margin must be >= 0 nats per token, got {margin!r}")
    nll, tok = pd.to_numeric(df["nll"], errors="coerce"), pd.to_numeric(df["tokens"], errors="coerce")
    if not (np.isfinite(nll).all() and (nll >= 0).all() and (tok > 0).all()):
        raise ValueError("each document needs a finite nll >= 0 (nats, summed) over tokens > 0")
    arms = list(dict.fromkeys(df["arm"])) if arms is None else list(arms)
    if reference not in arms:
        raise ValueError(f"the reference arm {reference!r} scored no document; arms: {arms}")
    v, t, docs = _nll_matrix(df, arms)
    gen = as_generator(rng)
    n = len(docs)
    idx = gen.integers(0, n, size=(resamples, n))
    # per arm, per draw: NLL per token of the drawn documents (arms x B), by counting each document's draws
    counts = np.zeros((resamples, n))
    np.add.at(counts, (np.repeat(np.arange(resamples), n), idx.ravel()), 1.0)
    boot = (counts @ v.T) / (counts @ t.T)  # B x arms
    point = v.sum(axis=1) / t.sum(axis=1)
    q = (1 - confidence) / 2
    arm_rows = []
    for k, arm in enumerate(arms):
        lo, hi = np.quantile(boot[:, k], [q, 1 - q])
        arm_rows.append(
            NllArm(
                arm=arm,
                documents=n,
                tokens=int(t[k].sum()),
                nll_per_token=float(point[k]),
                perplexity=float(math.exp(point[k])),
                ci_low=float(lo),
                ci_high=float(hi),
                ci_level=confidence,
            )
        )
    r = arms.index(reference)
    candidates = [a for a in arms if a != reference]
    diffs = {a: boot[:, arms.index(a)] - boot[:, r] for a in candidates}
    p = np.array([(1 + np.sum(diffs[a] >= margin)) / (1 + resamples) for a in candidates], dtype=float)
    p_adj, levels = _holm_levels(p, q) if p.size else (p, p)
    comparisons = []
    for j, arm in enumerate(candidates):
        level = float(levels[j])
        qa = (1 - level) / 2
        lo, hi = (float(x) for x in np.quantile(diffs[arm], [qa, 1 - qa]))
        diff = float(point[arms.index(arm)] - point[r])
        comparisons.append(
            NllComparison(
                arm=arm,
                reference=reference,
                documents=n,
                difference=diff,
                perplexity_ratio=float(math.exp(diff)),
                ci_low=lo,
                ci_high=hi,
                ci_level=level,
                margin=margin,
                p_value=float(p[j]),
                p_adjusted=float(p_adj[j]),
                verdict=non_inferiority(lo, hi, margin, higher_is_better=False),
                differs=bool(lo > 0 or hi < 0),
            )
        )
    return NllGate(
        reference=reference,
        margin=margin,
        confidence=confidence,
        resamples=resamples,
        seed=rng if isinstance(rng, int) else None,
        holm_family=len(candidates),
        arms=tuple(arm_rows),
        comparisons=tuple(comparisons),
    )


def simulate_answers(
    items: int,
    accuracies: dict[str, float],
    spread: float,
    rng: np.random.Generator | int | None,
) -> pd.DataFrame:
    """Known-truth answers for the gate's calibration: a tidy (arm, item, correct) frame.

    Items are drawn from a population with a difficulty theta ~ N(0, spread^2); arm k answers item i
    correctly with probability Phi(mu_k - theta_i), independently across arms given the item, where
    mu_k = Phi^-1(acc_k) sqrt(1 + spread^2) makes the arm's population accuracy exactly acc_k. A larger
    spread makes the arms' answers agree more (hard items are missed by every arm): paired answers correlate.
    """
    if items < 1 or spread < 0:
        raise ValueError(f"need items >= 1 and spread >= 0, got {items!r}, {spread!r}")
    gen = as_generator(rng)
    theta = gen.normal(0.0, spread, items) if spread > 0 else np.zeros(items)
    frames = []
    for arm, acc in accuracies.items():
        if not 0 < acc < 1:
            raise ValueError(f"accuracy of {arm!r} must lie strictly between 0 and 1, got {acc!r}")
        mu = st.norm.ppf(acc) * math.sqrt(1 + spread * spread)
        correct = gen.random(items) < st.norm.cdf(mu - theta)
        frames.append(pd.DataFrame({"arm": arm, "item": np.arange(items), "correct": correct}))
    return pd.concat(frames, ignore_index=True)
