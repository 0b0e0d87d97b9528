"""The workflow's analyze step: runs.csv + the validated experiment -> stats.json (one dict)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter

import numpy as np
import pandas as pd

from bracket import version
from bracket.physics.ceiling import measured
from bracket.records import guards
from bracket.stats import conservatism, stated
from bracket.stats import findings as F
from bracket.stats import neutrality as neutral
from bracket.stats import phases as ph
from bracket.stats import sequential as seq
from bracket.stats import speculative as spec
from bracket.stats.best import best, recommend, workload_order  # noqa: F401  (recommend: older callers)
from bracket.stats.cells import cell_summaries, compare_arms, first_run_slow, valid_rows
from bracket.stats.coverage import unmeasured
from bracket.stats.design_ran import design_ran
from bracket.stats.drift import first_vs_last, round_changes, trend
from bracket.stats.drift import worst as worst_drift
from bracket.stats.efficiency import above_ceiling, reference_reading
from bracket.stats.findings import Finding, records
from bracket.stats.findings import FindingKind as K
from bracket.stats.gaps import block_gaps
from bracket.stats.gaps import findings as gap_findings
from bracket.stats.hosts import hosts_section
from bracket.stats.io import from_runs
from bracket.stats.levels import levels
from bracket.stats.multiplicity import FAMILY, holm
from bracket.stats.provenance import provenance
from bracket.typed.experiment import Experiment

VALUE = "decode_tok_s"
#: stats.json's contract version: 2 made findings data (kind + payload) and added design_ran,
#: physics' reference_reading and above_ceiling, budget_groups' effects and tokens_per_event; 3 added
#: `experiment` and physics' `weights` and `ceiling` (bracket.stats.stated); 4 added `provenance` (what ran, from the
#: blocks' meta, the failed attempts and the model's build record: bracket.stats.provenance): the article reads
#: nothing else.
STATS_VERSION = 4


def jsonable(obj):
    """Plain JSON types: dataclasses to dicts, numpy to Python, NaN and inf to None."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return jsonable(dataclasses.asdict(obj))
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (np.bool_, bool)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    return obj


def _counts(runs: pd.DataFrame, frame: pd.DataFrame) -> dict:
    """Invalid timed runs by kind (records.INVALID_KINDS): warmups are counted apart, and each run once,
    under its first reason (an early stop is also short of max_tokens; it is one invalid run, not two)."""
    kinds = frame.loc[~frame["valid"], "invalid_kind"].replace("", "unknown")
    reasons = Counter(k for k in kinds if k != "warmup")
    warm = int(pd.Series(runs.get("warmup", False)).fillna(False).astype(bool).sum()) if "warmup" in runs else 0
    return {
        "total": int(len(frame)),
        "valid": int(frame["valid"].sum()),
        "warmups": warm,
        "invalid": int((~frame["valid"]).sum()) - warm,
        "invalid_by_reason": dict(sorted(reasons.items())),
    }


def _draft_budgets(experiment: Experiment, frame: pd.DataFrame) -> dict:
    out = {}
    for name, arm in experiment.arms.items():
        if arm.speculative is not None:
            out[name] = int(arm.speculative.draft_tokens)
    for name, sub in frame.groupby("arm"):
        if name not in out and sub["draft_budget"].notna().any():
            out[str(name)] = int(sub["draft_budget"].dropna().iloc[0])
    return out


def _block_cost_runs(runs: pd.DataFrame, experiment: Experiment) -> float:
    d = experiment.design
    wall = pd.to_numeric(runs.get("wall_s", pd.Series(dtype=float)), errors="coerce").median()
    cooldown = d.cooldown_s / wall if wall and math.isfinite(wall) and wall > 0 else 0.0
    return max(1.0, d.warmup_runs + cooldown)


def same_settings(experiment: Experiment) -> dict | None:
    """An A/A experiment, as its configuration declares it: arms whose settings (all but the label) are
    those of the reference. All arms so: the experiment is an A/A test, a drift test whose comparisons
    say how large a difference this setup resolves, not which setting to use. Some arms so: those
    comparisons are A/A controls beside the others."""
    arms = experiment.arms
    reference = experiment.reference

    def settings(arm):
        return json.dumps(arms[arm].model_dump(mode="json", exclude_unset=True, exclude={"label"}), sort_keys=True)

    if len(arms) == 1:  # the reference alone, compared with itself block by block: drift and nothing else
        return {"reference": reference, "arms": [], "all": True}
    same = [a for a in arms if a != reference and settings(a) == settings(reference)]
    if not same:
        return None
    return {"reference": reference, "arms": same, "all": len(same) == len(arms) - 1}


def analyze(
    runs: pd.DataFrame,
    experiment: Experiment,
    ceiling: dict | None = None,
    control: pd.DataFrame | None = None,
    metas: list[dict] | None = None,
    *,
    weights: dict | None = None,
    schedule: pd.DataFrame | None = None,
    name: str | None = None,
    failed_attempts: list[dict] | None = None,
    model_dir: str | None = None,
    model_build: dict | None = None,
    torn_records: list[dict] | None = None,
) -> dict:
    """Every statistic of one experiment, as a JSON-serialisable dict (results/NAME/stats.json).

    Only rows with valid == True enter statistics; the value is decode_tok_s
    (completion_tokens / wall time). Ratios and changes are fractions (0.013 is 1.3 %).

    Keys
    ----
    seed, confidence, resamples, value
        The analysis seed (every bootstrap derives its own stream from it and the names of what
        it describes, recorded as `seed` in each cell/comparison), the CI level, the bootstrap
        replicates, and the analysed column ("decode_tok_s").
    reference, design, noise_threshold, spread_warning
        From the experiment, echoed so the report needs nothing else.
    experiment
        The experiment as the article names it (bracket.stats.stated.experiment): name (`name`, else
        runs.csv's experiment column), title, question, reference, arms in order with label, speculative,
        args and server, workloads in order, engine, design as planned, request, and the schedule
        (`schedule`, schedule.csv) as planned.
    counts
        {total, valid, warmups, invalid (not counting warmups), invalid_by_reason, torn}: torn counts the records
        a crash cut short at the end of a block's file (`torn_records`, rule collect's torn_records.json: {file,
        line, bytes}), which no row holds; each is also a finding (torn record) that names it.
    cells
        One per (arm, workload): n, median, ci_low, ci_high (block-level t interval around
        `center`, the mean log block median, with two blocks or more; else a percentile bootstrap
        of the requests; `method` says which), blocks, modes (both modes of a bimodal cell),
        min, max, spread = (max - min) / median, mean, std, outliers (indices, kept), warnings,
        runs_needed (runs to pin the median to +/- noise_threshold, only when spread >
        spread_warning, else null), seed.
    comparisons
        Each non-reference arm vs the reference, per workload (bracket.stats.compare; the block
        is the unit). One contract for intervals: ratio with ci_low/ci_high at ci_level is the
        estimate and the CI the verdict rests on (the `basis` fit, at the level multiplicity or the
        adaptive design's boundary leaves it; beside "undetermined" without one, the basis CI at
        `confidence`; with fewer than two blocks per arm, where no interval supports a verdict, null,
        and raw_ci_* hold the request-level bootstrap); raw_ratio with raw_ci_low/raw_ci_high is the
        raw fit (OLS on log block medians, arm only, t on the blocks' df; unadjusted),
        drift_adjusted_ratio with its CI the fit with arm + position (unadjusted); ratio_of_medians (pooled requests), basis (which
        fit the verdict rests on), ci_method (where the interval comes from) and test, as data
        (bracket.stats.reasons.CiMethod and SignificanceTest records: kind, block summary, df, variance;
        the words are bracket.article.verdicts'), block_statistic ("median" or "mean" of log rate),
        p_value (no effect), p_beyond_band (the effect lies
        outside the noise band) and p_adjusted (Holm), multiplicity {method, comparisons, family,
        level}, verdict
        ("faster" | "slower" | "no measurable effect" | "undetermined"), undetermined (why, as a
        bracket.stats.reasons.Undetermined record: a Why code and its numbers; null beside a verdict),
        rounds_needed / rounds_needed_for (the A/B/A/B rounds at which the comparison reaches
        rounds_needed_goal, a bracket.stats.reasons.Goal, with rounds_needed_power for a true ratio of
        rounds_needed_effect, from the block variance measured, and its CI half-width there, a fraction), steps
        (fits with a level step in place of the drift line where the design cannot see one: bracket.stats.steps),
        estimate/se/df/pooled/block_var/within_var (the basis fit on the log scale), drift, drift_per_block, noise_band, notes.
    multiplicity
        {method ("holm" or "none" for one comparison), comparisons (family size), family (a
        bracket.stats.multiplicity.Family code), confidence, untested (comparisons without a test, left out of
        the family)}; for an adaptive design method "group_sequential" (each comparison starting at alpha /
        comparisons, Holm-type recycling).
    sequential
        Null unless design.rounds is adaptive: bracket.stats.sequential.assess on these runs:
        alpha, family, recycled, min_rounds, first_look (the first round
        judged: min_rounds or later, until every comparison's block-level fit has two residual
        degrees of freedom; round 3 of A/B/A/B), max_rounds, margin, looks
        [{round, blocks, level, open}], comparisons [{workload, candidate, status, verdict,
        settled_round, look, rci_low, rci_high, nominal_level, level, looks}], rounds_run,
        another_round; each look a bracket.stats.sequential.judge record (an Outcome code, its repeated CIs,
        band and margin; no words: bracket.article.looks and .verdicts say the rule and each look). Each
        comparison then also has `sequential` {status, settled_round, look}, and its verdict and
        ci_low/ci_high/ci_level are the settling look's repeated CI.

    Files written before issue 29 named the verdict's interval verdict_ci_* and gave the raw fit as
    ratio/ci_*; readers pass them through bracket.stats.contract.current.
    conservatism
        Where the comparisons' intervals get their width against an oracle's that knew the noise
        (bracket.stats.conservatism.summary, over the comparisons with a block-level fit):
        comparisons, df and df_factor (t on the fit's df over z), level and level_factor (the
        level multiplicity or the adaptive boundary draws the interval at), drift_factor and
        drift_fits (sqrt of the arm's variance inflation by the drift term), pooled and floored
        (counts whose variance took request noise in), runs_per_block and median_factor ((pi / 2)
        over n times a median's variance at n runs), band_raised and band_max (noise bands raised
        above `threshold` by fitted drift), total (df x level x drift factors, [min, max]); null
        without a block-level fit.
    undetermined
        [{workload, candidate, reason (its `undetermined` record), rounds_needed, rounds_needed_for}] for
        each undetermined comparison.
    drift
        Per workload: reference_first_vs_last (ln(last block median / first block median) of
        the reference, which is (last - first) / mean to third order, with both medians and
        positions; null with one reference block), rounds ({arm: {medians by round, change}}),
        slope_per_block (OLS of log block medians on arm indicators + position: exp(slope) - 1
        is the relative change per block), slope_ci, slope_p (t on the blocks' df), blocks, df,
        slope_theil_sen (median within-arm slope between blocks, robust to a wild block),
        effects ({arm: drift-adjusted ratio to the reference with CI}); null values when the
        design cannot separate time from arm.
        With several hosts, the first and last blocks ran on different machines: read each
        host's drift in `hosts` (its warning replaces the one of reference_first_vs_last).
    drift_worst
        The largest |reference_first_vs_last| over the workloads, against noise_threshold
        (bracket.stats.drift.worst: change, workload, threshold, beyond); null where none was measured.
    speculative
        One per speculative arm and workload: draft_budget, acceptance_length (1 + sum accepted
        / sum verify steps), acceptance_rate (sum accepted / sum proposed), saturation
        (acceptance length / draft budget), reading (seed 000's reading as a code: bracket.stats.speculative.Reading),
        source.
    k_model
        Seed 000's decode = k x baseline x acceptance_length. baseline = the non-speculative arm
        (the reference if it is one) on the same workload. band = [min k, max k] over the
        calibration arms: the first half (rounded up) of the speculative arms in the
        experiment's order, as seed 000 set its band from the first round's configs; the other
        arms are tested: in_band "yes" inside, "marginal" within 2 % of an edge, else "no".
        verdict: "falsified" if any tested row is "no", "held" otherwise, "untested" when there
        is no baseline, no acceptance data or no arm left to test (reason, a
        bracket.stats.speculative.KReason code, says which; bracket.article.hypotheses words it).
    levels
        Per (arm, workload) with two blocks or more: between- and within-block variance of
        log(rate), the between share, the cost-optimal runs per block and advice (a
        bracket.stats.levels.Advice code, worded by bracket.article.advice; Kalibera & Jones), with block_cost_runs (warmup runs + cooldown in run lengths).
    best
        Per workload: the arm with the highest median, with n, min, max, ratio_to_reference,
        picked_from (arms it was picked from), and its comparison's verdict and the CI that
        verdict rests on (ci_low, ci_high, ci_level, ci_basis: multiplicity-adjusted; null for
        the reference itself), and the recommendation: use (the arm to run) and use_because
        ("reference fastest", "shown faster" or "not shown", see `recommend`).
    physics
        The measurement against ceiling.json (`ceiling`, when given): efficiency of each arm
        without speculation, the reference's median and seed 000's precision hypotheses
        evaluated at it (bracket.physics.ceiling.measured); reference_reading (the reference's efficiency
        over its workloads, its regime, the spread of its workload medians and whether they are
        flat: bracket.stats.efficiency.reference_reading) and above_ceiling (rows of arms without
        speculation above the plain ceiling); weights and ceiling, the byte account (`weights`,
        weights.json) and the ceiling as the article prints them (bracket.stats.stated.physics_inputs).
        None where neither file was given.
    phases
        TTFT apart from decode (bracket.stats.phases): margin (analysis.phase_margin), rule, and rows,
        one per arm and workload: n, ttft_s, tg_tok_s (decode phase, first to last token) and
        decode_tok_s, each the cell's median with ci_low/ci_high (ttft_ci_low, tg_ci_low, ...),
        ttft_share (median TTFT / wall time), and for the non-reference arms each one's block-level
        ratio to the reference with its CI (ttft_ratio, tg_ratio, decode_ratio, ..._ci_low/high) and
        in_ttft (True: the difference lives in TTFT, a "server state" finding names it; None:
        not decidable). Null for a table without ttft_s.
    guards
        Seed 000's raw-data checks as facts (bracket.records.guards).
    neutrality
        The instrument's cost from the neutrality control's records (`control`, records.control_table):
        bracket.stats.neutrality.instrument_cost (ratio of bracket's per-token server time to the plain
        request's, with its block-level CI, basis, blocks, pairs, per_block), plus `status`: "on", "off"
        (with `off_reason`, controls.neutrality_off) or "no_records" (the blocks ran no control pairs), and
        `reading` (bracket.stats.neutrality.Reading: the cost against `threshold`, 1 %, either way). A
        finding of kind "instrument" when the cost and its whole CI lie beyond 1 % either way.
    hosts
        Null unless the runs name two hosts or more (`hosts:` in the experiment): names, baseline
        (the first host), drift per host and workload (as `drift`, time counted in that host's
        blocks), and comparisons: each host against the first, per arm and workload, with the
        fields of `comparisons` (see bracket.stats.hosts).
    gaps
        From the blocks' provenance (`metas`, raw/block-K.meta.json), null without it: the time from one
        block's end to the next one's server start on its host, against the design's cooldown
        (bracket.stats.gaps: n, median_s, max_s, cooldown_s, over, gaps); a finding when a gap exceeds
        the cooldown by more than a minute.
    unmeasured
        Each arm and single-request workload without a valid timed run, with its runs by invalid kind
        (bracket.stats.coverage): while an arm is in it, no arm is named fastest.
    design_ran
        The design as the runs show it ran (bracket.stats.design_ran): rounds, blocks, order, runs_per_block
        and warmup_runs with their _min/_max per block and workload; null for a table without blocks.
    budget_groups, tokens_per_event
        Arms that differ only in the draft budget ({method, arms, budgets}), with each workload's medians
        by budget and the change from the smallest to the largest, and same_direction
        (bracket.stats.speculative.budget_effects); mean completion tokens per stream event of each
        speculative arm (bracket.stats.speculative.tokens_per_event).
    findings
        What went wrong and what to change, as data: records {kind, arm, vs, workload, host, payload}
        (bracket.stats.findings: kind is a FindingKind, payload its numbers). Their sentences are made
        by bracket.article.findings, for the article and the CLI alike.
    provenance
        What ran, as the article's method section states it (bracket.stats.provenance): each block's status,
        start, server and telemetry, the engine and its versions, the hardware by host, whether priority,
        process layout and pinning were the same in every block, the weights' hashes against the pin, each
        arm's flags, server state and first launch command, from the blocks' provenance (`metas`); the failed
        attempts (`failed_attempts`, failed_attempts.json); the model as the workflow resolved it (`model_dir`)
        and its build record (`model_build`, build.json).
    stats_version
        4 (STATS_VERSION); readers of older files pass them through bracket.stats.contract.current.
    """
    if not isinstance(experiment, Experiment):
        raise TypeError(
            f"analyze needs the validated experiment (bracket.experiment.config.validate or load, or "
            f"bracket.experiment.resolved.read), got {type(experiment).__name__}."
        )
    a = experiment.analysis
    seed, conf = int(a.seed), float(a.confidence)
    R, thr = int(a.bootstrap_resamples), float(a.noise_threshold)
    spread_warn = float(a.spread_warning)
    reference = experiment.reference
    frame = from_runs(runs)
    valid = valid_rows(frame)
    if name is None:
        name = (
            str(runs["experiment"].dropna().iloc[0])
            if "experiment" in runs and runs["experiment"].notna().any()
            else "experiment"
        )
    out: dict = {
        "stats_version": STATS_VERSION,
        "seed": seed,
        "confidence": conf,
        "resamples": R,
        "value": VALUE,
        "reference": reference,
        "design": experiment.design.kind,
        "noise_threshold": thr,
        "spread_warning": spread_warn,
        "aa": same_settings(experiment),
        "counts": {**_counts(runs, frame), "torn": len(torn_records or [])},
        "design_ran": design_ran(runs),
        "unmeasured": unmeasured(runs, experiment),
        "experiment": stated.experiment(experiment, name, schedule),
        "provenance": provenance(metas or [], failed_attempts, model_dir, model_build, experiment, version.info()),
    }
    # what was lost before any row: named whether or not anything else was measured
    warnings: list[Finding] = [
        Finding(K.TORN_RECORD, F.TornRecord(str(t["file"]), int(t["line"]), int(t["bytes"])))
        for t in torn_records or []
    ]
    if valid.empty:
        out.update(
            cells=[],
            comparisons=[],
            drift={},
            drift_worst=None,
            speculative=[],
            levels=[],
            best={},
            hosts=None,
            phases=None,
            conservatism=None,
            budget_groups=[],
            tokens_per_event=[],
            k_model={"band": None, "rows": [], "verdict": spec.KVerdict.UNTESTED, "reason": spec.KReason.NO_VALID_RUNS},
        )
        out["findings"] = records([Finding(K.NO_VALID_RUNS), *warnings])
        return jsonable(out)

    cells = cell_summaries(frame, seed=seed, confidence=conf, n_resamples=R, spread_warning=spread_warn, precision=thr)
    out["cells"] = [{"arm": arm, "workload": wl, **dataclasses.asdict(s)} for arm, wl, s in cells]
    medians = {(arm, wl): s.median for arm, wl, s in cells}
    for arm, wl, s in cells:
        warnings += [dataclasses.replace(w, arm=arm, workload=wl) for w in s.warnings]

    workloads = sorted(valid["workload"].unique())
    out["hosts"], host_warnings = hosts_section(
        runs, frame, experiment, reference, seed=seed, confidence=conf, n_resamples=R, noise_threshold=thr
    )
    warnings += host_warnings
    out["drift"] = {}
    for wl in workloads:
        sub = valid[valid["workload"] == wl]
        ref = first_vs_last(sub, reference)
        tr = trend(sub, reference, confidence=conf)
        out["drift"][wl] = {
            "reference_first_vs_last": ref["change"] if ref else None,
            "reference_blocks": ref,
            "rounds": round_changes(sub),
            "slope_per_block": tr.slope if tr else None,
            "slope_ci": list(tr.slope_ci) if tr and tr.slope_ci else None,
            "slope_p": tr.slope_p if tr else None,
            "effects": tr.effects if tr else {},
            "ci_method": tr.ci_method if tr else None,
            "blocks": tr.blocks if tr else None,
            "df": tr.df if tr else None,
            "slope_theil_sen": tr.slope_theil_sen if tr else None,
        }
        # With several hosts the first and last blocks ran on different machines: drift is per host.
        if ref and abs(ref["change"]) > thr and out["hosts"] is None:
            warnings.append(Finding(K.DRIFT, F.Drift(reference, float(ref["change"]), thr), workload=wl))

    out["drift_worst"] = worst_drift(out["drift"], thr)
    out["comparisons"], notes = [], {}
    for wl in workloads:
        arms_here = sorted(valid.loc[valid["workload"] == wl, "arm"].unique())
        if reference not in arms_here:
            warnings.append(Finding(K.NO_REFERENCE, F.NoReference(reference), workload=wl))
            continue
        for arm in arms_here:
            if arm == reference:
                continue
            try:
                c = compare_arms(
                    frame,
                    reference,
                    arm,
                    wl,
                    seed=seed,
                    reference=reference,
                    confidence=conf,
                    n_resamples=R,
                    noise_threshold=thr,
                )
            except ValueError as exc:
                warnings.append(Finding(K.NOT_COMPARED, F.NotCompared(str(exc)), arm=arm, vs=reference, workload=wl))
                continue
            notes[(wl, arm)] = c.notes
            out["comparisons"].append(
                {"workload": wl, "baseline": reference, "candidate": arm, **dataclasses.asdict(c)}
            )
    out["sequential"] = None
    if experiment.design.rounds == "adaptive":
        # looked at after every round: the verdicts are the looks', on repeated CIs (bracket.stats.sequential)
        out["sequential"] = seq.assess(frame, seq.Plan.of(experiment))
        out["multiplicity"] = seq.apply(out["comparisons"], out["sequential"], FAMILY)
    else:
        m = holm(out["comparisons"], conf)
        out["multiplicity"] = {
            "method": "holm" if m > 1 else "none",
            "comparisons": m,
            "family": FAMILY,
            "confidence": conf,
            "untested": sum(1 for c in out["comparisons"] if c.get("p_beyond_band") is None),
        }
    out["conservatism"] = conservatism.summary(out["comparisons"], conf, thr)
    for c in out["comparisons"]:  # the verdicts are final here (the adaptive design's looks included)
        where = dict(arm=c["candidate"], vs=reference, workload=c["workload"])
        warnings += [dataclasses.replace(n, **where) for n in notes[(c["workload"], c["candidate"])]]
        if c["verdict"] == "undetermined":
            payload = F.Undetermined(c["undetermined"], c["rounds_needed"])
            warnings.append(Finding(K.UNDETERMINED, payload, **where))
    out["undetermined"] = [
        {
            "workload": c["workload"],
            "candidate": c["candidate"],
            "reason": c["undetermined"],
            "rounds_needed": c["rounds_needed"],
            "rounds_needed_for": c["rounds_needed_for"],
        }
        for c in out["comparisons"]
        if c["verdict"] == "undetermined"
    ]

    out["phases"], phase_findings = _phases(
        runs, reference, seed=seed, confidence=conf, n_resamples=R, margin=float(a.phase_margin)
    )
    warnings += phase_findings
    out["speculative"], out["k_model"] = _speculative(experiment, valid, medians, reference)
    never = spec.never_drafted(runs)
    silent = {(c["arm"], c["workload"]) for c in never}
    for r in out["speculative"]:
        if (r["arm"], r["workload"]) in silent:
            r["reading"] = spec.Reading.NEVER_DRAFTED
    # an arm that drafted on no workload is not a budget: the table of budgets leaves it out
    mute = {c["arm"] for c in never} - {
        a for a, w in valid[["arm", "workload"]].drop_duplicates().itertuples(index=False) if (a, w) not in silent
    }
    groups = [
        {"method": label, "arms": [a for _, a in arms], "budgets": [k for k, _ in arms]}
        for label, arms in spec.budget_groups({a: v for a, v in experiment.arms.items() if a not in mute})
    ]
    order = workload_order(experiment, runs)
    out["budget_groups"] = spec.budget_effects(groups, medians, order)
    out["tokens_per_event"] = spec.tokens_per_event(runs)
    out["never_drafted"] = never
    for c in never:
        payload = F.NeverDrafted(int(c["runs"]), c["draft_budget"])
        warnings.append(Finding(K.NEVER_DRAFTED, payload, arm=c["arm"], workload=c["workload"]))
    out["levels"] = _levels(runs, experiment, valid)
    out["best"] = best(out["cells"], out["comparisons"], medians, reference)
    plain = [a for a, arm in experiment.arms.items() if arm.speculative is None]
    out["physics"] = None
    if ceiling is not None or weights is not None:
        m = measured(ceiling, out["cells"], reference, plain)
        eff = m["efficiency"]
        out["physics"] = {
            **m,
            "reference_reading": reference_reading(eff, reference, order),
            "above_ceiling": above_ceiling(eff),
            **stated.physics_inputs(weights, ceiling),
        }
    warnings += _machine((ceiling or {}).get("machine_steadiness"), spread_warn)
    out["guards"] = guards(runs)
    out["gaps"] = block_gaps(metas or [], float(experiment.design.cooldown_s))
    warnings += gap_findings(out["gaps"])
    c = experiment.controls
    if not c.neutrality:
        out["neutrality"] = {"status": "off", "off_reason": c.neutrality_off}
    else:
        cost = neutral.instrument_cost(control, conf) if control is not None else None
        out["neutrality"] = {
            "status": "on" if cost else "no_records",  # no_records: a stand-in server, or from before the control
            **(cost or {}),
            "reading": neutral.reading(cost),
            "threshold": neutral.THRESHOLD,
        }
        warnings += neutral.findings(cost)
    unreported = out["guards"]["cache_unreported_unique"]
    if unreported:
        warnings.append(Finding(K.CACHE_UNREPORTED, F.CacheUnreported(int(unreported))))

    if experiment.design.kind == "sequential":
        warnings.append(Finding(K.SEQUENTIAL))
    for arm, wl, hits, total in first_run_slow(frame):
        warnings.append(Finding(K.SLOW_FIRST_RUN, F.SlowFirstRun(int(hits), int(total)), arm=arm, workload=wl))
    exp = (
        str(runs["experiment"].dropna().iloc[0])
        if "experiment" in runs and runs["experiment"].notna().any()
        else "NAME"
    )
    for reason, n in out["counts"]["invalid_by_reason"].items():  # reason is a kind (records.INVALID_KINDS)
        warnings.append(Finding(K.INVALID, F.Invalid(int(n), str(reason), exp)))
    out["findings"] = records(warnings)
    return jsonable(out)


def _machine(steady: dict | None, threshold: float) -> list[Finding]:
    """A finding when the machine's memory copy rate moved by `threshold` or more before the blocks
    (bracket.physics.steadiness.summary's record)."""
    if not steady or steady.get("spread") is None or steady["spread"] < threshold:
        return []
    keys = ("spread", "window_s", "seconds", "low_gbps", "high_gbps")
    return [Finding(K.MACHINE, F.Machine(**{k: float(steady[k]) for k in keys}, threshold=float(threshold)))]


def _phases(runs, reference, *, seed, confidence, n_resamples, margin):
    """TTFT apart from decode for every arm (bracket.stats.phases), and the arms whose difference lives in TTFT."""
    if "ttft_s" not in runs.columns:  # a table from elsewhere (a CSV of arm/value) has no phases
        return None, []
    rows = ph.phases(runs, reference, seed=seed, confidence=confidence, n_resamples=n_resamples, margin=margin)
    return {
        "margin": margin,
        "rule": "|ln(TTFT ratio)| > |ln(tg ratio)| + ln(1 + margin), TTFT ratio CI excludes 1",
        "rows": rows,
    }, ph.findings(rows, reference, margin)


def _speculative(experiment, valid, medians, reference):
    budgets = _draft_budgets(experiment, valid)
    rows = []
    for arm in [a for a in experiment.arms if a in budgets] + sorted(set(budgets) - set(experiment.arms)):
        for wl, sub in valid[valid["arm"] == arm].groupby("workload", sort=True):
            acc = spec.acceptance(
                sub["draft_tokens"], sub["accepted_tokens"], sub["verify_steps"], sub["acceptance_length"]
            )
            sat = spec.saturation(acc.acceptance_length, budgets[arm]) if acc.acceptance_length else None
            rows.append(
                {
                    "arm": arm,
                    "workload": str(wl),
                    "draft_budget": budgets[arm],
                    "acceptance_length": acc.acceptance_length,
                    "acceptance_rate": acc.acceptance_rate,
                    "saturation": sat,
                    "reading": spec.reading(sat) if sat is not None else None,
                    "source": acc.source,
                }
            )
    plain = [a for a in experiment.arms if a not in budgets]
    base = reference if reference in plain else (plain[0] if plain else None)
    k_model = {"baseline": base, "band": None, "calibration": [], "rows": [], "tolerance": 0.02}
    spec_arms = [a for a in experiment.arms if a in budgets]
    if base is None:
        return rows, {
            **k_model,
            "verdict": spec.KVerdict.UNTESTED,
            "reason": spec.KReason.NO_BASELINE,
        }
    ks = []
    for r in rows:
        m, b = medians.get((r["arm"], r["workload"])), medians.get((base, r["workload"]))
        if m and b and r["acceptance_length"]:
            ks.append({"arm": r["arm"], "workload": r["workload"], "k": spec.k_factor(m, b, r["acceptance_length"])})
    calib = spec_arms[: math.ceil(len(spec_arms) / 2)]
    calib_ks = [x["k"] for x in ks if x["arm"] in calib]
    if not calib_ks:
        return rows, {
            **k_model,
            "verdict": spec.KVerdict.UNTESTED,
            "reason": spec.KReason.NO_ACCEPTANCE,
        }
    band = spec.band_from(calib_ks)
    marks = []
    for x in ks:
        role = "calibration" if x["arm"] in calib else "test"
        mark = spec.in_band(x["k"], band) if role == "test" else "yes"
        if role == "test":
            marks.append(mark)
        k_model["rows"].append({**x, "role": role, "in_band": mark})
    k_model.update(band=list(band), calibration=calib, verdict=spec.k_verdict(marks))
    if not marks:
        k_model["reason"] = spec.KReason.ALL_CALIBRATION
    return rows, k_model


def _levels(runs, experiment, valid):
    cost = _block_cost_runs(runs, experiment)
    out = []
    for (arm, wl), sub in valid.dropna(subset=["block"]).groupby(["arm", "workload"], sort=True):
        try:
            lv = levels(sub["value"].to_numpy(), sub["block"].to_numpy(), block_cost_runs=cost)
        except ValueError:
            continue
        out.append({"arm": str(arm), "workload": str(wl), "block_cost_runs": cost, **dataclasses.asdict(lv)})
    return out
