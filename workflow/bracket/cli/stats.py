"""`bracket summarize` and `bracket compare`: statistics on raw values from anywhere."""

from __future__ import annotations

import argparse
import dataclasses
import json

from bracket import interop
from bracket.article.findings import message
from bracket.article.verdicts import ci_method_words, significance_words, undetermined_words
from bracket.stats import defaults as D
from bracket.stats import io
from bracket.stats.analyze import jsonable
from bracket.stats.cells import cell_summaries, compare_arms, valid_rows
from bracket.stats.multiplicity import Family, holm

DEFAULT_SEED = D.SEED


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "raw",
        nargs="+",
        metavar="RAW",
        help="runs.csv, raw .jsonl, a CSV with arm,value[,workload,block,round,position], "
        "llama-benchy JSON or vllm bench serve --save-detailed JSON",
    )
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument(
        "--metric",
        default="tg_throughput",
        help="llama-benchy reports: the metric to import (tg_throughput, the default; pp_throughput, "
        "tg_req_throughput, pp_req_throughput, peak_throughput, peak_req_throughput, ttfr, "
        "est_ppt, e2e_ttft)",
    )
    p.add_argument("--confidence", type=float, default=D.CONFIDENCE, help=f"CI level (default {D.CONFIDENCE})")
    p.add_argument("--resamples", type=int, default=D.RESAMPLES, help=f"bootstrap resamples (default {D.RESAMPLES})")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="bootstrap seed, recorded in the output")
    p.add_argument(
        "--noise-threshold",
        type=float,
        default=D.NOISE_THRESHOLD,
        help=f"smallest relative effect called real (default {D.NOISE_THRESHOLD})",
    )
    p.add_argument(
        "--no-pool",
        dest="pool",
        action="store_false",
        help="textbook block-level analysis: never pool block noise with request noise, even "
        "when blocks agree (see bracket.stats.blocks)",
    )


def benchy_tables(paths) -> str:
    """llama-benchy's own markdown table of each llama-benchy report, or of each arm of an arena.json."""
    from pathlib import Path

    out = []
    for path in paths:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        if isinstance(doc, dict) and isinstance(doc.get("benchmarks"), list):
            interop.benchy_cells(doc)  # the same checks as an import
            out.append(interop.benchy_markdown(doc))
        elif isinstance(doc, dict) and isinstance(doc.get("cells"), list):
            arms = list(dict.fromkeys(c["arm"] for c in doc["cells"] if c.get("llama_benchy")))
            for arm in arms:
                out.append(f"{path}, arm {arm}:\n\n" + interop.benchy_markdown(interop.export_arena(doc, arm)))
        else:
            raise ValueError(
                f"{path}: --format llama-benchy reads a llama-benchy report ('benchmarks') or bracket's "
                f"results/NAME/arena.json ('cells')."
            )
    return "\n\n".join(out)


def summarize_cmd(args) -> int:
    if args.format == "llama-benchy":
        print(benchy_tables(args.raw))
        return 0
    frame = io.load(args.raw, metric=args.metric)
    cells = cell_summaries(
        frame,
        seed=args.seed,
        confidence=args.confidence,
        n_resamples=args.resamples,
        spread_warning=args.spread_warning,
        precision=args.noise_threshold,
        pool=args.pool,
    )
    if not cells:
        raise ValueError(f"no valid runs in {', '.join(args.raw)}; {len(frame)} rows, all invalid.")
    if args.json:
        # A cell with no valid value is listed too, with its reason (`dropped`): the JSON loses no cell the text names.
        kept = [{"arm": a, "workload": w, **dataclasses.asdict(s), "dropped": None} for a, w, s in cells]
        empty = {f.name: None for f in dataclasses.fields(cells[0][2])}  # one shape: a dropped cell's values null
        lost = [
            {"arm": a, "workload": w, **empty, "n": 0, "dropped": why} for (a, w), why in _dropped(frame, cells).items()
        ]
        print(json.dumps(jsonable(kept + lost), indent=2))
        return 0
    pct = round(args.confidence * 100)
    aw = max([16] + [len(str(a)) for a, _, _ in cells])  # imported cells carry long names (interop)
    ww = max([12] + [len(str(w)) for _, w, _ in cells])
    print(
        f"{'arm':<{aw}} {'workload':<{ww}} {'n':>4} {'blocks':>6} {'median':>10} {f'{pct}% CI':>21} "
        f"{'min':>9} {'max':>9} {'spread':>7}"
    )
    for a, w, s in cells:
        ci = f"{s.ci_low:.4g} - {s.ci_high:.4g}" if s.ci_low is not None else "n/a"
        nb = "?" if s.blocks is None else str(s.blocks)
        print(
            f"{a:<{aw}} {w:<{ww}} {s.n:>4} {nb:>6} {s.median:>10.4f} {ci:>21} {s.min:>9.4g} {s.max:>9.4g} "
            f"{s.spread:>7.2%}"
        )
    for a, w, s in cells:
        print(f"CI: {a} / {w}: {ci_method_words(s.ci_method)}")
    for a, w, s in cells:
        for f in s.warnings:
            print(f"warning: {a} / {w}: {message(f)}")
    for (a, w), reason in _dropped(frame, cells).items():
        print(f"dropped: {a} / {w}: no valid value ({reason})")
    return 0


def _dropped(frame, cells) -> dict:
    """Cells of the input with no valid value, and the first reason given: none leaves without a word."""
    shown = {(a, w) for a, w, _ in cells}
    out = {}
    for (a, w), g in frame.groupby(["arm", "workload"], sort=False):
        if (a, w) not in shown:
            reasons = [r for r in g["invalid_reason"].astype(str) if r]
            out[(a, w)] = reasons[0] if reasons else "no valid rows"
    return out


def _ci(lo, hi) -> str:
    return "n/a" if lo is None else f"{lo:.4f} - {hi:.4f}"


def compare_cmd(args) -> int:
    frame = io.load(args.raw, metric=args.metric)
    v = valid_rows(frame)
    workloads = [args.workload] if args.workload else sorted(v["workload"].unique())
    results = []
    for wl in workloads:
        c = compare_arms(
            frame,
            args.baseline,
            args.candidate,
            wl,
            seed=args.seed,
            reference=args.baseline,
            confidence=args.confidence,
            n_resamples=args.resamples,
            noise_threshold=args.noise_threshold,
            pool=args.pool,
        )
        results.append(
            {"workload": wl, "baseline": args.baseline, "candidate": args.candidate, **dataclasses.asdict(c)}
        )
    holm(results, args.confidence, family=Family.WORKLOADS)
    if args.json:
        print(json.dumps(jsonable(results), indent=2))  # always a list: one shape per command
        return 0
    pct = f"{args.confidence:.0%}"
    for r in results:
        p = "n/a" if r["p_value"] is None else f"{r['p_value']:.3g}"
        drift = "unmeasured" if r["drift"] is None else f"{r['drift']:+.3%}"
        print(f"{r['workload']}: {r['candidate']} vs {r['baseline']}: {r['verdict']}")
        if r["ci_low"] is not None:
            mult = r.get("multiplicity") or {}
            adj = f", Holm-adjusted over {mult['comparisons']} comparisons" if mult.get("method") == "holm" else ""
            print(
                f"  verdict rests on: {r['basis']} ratio {r['ratio']:.4f}x, {r['ci_level'] * 100:.4g}% CI "
                f"{_ci(r['ci_low'], r['ci_high'])}{adj}"
            )
        print(
            f"  raw ratio       {r['raw_ratio']:.4f}x  {pct} CI {_ci(r['raw_ci_low'], r['raw_ci_high'])}  "
            f"({ci_method_words(r['ci_method'])})"
        )
        if r["drift_adjusted_ratio"] is not None:
            print(
                f"  drift-adjusted  {r['drift_adjusted_ratio']:.4f}x  {pct} CI "
                f"{_ci(r['drift_adjusted_ci_low'], r['drift_adjusted_ci_high'])}"
            )
        pb = (
            ""
            if r["p_beyond_band"] is None
            else (f"; p beyond the band = {r['p_beyond_band']:.3g} (adjusted {r['p_adjusted']:.3g})")
        )
        print(f"  p = {p} ({significance_words(r['test'])}){pb}")
        print(
            f"  blocks {r['blocks_baseline']} + {r['blocks_candidate']}, runs {r['n_baseline']} + "
            f"{r['n_candidate']}; drift {drift}; noise band +/-{r['noise_band']:.2%}"
        )
        if r["verdict"] == "undetermined":
            print(f"  undetermined: {undetermined_words(r['undetermined'])}")
        for n in r["notes"]:
            print(f"  note: {message(n)}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "summarize",
        help="per cell: n, blocks, median with block-level CI, min, max, spread, modes",
        description="Summarize each arm x workload cell of raw values.",
    )
    _common(p)
    p.add_argument(
        "--format",
        choices=["table", "llama-benchy"],
        default="table",
        help="llama-benchy: llama-benchy's own markdown table (its --format md) of a llama-benchy "
        "report or of each arm of results/NAME/arena.json",
    )
    p.add_argument(
        "--spread-warning",
        type=float,
        default=D.SPREAD_WARNING,
        help=f"spread above which the run count cannot pin the median (default {D.SPREAD_WARNING})",
    )
    p.set_defaults(func=summarize_cmd)
    c = subparsers.add_parser(
        "compare",
        help="block-level ratio with CI, test, drift, verdict (or undetermined, with the rounds needed)",
        description="Compare a candidate arm with a baseline arm.",
    )
    _common(c)
    c.add_argument("--baseline", required=True, help="arm compared against")
    c.add_argument("--candidate", required=True, help="arm under test")
    c.add_argument("--workload", help="one workload (default: each workload in turn)")
    c.set_defaults(func=compare_cmd)
