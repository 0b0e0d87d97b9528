"""Hosts as a factor: drift on each host, and each host compared with the first, with a CI.

An experiment with named hosts (`hosts:` in the experiment file) runs the whole design on every
host, side by side (bracket.experiment.design.draw_hosts). "Same build, three boxes: is box 2 slower?" is
then a comparison like any other: for each arm and workload, host j against the first host,
with the ratio of medians, its hierarchical bootstrap CI, a test and a verdict from
`bracket.stats.compare`, the hosts playing the part the arms play there.

Time on a host is its slot: the index of the block in that host's own sequence. Blocks of one
slot ran at the same time on different hosts, so a host comparison's drift term is fitted on
slots, and each host's drift is its own reference arm's first vs last block, its rounds and its
trend per block, exactly as `analyze` reports them for a single machine.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pandas as pd

from bracket.stats import defaults as D
from bracket.stats._seeds import derive_seed
from bracket.stats.cells import compare_arms, valid_rows
from bracket.stats.drift import first_vs_last, round_changes, trend
from bracket.stats.findings import Drift, Finding, HostDiffers, NotCompared
from bracket.stats.findings import FindingKind as K
from bracket.stats.multiplicity import Family, holm

if TYPE_CHECKING:
    from bracket.typed.experiment import Experiment


def host_names(runs: pd.DataFrame, experiment: Experiment) -> list[str]:
    """The hosts present in the runs, in the experiment's order (unknown ones after, sorted)."""
    if "host" not in runs.columns:
        return []
    seen = {str(h) for h in runs["host"].dropna().unique() if str(h)}
    order = [h for h in experiment.hosts if h in seen]
    return order + sorted(seen - set(order))


def with_slots(frame: pd.DataFrame, hosts: pd.Series) -> pd.DataFrame:
    """`frame` with a `host` column and `slot`: the dense rank of the block's position on its host.

    With H hosts, slot s of host i has position s * H + i, so slot = position // H for a complete
    schedule; ranking instead also holds when some blocks are missing.
    """
    if len(hosts) != len(frame):
        raise ValueError(
            f"`hosts` has {len(hosts)} rows but the frame has {len(frame)}; pass the runs "
            f"table the frame was built from."
        )
    out = frame.copy()
    out["host"] = hosts.to_numpy()
    out["slot"] = out.groupby("host")["position"].rank(method="dense") - 1
    return out


def host_drift(frame: pd.DataFrame, reference: str, *, confidence: float = D.CONFIDENCE) -> dict:
    """Per host and workload: the reference's first vs last block, the rounds, and the trend per slot.

    The same three views as analyze's `drift` (bracket.stats.drift), computed on each host's valid
    runs alone, with the host's slot as time: a slow box does not pass for drift, nor drift on one
    box for a difference between boxes.
    """
    out: dict = {}
    v = valid_rows(frame)
    for host, on_host in v.groupby("host", sort=False):
        per_wl = {}
        for wl, sub in on_host.groupby("workload", sort=True):
            timed = sub.assign(position=sub["slot"])
            ref = first_vs_last(timed, reference)
            tr = trend(timed, reference, confidence=confidence)
            per_wl[str(wl)] = {
                "reference_first_vs_last": ref["change"] if ref else None,
                "reference_blocks": ref,
                "rounds": round_changes(sub),
                "slope_per_block": tr.slope if tr else None,
                "slope_ci": list(tr.slope_ci) if tr and tr.slope_ci else None,
                "slope_p": tr.slope_p if tr else None,
            }
        out[str(host)] = per_wl
    return out


def compare_hosts(
    frame: pd.DataFrame,
    hosts: list[str],
    arms: list[str],
    *,
    seed: int,
    confidence: float = D.CONFIDENCE,
    n_resamples: int = D.RESAMPLES,
    noise_threshold: float = D.NOISE_THRESHOLD,
) -> tuple[list[dict], list[str]]:
    """Each host against the first, per arm and workload, with `bracket.stats.cells.compare_arms`.

    Within one arm the hosts take the place of arms (ratio = median on host j / median on the
    first host, > 1 is faster), the slot is the time, and the drift that sets the noise band is
    the larger round-to-round change of the two hosts. Returns (rows, notes about rows that could
    not be compared).
    """
    rows, notes = [], []
    base = hosts[0]
    for arm in arms:
        sub = frame[frame["arm"] == arm]
        if sub.empty:
            continue
        as_arms = sub.assign(arm=sub["host"], position=sub["slot"])
        for wl in sorted(valid_rows(as_arms)["workload"].unique()):
            for host in hosts[1:]:
                try:
                    c = compare_arms(
                        as_arms,
                        base,
                        host,
                        wl,
                        seed=derive_seed(seed, "hosts", arm),
                        reference=base,
                        confidence=confidence,
                        n_resamples=n_resamples,
                        noise_threshold=noise_threshold,
                    )
                except ValueError as exc:
                    notes.append(
                        Finding(K.NOT_COMPARED, NotCompared(str(exc)), host=host, vs=base, arm=arm, workload=str(wl))
                    )
                    continue
                rows.append(
                    {"arm": arm, "workload": str(wl), "baseline": base, "candidate": host, **dataclasses.asdict(c)}
                )
    return rows, notes


def hosts_section(
    runs: pd.DataFrame,
    frame: pd.DataFrame,
    experiment: Experiment,
    reference: str,
    *,
    seed: int,
    confidence: float = D.CONFIDENCE,
    n_resamples: int = D.RESAMPLES,
    noise_threshold: float = D.NOISE_THRESHOLD,
) -> tuple[dict | None, list[Finding]]:
    """stats.json's `hosts` section and its warnings; (None, []) when the runs name fewer than two hosts.

    Keys: names (hosts in the experiment's order; the first is the baseline), baseline,
    drift ({host: {workload: ...}}, see `host_drift`), comparisons (one row per arm, workload and
    host after the first, see `compare_hosts`; the reference arm's rows answer "is this box
    slower?").
    """
    names = host_names(runs, experiment)
    if len(names) < 2:
        return None, []
    framed = with_slots(frame, runs["host"].reset_index(drop=True))
    framed = framed[framed["host"].isin(names)]  # runs without a named host take no part
    arms = [reference] + [a for a in experiment.arms if a != reference]
    comparisons, warnings = compare_hosts(
        framed, names, arms, seed=seed, confidence=confidence, n_resamples=n_resamples, noise_threshold=noise_threshold
    )
    holm(comparisons, confidence, family=Family.HOSTS)
    drift = host_drift(framed, reference, confidence=confidence)
    for c in comparisons:
        if c["arm"] == reference and c["verdict"] in ("faster", "slower"):
            warnings.append(
                Finding(
                    K.HOST_DIFFERS,
                    HostDiffers(c["candidate"], c["verdict"], c["ratio"], c["ci_low"], c["ci_high"]),
                    host=c["candidate"],
                    vs=c["baseline"],
                    arm=reference,
                    workload=c["workload"],
                )
            )
    for host, per_wl in drift.items():
        for wl, d in per_wl.items():
            change = d["reference_first_vs_last"]
            if change is not None and abs(change) > noise_threshold:
                warnings.append(
                    Finding(
                        K.HOST_DRIFT,
                        Drift(reference, float(change), float(noise_threshold)),
                        host=host,
                        workload=wl,
                    )
                )
    return {"names": names, "baseline": names[0], "drift": drift, "comparisons": comparisons}, warnings
