"""Sequential verdicts: look after every round, stop when every question is decided.

An adaptive design (`design.rounds: adaptive`) judges each comparison after every round from
`min_rounds` on and adds a round only while some comparison is open. Looking after every round
and stopping when an interval clears the band would, with fixed-level intervals, make a false
"faster" ever likelier with each look. The intervals here stay valid at every look together:

- Repeated confidence intervals (Jennison & Turnbull 1989, "Interim analyses: the repeated
  confidence interval approach", JRSS B 51:305-361; Jennison & Turnbull 2000, *Group Sequential
  Methods with Applications to Clinical Trials*, ch. 9): at look k the interval is
  estimate +/- c_k se, with c_k the two-sided group-sequential boundary. With probability at
  least 1 - alpha every interval of every look covers the true ratio, so any rule that stops on
  them (however it stops) keeps that guarantee.
- The boundaries c_k spend alpha by the Lan-DeMets function of O'Brien-Fleming type (Lan &
  DeMets 1983, Biometrika 70:659-663): alpha(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)), t the
  information fraction. They are computed by recursive numerical integration of the canonical
  joint distribution (Armitage, McPherson & Rowe 1969, JRSS A 132:235-244; Jennison & Turnbull
  2000, ch. 19). Early looks spend almost nothing, so the last look's interval is nearly as
  narrow as a fixed design's.
- The information fraction of each look comes from the plan, not the data: the variance factor
  of the arm coefficient in the block-level fit (arm + position, bracket.stats.compare) at that
  many rounds, over the factor at `max_rounds`.
- Block noise is estimated, so each boundary is turned into its nominal level and the t
  quantile at the look's degrees of freedom is used instead (the "significance level approach",
  Jennison & Turnbull 2000, ch. 11).
- The comparisons of one experiment (arms x workloads) share alpha by Bonferroni: each spends
  alpha / m, so the chance that any interval of any comparison at any look misses its truth is
  at most alpha.

A comparison settles as "faster"/"slower" when its interval lies outside the noise band, or as
"no measurable effect" when it lies within +/- the equivalence margin (the stated
`design.margin`, else WIDE x the comparison's noise band, the width the fixed-design rule asks
of "no measurable effect"). Either claim is wrong only if an interval missed the truth, so the
overall chance of any wrong verdict is at most alpha. A comparison still open at `max_rounds`
is "undetermined" (budget spent). Settled comparisons keep the verdict of the look that settled
them. Every arm runs in every round (an arm whose comparisons are settled may still be the
reference of another, and dropping arms would unbalance the drift fit), so the design stays
A/B/A/B to the end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import optimize, stats

from bracket.stats import defaults as D
from bracket import design as bdesign
from bracket.stats.compare import FASTER, NO_EFFECT, UNDETERMINED, WIDE, CONFOUNDED_VIF, clears

#: Design kinds whose first r rounds are the same blocks whatever the number of rounds drawn
#: (a round added later never reorders the ones run); sequential is not one, and is a control anyway.
ADAPTIVE_KINDS = ("abab", "abba", "bracket", "random")
OPEN, SETTLED = "open", "settled"


def obf_spending(t, alpha: float):
    """Lan-DeMets O'Brien-Fleming-type alpha spent by information fraction t, both sides together.

    Each side spends 2 - 2 Phi(z_{1 - alpha/4} / sqrt(t)) of its alpha / 2, the convention of
    gsDesign's sfLDOF and ldbounds for a symmetric two-sided design (their published boundaries
    for 5 equal looks at alpha 0.05: 4.877, 3.357, 2.680, 2.290, 2.031).
    """
    t = np.asarray(t, dtype=float)
    z = stats.norm.isf(alpha / 4)
    return 2 * np.where(t > 0, 2 * stats.norm.sf(z / np.sqrt(np.maximum(t, 1e-300))), 0.0)


def boundaries(fractions, alpha: float, grid: int = 1601, spending=obf_spending) -> np.ndarray:
    """Two-sided boundaries c_k (z scale) of the Lan-DeMets OBF-type spending at these fractions.

    P(|Z_j| < c_j for j < k, |Z_k| >= c_k) = alpha(t_k) - alpha(t_{k-1}) under no effect, Z_k the
    standardised statistic of a Brownian motion observed at times t_k (recursive integration on a
    grid of the score S_k = Z_k sqrt(t_k), densities carried between looks by the normal kernel).
    """
    t = np.asarray(fractions, dtype=float)
    if t.size == 0 or np.any(np.diff(t) <= 0) or t[0] <= 0 or t[-1] > 1 + 1e-12:
        raise ValueError(f"information fractions must increase within (0, 1], got {list(t)}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    spend = np.diff(np.r_[0.0, spending(t, alpha)])
    c = np.empty(t.size)
    c[0] = stats.norm.isf(spend[0] / 2)
    # density of S_1 on the continuation region, on a grid
    b = c[0] * math.sqrt(t[0])
    x = np.linspace(-b, b, grid)
    f = stats.norm.pdf(x, scale=math.sqrt(t[0]))
    for k in range(1, t.size):
        d = math.sqrt(t[k] - t[k - 1])
        w = np.full(grid, (x[1] - x[0]))
        w[[0, -1]] /= 2  # trapezoid weights
        fw = f * w

        def crossing(ck, k=k, d=d, fw=fw, x=x):
            bk = ck * math.sqrt(t[k])
            return float(fw @ (stats.norm.sf((bk - x) / d) + stats.norm.cdf((-bk - x) / d))) - spend[k]

        if spend[k] <= 0:
            c[k] = math.inf
            continue
        c[k] = optimize.brentq(crossing, 1e-6, 40.0, xtol=1e-9)
        bk = c[k] * math.sqrt(t[k])
        xn = np.linspace(-bk, bk, grid)
        f = stats.norm.pdf((xn[:, None] - x[None, :]) / d) / d @ fw
        x = xn
    return c


def pair_factor(blocks: list[bdesign.Block], baseline: str, candidate: str) -> float:
    """[(X'X)^-1] of the arm term for X = [1, arm, position] over the two arms' blocks."""
    pos = np.array([b.position for b in blocks if b.arm in (baseline, candidate)], dtype=float)
    arm = np.array([b.arm == candidate for b in blocks if b.arm in (baseline, candidate)], dtype=float)
    X = np.column_stack([np.ones(pos.size), arm, pos])
    return float(np.linalg.pinv(X.T @ X)[1, 1])


@dataclass(frozen=True)
class Plan:
    """What the adaptive design fixes before the first block: everything the boundaries depend on."""

    arms: tuple[str, ...]
    reference: str
    workloads: tuple[str, ...]
    kind: str
    seed: int
    min_rounds: int
    max_rounds: int
    alpha: float = 0.05
    margin: float | None = None      # equivalence margin; None: WIDE x the comparison's noise band
    noise_threshold: float = 0.01
    hosts: tuple[str, ...] = ()

    def __post_init__(self):
        if self.kind not in ADAPTIVE_KINDS:
            raise ValueError(f"an adaptive design needs an interleaved kind ({', '.join(ADAPTIVE_KINDS)}), "
                             f"got {self.kind!r}: a sequential design confounds arm with time at every look")
        if not 2 <= self.min_rounds <= self.max_rounds:
            raise ValueError(f"need 2 <= min_rounds <= max_rounds, got min_rounds {self.min_rounds} and "
                             f"max_rounds {self.max_rounds}: one round leaves block noise unmeasured")

    @classmethod
    def of(cls, cfg: dict) -> Plan:
        d, a = cfg["design"], cfg.get("analysis", {})
        return cls(arms=tuple(cfg["arms"]), reference=cfg["reference"], workloads=tuple(cfg["workloads"]),
                   kind=d["kind"], seed=int(d["seed"]), min_rounds=int(d["min_rounds"]),
                   max_rounds=int(d["max_rounds"]), alpha=round(1 - float(a.get("confidence", D.CONFIDENCE)), 12),
                   margin=d.get("margin"), noise_threshold=float(a.get("noise_threshold", 0.01)),
                   hosts=tuple(cfg.get("hosts") or ()))

    @property
    def looks(self) -> list[int]:
        return list(range(self.min_rounds, self.max_rounds + 1))

    @property
    def candidates(self) -> list[str]:
        return [x for x in self.arms if x != self.reference]

    @property
    def comparisons(self) -> int:
        return len(self.candidates) * len(self.workloads)

    def blocks(self, rounds: int) -> list[bdesign.Block]:
        return bdesign.draw_hosts(list(self.arms), self.reference, self.kind, rounds, self.seed, list(self.hosts))

    def fractions(self, candidate: str) -> np.ndarray:
        fmax = pair_factor(self.blocks(self.max_rounds), self.reference, candidate)
        return np.array([fmax / pair_factor(self.blocks(r), self.reference, candidate) for r in self.looks])

    def boundaries(self, candidate: str) -> np.ndarray:
        """z boundaries per look for this candidate's comparisons, at alpha / comparisons each."""
        return _cached_boundaries(tuple(np.round(self.fractions(candidate), 12)), self.alpha / self.comparisons)

    def rule(self) -> str:
        """The stopping rule in words (for the article and stats.json)."""
        margin = f"+/-{self.margin:.1%}" if self.margin else f"+/-{WIDE:g} x its noise band"
        return (f"After each round from {self.min_rounds} to {self.max_rounds}, each of the {self.comparisons} "
                f"comparisons is judged on a repeated confidence interval (Jennison & Turnbull) at the "
                f"Lan-DeMets O'Brien-Fleming-type boundary, spending {self.alpha:g} / {self.comparisons} per "
                f"comparison (Bonferroni): it settles as faster/slower when the interval clears the noise "
                f"band, as no measurable effect when the interval lies within {margin}; another round runs "
                f"while any comparison is open (every arm in every round, so the arms stay interleaved and drift "
                f"stays estimable), and at {self.max_rounds} rounds the open ones are undetermined. "
                f"The chance of any wrong verdict, over every look and comparison, is at most {self.alpha:g}.")


_BOUNDS: dict = {}


def _cached_boundaries(fractions: tuple, alpha: float) -> np.ndarray:
    key = (fractions, round(alpha, 15))
    if key not in _BOUNDS:
        _BOUNDS[key] = boundaries(np.array(fractions), alpha)
    return _BOUNDS[key]


def _r(x: float) -> str:
    return f"{x:.3f}" if 1e-3 <= x <= 1e3 else f"{x:.2g}"


def judge(estimate: float | None, se: float | None, df: float | None, band: float, boundary: float,
          margin: float, final: bool, structural: str | None = None) -> dict:
    """One comparison at one look: the repeated CI and what it settles.

    The boundary's nominal two-sided level 2 Phi(-c) is read on the t distribution with the
    look's df; the interval exp(estimate +/- q se) is the repeated CI of the ratio.
    """
    out = {"rci_low": None, "rci_high": None, "nominal_level": float(1 - 2 * stats.norm.sf(boundary)),
           "boundary_z": float(boundary), "margin": margin, "noise_band": band}
    if structural or estimate is None or se is None or not df:
        why = structural or "no block-level degrees of freedom yet"
        return {**out, "status": SETTLED if final else OPEN, "verdict": UNDETERMINED if final else None,
                "how": f"budget spent: {why}" if final else f"open: {why}"}
    hw = min(float(stats.t.isf(stats.norm.sf(boundary), df)) * se, 50.0)  # capped: exp(50) is no bound
    lo, hi = math.exp(estimate - hw), math.exp(estimate + hw)
    out.update(rci_low=lo, rci_high=hi)
    v = clears(lo, hi, band)
    if v:
        return {**out, "status": SETTLED, "verdict": v,
                "how": f"the repeated CI {_r(lo)}-{_r(hi)} lies {'above' if v == FASTER else 'below'} the "
                       f"{band:.1%} noise band"}
    if lo >= 1 / (1 + margin) and hi <= 1 + margin:
        return {**out, "status": SETTLED, "verdict": NO_EFFECT,
                "how": f"equivalent within +/-{margin:.1%}: the repeated CI {_r(lo)}-{_r(hi)} lies inside it"}
    if final:
        return {**out, "status": SETTLED, "verdict": UNDETERMINED,
                "how": f"budget spent: the repeated CI {_r(lo)}-{_r(hi)} neither clears the {band:.1%} band "
                       f"nor lies within +/-{margin:.1%}"}
    return {**out, "status": OPEN, "verdict": None,
            "how": f"open: the repeated CI {_r(lo)}-{_r(hi)} neither clears the {band:.1%} band nor lies "
                   f"within +/-{margin:.1%}"}


def rounds_available(frame: pd.DataFrame, plan: Plan) -> int:
    """Most rounds r whose every block (the first len(plan.blocks(r)) positions) has rows in `frame`."""
    have = set(pd.to_numeric(frame["position"], errors="coerce").dropna().astype(int))
    best = 0
    for r in range(1, plan.max_rounds + 1):
        if all(b.position in have for b in plan.blocks(r)):
            best = r
        else:
            break
    return best


def assess(frame: pd.DataFrame, plan: Plan, *, compare_fn=None, upto: int | None = None) -> dict:
    """Every look the data allow, per comparison: settled (verdict, how, at which round) or open.

    `frame` is the tidy frame of bracket.stats.io (arm, workload, block, position, value, valid).
    `compare_fn(sub, baseline, candidate, workload)` returns a bracket.stats.compare.Comparison
    (default: bracket.stats.cells.compare_arms at the plan's noise threshold). Returns
    {rule, alpha, family, looks: [{round, blocks, open}], comparisons: [...], rounds_run,
    another_round, next_round}.
    """
    if compare_fn is None:
        from bracket.stats.cells import compare_arms

        def compare_fn(sub, base, cand, wl):
            return compare_arms(sub, base, cand, wl, seed=plan.seed, reference=plan.reference,
                                confidence=1 - plan.alpha, n_resamples=200, noise_threshold=plan.noise_threshold)
    have = rounds_available(frame, plan) if upto is None else upto
    rounds_run = min(have, plan.max_rounds)
    state = {(wl, c): None for wl in plan.workloads for c in plan.candidates}
    history = {key: [] for key in state}
    looks = []
    for k, r in enumerate(plan.looks):
        if r > rounds_run:
            break
        n_blocks = len(plan.blocks(r))
        sub = frame[pd.to_numeric(frame["position"], errors="coerce") < n_blocks]
        final = r == plan.max_rounds
        for (wl, cand), done in state.items():
            if done is not None:
                continue
            c_k = plan.boundaries(cand)[k]
            try:
                comp = compare_fn(sub, plan.reference, cand, wl)
            except ValueError as exc:  # no valid runs for an arm yet
                j = judge(None, None, None, plan.noise_threshold, c_k, plan.margin or 0.0, final, str(exc))
            else:
                structural = ("arm confounded with time" if comp.vif and comp.vif > CONFOUNDED_VIF
                              else None) if comp.se is not None else "fewer than two blocks per arm"
                margin = plan.margin if plan.margin else WIDE * comp.noise_band
                j = judge(comp.estimate, comp.se, comp.df, comp.noise_band, c_k, margin, final, structural)
                j["estimate_ratio"] = math.exp(comp.estimate) if comp.estimate is not None else None
            j.update(round=r, look=k + 1)
            history[(wl, cand)].append(j)
            if j["status"] == SETTLED:
                state[(wl, cand)] = j
        looks.append({"round": r, "blocks": n_blocks,
                      "open": sum(1 for v in state.values() if v is None)})
    comparisons = []
    for (wl, cand), done in state.items():
        last = history[(wl, cand)][-1] if history[(wl, cand)] else None
        comparisons.append({"workload": wl, "candidate": cand, "baseline": plan.reference,
                            "status": SETTLED if done else OPEN,
                            "verdict": done["verdict"] if done else None,
                            "settled_round": done["round"] if done else None,
                            "how": (done or last or {}).get("how", "not looked at yet"),
                            "rci_low": (done or last or {}).get("rci_low"),
                            "rci_high": (done or last or {}).get("rci_high"),
                            "nominal_level": (done or last or {}).get("nominal_level"),
                            "looks": history[(wl, cand)]})
    any_open = any(c["status"] == OPEN for c in comparisons)
    another = rounds_run < plan.min_rounds or (any_open and rounds_run < plan.max_rounds)
    return {"rule": plan.rule(), "alpha": plan.alpha, "family": plan.comparisons,
            "min_rounds": plan.min_rounds, "max_rounds": plan.max_rounds, "margin": plan.margin,
            "spending": "Lan-DeMets O'Brien-Fleming type", "looks": looks, "comparisons": comparisons,
            "rounds_run": rounds_run, "another_round": another,
            "next_round": rounds_run + 1 if another else None}


def apply(rows: list[dict], seq: dict, family: str) -> dict:
    """Put the sequential verdicts on the comparison rows of stats.json (in place); returns `multiplicity`.

    Each row's verdict becomes the one its settling look gave, and verdict_ci_low / verdict_ci_high /
    verdict_ci_level the repeated CI of that look at its nominal level (the CI the verdict rests on);
    a comparison still open (the data stop before the plan's last look) is undetermined.
    """
    by_key = {(c["workload"], c["candidate"]): c for c in seq["comparisons"]}
    for r in rows:
        s = by_key.get((r["workload"], r["candidate"]))
        if s is None:
            continue
        verdict = s["verdict"] if s["status"] == SETTLED else UNDETERMINED
        r.update(verdict=verdict, verdict_ci_low=s["rci_low"], verdict_ci_high=s["rci_high"],
                 verdict_ci_level=s["nominal_level"], p_adjusted=None,
                 multiplicity={"method": "group-sequential (repeated CIs), Bonferroni", "comparisons": seq["family"],
                               "family": family, "level": s["nominal_level"]},
                 sequential={"status": s["status"], "settled_round": s["settled_round"], "how": s["how"]})
        if verdict == UNDETERMINED:
            why = s["how"] if s["status"] == SETTLED else (
                f"still open after {seq['rounds_run']} of at most {seq['max_rounds']} rounds ({s['how']})")
            r["undetermined_reason"] = (f"{why}; raise design.max_rounds or state the smallest difference that "
                                        f"matters as design.margin")
        else:
            r["undetermined_reason"] = None
    return {"method": "group-sequential (repeated CIs, Lan-DeMets O'Brien-Fleming-type spending), Bonferroni",
            "comparisons": seq["family"], "family": family, "confidence": 1 - seq["alpha"],
            "untested": sum(1 for r in rows if (r["workload"], r["candidate"]) not in by_key)}
