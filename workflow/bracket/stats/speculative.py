"""Speculative decoding: acceptance length, acceptance rate, saturation, and the k model.

Definitions (DESIGN.md):
- acceptance length = tokens produced per verify step, the target's own token included:
  1 + accepted / verify_steps;
- acceptance rate = accepted draft tokens / proposed draft tokens;
- saturation = acceptance length / draft budget.

Seed 000 reads saturation, not acceptance rate: "a high acceptance rate can just mean the budget
is so small there's barely anything to get wrong".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from bracket.typed.experiment import Arm


class Reading(StrEnum):
    """Seed 000's reading of a saturation, as a code (stats.json's speculative[].reading); the words are
    bracket.article.speculative's."""

    BUDGET_LIMITED = "budget-limited"  # the drafts are nearly all used
    NEARLY_FULL = "nearly full"  # more budget might pay
    PARTLY_USED = "partly used"  # a larger budget is unlikely to pay much
    GUESSING_BADLY = "guessing badly"  # more budget won't help
    NEVER_DRAFTED = "never drafted"  # the engine proposed no draft token: the arm measured the baseline


class KVerdict(StrEnum):
    """The k model's outcome (stats.json's k_model.verdict)."""

    FALSIFIED = "falsified"  # a tested arm's k lies outside the band
    HELD = "held"  # every tested arm's k lies inside the band or within its tolerance
    UNTESTED = "untested"  # nothing to test (k_model.reason says why)


class KReason(StrEnum):
    """Why the k model went untested, as a code (stats.json's k_model.reason); the words are
    bracket.article.hypotheses'."""

    NO_VALID_RUNS = "no_valid_runs"  # the experiment has no valid run
    NO_BASELINE = "no_baseline"  # every arm decodes speculatively: no baseline for k
    NO_ACCEPTANCE = "no_acceptance"  # no draft/accepted/verify counters for the calibration arms
    ALL_CALIBRATION = "all_calibration"  # every speculative arm set the band: none is left to test it


#: Saturation thresholds and readings, from seed 000's table (MTP 83.2 % "budget-limited",
#: DFlash2 76.5 % "nearly full, more budget might pay", DSpark 58.6 % "guessing badly").
READINGS = (
    (0.80, Reading.BUDGET_LIMITED),
    (0.70, Reading.NEARLY_FULL),
    (0.60, Reading.PARTLY_USED),
    (0.0, Reading.GUESSING_BADLY),
)


def saturation(acceptance_length: float, draft_budget: int) -> float:
    """acceptance length / draft budget. Seed 000: MTP 4.16 / 5 = 83.2 %."""
    if not draft_budget or draft_budget < 1:
        raise ValueError(
            f"`draft_budget` must be a positive integer, got {draft_budget!r}; set arms.NAME.speculative.draft_tokens."
        )
    if not acceptance_length >= 1:
        raise ValueError(
            f"`acceptance_length` counts the target's own token, so it is at least 1; got {acceptance_length!r}."
        )
    return float(acceptance_length / draft_budget)


def reading(sat: float) -> Reading:
    """Seed 000's reading of a saturation (see READINGS)."""
    for floor, code in READINGS:
        if sat >= floor:
            return code
    return READINGS[-1][1]


@dataclass(frozen=True)
class Acceptance:
    acceptance_length: float | None
    acceptance_rate: float | None
    source: str


def acceptance(draft_tokens, accepted_tokens, verify_steps, acceptance_length=None) -> Acceptance:
    """Pooled acceptance of one cell from per-request counter deltas.

    acceptance length = 1 + sum(accepted) / sum(verify_steps);
    acceptance rate = sum(accepted) / sum(draft_tokens).
    Sums, not means of per-request ratios, so long requests weigh by their steps. Requests whose
    counters are missing are left out; with no counters at all, the median of reported
    per-request acceptance lengths is used (source says which).
    """
    d = np.asarray(draft_tokens, dtype=float)
    a = np.asarray(accepted_tokens, dtype=float)
    v = np.asarray(verify_steps, dtype=float)
    ok = np.isfinite(a) & np.isfinite(v) & (v > 0)
    if ok.any():
        al = 1.0 + a[ok].sum() / v[ok].sum()
        okd = ok & np.isfinite(d) & (d > 0)
        rate = float(a[okd].sum() / d[okd].sum()) if okd.any() else None
        return Acceptance(float(al), rate, "counters")
    if acceptance_length is not None:
        al_v = np.asarray(acceptance_length, dtype=float)
        al_v = al_v[np.isfinite(al_v)]
        if al_v.size:
            return Acceptance(float(np.median(al_v)), None, "reported acceptance_length")
    return Acceptance(None, None, "none")


def k_factor(decode: float, baseline: float, acceptance_length: float) -> float:
    """k in decode = k x baseline x acceptance length (seed 000's proposed model).

    Seed 000: DFlash2 draft 12 decoded 68.57 with acceptance length 7.88 against a 12.44
    baseline: k = 68.57 / (12.44 x 7.88) = 0.700.
    """
    if baseline <= 0 or acceptance_length <= 0 or decode <= 0:
        raise ValueError(
            f"k needs positive decode, baseline and acceptance length, got "
            f"{decode!r}, {baseline!r}, {acceptance_length!r}."
        )
    return float(decode / (baseline * acceptance_length))


def in_band(k: float, band: tuple[float, float], tolerance: float = 0.02) -> str:
    """ "yes" inside [lo, hi]; "marginal" outside by at most `tolerance` of the nearer edge; else "no".

    Seed 000 called 0.685 against the band 0.69-0.74 marginal (0.7 % below the edge) and 0.610
    no (12 % below). The 2 % default is about the precision of a k built from three medians that
    each carry ~1 % uncertainty.
    """
    lo, hi = band
    if not lo <= hi:
        raise ValueError(f"band must be (low, high) with low <= high, got {band!r}.")
    if lo <= k <= hi:
        return "yes"
    edge = lo if k < lo else hi
    return "marginal" if abs(k - edge) <= tolerance * edge else "no"


def k_verdict(marks: list[str]) -> KVerdict:
    """ "falsified" if any tested config is out of band ("no"), "held" if all are in or marginal,
    "untested" if there is nothing to test."""
    if not marks:
        return KVerdict.UNTESTED
    return KVerdict.FALSIFIED if "no" in marks else KVerdict.HELD


def band_from(ks: list[float]) -> tuple[float, float]:
    """The band spanned by the calibration configs' k values: (min, max).

    Seed 000: round one's MTP, DSpark and DFlash2 gave k = 0.690, 0.737, 0.708, the band
    "between 0.69 and 0.74".
    """
    if not ks:
        raise ValueError("the k band needs at least one calibration config with a known k.")
    return float(min(ks)), float(max(ks))


def budget_groups(arms: Mapping[str, Arm]) -> list[tuple[str, list[tuple[int, str]]]]:
    """Arms that differ only in their draft budget: [(method label, [(budget, arm), ...]), ...].

    Seed 000's "same flag, different workloads" table changes one flag; arms that also differ in
    the method as launched (ngram-simple vs ngram-mod), the lookup window, the draft model, their
    server settings or extra arguments are a different comparison and go into separate groups.
    Only groups with two budgets or more are returned; within one, budgets ascend, and two arms
    with the same budget and the same settings (replicates) keep the first by name.
    """
    groups: dict = {}
    for name in sorted(arms):
        arm = arms[name]
        spec = arm.speculative
        if spec is None:
            continue
        rest = spec.model_dump(mode="json", exclude_unset=True, exclude={"draft_tokens"})
        server = arm.server.model_dump(mode="json", exclude_unset=True) if arm.server is not None else {}
        key = repr((sorted(rest.items()), sorted(server.items()), list(arm.args), sorted(arm.env.items())))
        label = spec.engine_method or spec.method
        groups.setdefault(key, (label, {}))[1].setdefault(int(spec.draft_tokens), name)
    out = [(label, sorted(by_budget.items())) for label, by_budget in groups.values() if len(by_budget) >= 2]
    labels = [lab for lab, _ in out]
    # two groups of one method (another lookup window, say) are told apart by their arms
    return [
        (lab if labels.count(lab) == 1 else f"{lab} ({', '.join(a for _, a in arms_)})", arms_) for lab, arms_ in out
    ]


def never_drafted(runs) -> list[dict]:
    """Speculative cells whose valid runs carry draft counters that are all zero: the arm never drafted.

    runs: the tidy runs table (records.tidy). A cell counts only when every valid run reports
    draft_tokens (an engine that reports none says nothing either way). Returns one dict per
    (arm, workload): arm, workload, runs, draft_budget.
    """
    import pandas as pd

    if runs is None or runs.empty or "draft_budget" not in runs or "draft_tokens" not in runs:
        return []
    r = runs[runs["valid"].astype(bool) & runs["draft_budget"].notna()]
    out = []
    for (arm, wl), sub in r.groupby(["arm", "workload"], sort=True):
        d = pd.to_numeric(sub["draft_tokens"], errors="coerce")
        if len(d) and d.notna().all() and (d == 0).all():
            out.append(
                {
                    "arm": str(arm),
                    "workload": str(wl),
                    "runs": int(len(d)),
                    "draft_budget": int(sub["draft_budget"].iloc[0]),
                }
            )
    return out


def budget_effects(groups: list[dict], medians: dict, workloads: list[str]) -> list[dict]:
    """Seed 000's "same flag, different workloads": per group of arms that differ only in the draft budget
    (`budget_groups`, as stats.json's `budget_groups` rows {method, arms, budgets}) and per workload on
    which every one of them has a median (`medians`: {(arm, workload): median}), the medians by budget
    and the change from the smallest budget to the largest, last / first - 1.

    Returns the groups with `workloads`: [{workload, medians, change}] in `workloads`' order, and
    `same_direction`: True when the change has one sign on every workload, False when raising the
    budget helps on some and hurts on others, None without a workload.
    """
    out = []
    for g in groups:
        rows = []
        for wl in workloads:
            meds = [medians.get((a, wl)) for a in g["arms"]]
            if any(m is None for m in meds):
                continue
            rows.append({"workload": wl, "medians": [float(m) for m in meds], "change": meds[-1] / meds[0] - 1})
        signs = {r["change"] > 0 for r in rows}
        out.append({**g, "workloads": rows, "same_direction": len(signs) == 1 if rows else None})
    return out


def tokens_per_event(runs) -> list[dict]:
    """Mean completion tokens per stream event of each speculative arm's valid runs (the runs with a draft
    budget), by arm name: [{arm, tokens_per_event}]. Under speculation one event can carry several tokens,
    so a rate counted in events reads that many times lower than completion_tokens / wall time."""
    if runs is None or runs.empty or "draft_budget" not in runs or "stream_events" not in runs:
        return []
    r = runs[runs["valid"].astype(bool) & runs["draft_budget"].notna()]
    tpe = (r["completion_tokens"] / r["stream_events"]).groupby(r["arm"]).mean()
    return [{"arm": str(a), "tokens_per_event": float(v)} for a, v in tpe.items()]
