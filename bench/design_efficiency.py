"""Design efficiency of bracket's analysis, by simulation with known truth, through the CLI.

Every simulated experiment is written as a CSV and analysed by `bracket compare --json` and
`bracket summarize --json`, as a user would. Two analyses: bracket's (OLS on log block medians,
t on the blocks' df, pooled with the within-block noise when blocks agree) and the textbook
block-level baseline (`--no-pool`: OLS on log block medians with arm and position, t with
blocks - 3 df, never pooled).

Table 1: A/B/A/B, 5 runs per block, request sd 0.5 %, block-to-block sd 0, 1 and 3 %, rounds
1-6, no drift: false "faster"/"slower" with no true effect, "undetermined" share, coverage of the
ratio CI the verdict rests on and of the per-arm median CI (`summarize`), the median CI width,
and how often a +3 % effect is called "faster".

Table 2: the issue's cases (one block per arm under drift, REF/M1/REF, +3 % under drift, one
10x run) and the two measured regimes: an H200 serving llama.cpp (between-server sd 0.2 %,
within 1.1 %, the first timed request 5 % slow) and the embedded CPU engine on a 2-core machine
(15 % drift over a sweep, within-block spreads of 35-70 %). Table 3: the drift section's trend
test on data without drift.

    .venv/bin/python bench/design_efficiency.py --reps 200
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from bracket.stats.drift import trend
from bracket.stats.simulate import simulate
from simcli import via_cli

CALLS = {"bracket": (), "textbook": ("--no-pool",)}
SEQUENTIAL = "## 4. Adaptive designs"
EDGES = "## 1b. The edges (issue 29)"
BLOCK_SD = (0.0, 0.01, 0.03)
ROUNDS = (1, 2, 3, 4, 5, 6, 7, 8)


def one(df, path, extra, resamples, summarize=True):
    [c] = via_cli(df, path, "compare", "--baseline", "A", "--candidate", "B", "--resamples", str(resamples), *extra)
    s = via_cli(df, path, "summarize", "--resamples", str(resamples), *extra) if summarize else None
    return c, s


def covers(lo, hi, x) -> bool:
    return lo is not None and lo <= x <= hi


def cell(path, reps, seed, resamples, extra, *, effect=1.0, summarize=True, **sim):
    """Rates over `reps` simulated experiments: verdicts, coverage, width."""
    rng = np.random.default_rng(seed)
    out = {"faster": 0, "slower": 0, "undetermined": 0, "cov": 0, "cov_n": 0, "arm_cov": 0, "arm_n": 0}
    widths = []
    for r in range(reps):
        df = simulate(
            sim.get("design", "abab"), effect=effect, rng=rng, seed=r, **{k: v for k, v in sim.items() if k != "design"}
        )
        c, s = one(df, path, extra, resamples, summarize)
        out[c["verdict"]] = out.get(c["verdict"], 0) + 1
        lo, hi = c["ci_low"], c["ci_high"]  # the verdict's interval, or the basis CI beside "undetermined"
        if lo is None:  # one block per arm: the request-level CI shown beside "undetermined"
            lo, hi = c["raw_ci_low"], c["raw_ci_high"]
        if lo is not None:
            out["cov_n"] += 1
            out["cov"] += covers(lo, hi, effect)
            widths.append(hi / lo - 1)
        if s and not sim.get("first_slow"):
            # The arm's true median at the mean time of its blocks (what the mean log block median estimates).
            at = df.groupby(["arm", "block"])["position"].first().groupby("arm").mean()
            truth = {a: 50.0 * (effect if a == "B" else 1.0) * np.exp(sim.get("drift", 0.0) * at[a]) for a in at.index}
            for row in s:
                out["arm_n"] += 1
                out["arm_cov"] += covers(row["ci_low"], row["ci_high"], truth[row["arm"]])
    n = reps
    return {
        "false": (out["faster"] + out["slower"]) / n if effect == 1.0 else None,
        "faster": out["faster"] / n,
        "slower": out["slower"] / n,
        "undetermined": out["undetermined"] / n,
        "cov": out["cov"] / out["cov_n"] if out["cov_n"] else None,
        "arm_cov": out["arm_cov"] / out["arm_n"] if out["arm_n"] else None,
        "width": float(np.median(widths)) if widths else None,
    }


def pct(x, d=1):
    return "n/a" if x is None else f"{x:.{d}%}"


SCENARIOS = [  # name, truth, simulate() arguments
    (
        "one block per arm (A then B), drift 2 %/block, block sd 1 %",
        1.0,
        dict(design="sequential", rounds=1, drift=0.02, block_sd=0.01),
    ),
    ("REF / M1 / REF (bracket, 1 round), block sd 1 %", 1.0, dict(design="bracket", rounds=1, block_sd=0.01)),
    (
        "sequential A A A B B B, drift 2 %/block, block sd 1 %",
        1.0,
        dict(design="sequential", rounds=3, drift=0.02, block_sd=0.01),
    ),
    ("+3 %, drift 1 %/block, 4 rounds, block sd 0.3 %", 1.03, dict(rounds=4, drift=0.01)),
    ("+3 %, drift 1 %/block, 4 rounds, block sd 1 %", 1.03, dict(rounds=4, drift=0.01, block_sd=0.01)),
    ("+3 %, one 10x run, drift 1 %/block, 4 rounds", 1.03, dict(rounds=4, drift=0.01, wild=1)),
    (
        "H200 llama.cpp: block 0.2 %, run 1.1 %, first run 5 % slow, 6 runs, 3 rounds, no effect",
        1.0,
        dict(rounds=3, runs=6, block_sd=0.002, run_sd=0.011, first_slow=0.05),
    ),
    ("H200 llama.cpp, as above, +3 %", 1.03, dict(rounds=3, runs=6, block_sd=0.002, run_sd=0.011, first_slow=0.05)),
    (
        "embedded CPU: block 5 %, run 15 %, drift 2 %/block, 3 rounds, no effect",
        1.0,
        dict(rounds=3, block_sd=0.05, run_sd=0.15, drift=0.02),
    ),
    ("embedded CPU, as above, 6 rounds, +20 %", 1.2, dict(rounds=6, block_sd=0.05, run_sd=0.15, drift=0.02)),
]


def trend_false_rate(reps, rounds, seed) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for r in range(reps):
        df = simulate("abab", rounds=rounds, block_sd=0.03, rng=rng, seed=r)
        t = trend(df, "A")
        hits += t is not None and t.slope_p is not None and t.slope_p < 0.05
    return hits / reps


def pilot_rows(reps, seed, truth=0.03):
    """The design notebook's block-noise estimate (bracket.stats.planning.pilot_noise) on simulated pilots of
    3 rounds (2 arms, 4 runs per block, request sd 1 %) with a true between-block sd of `truth`."""
    import pandas as pd
    from bracket.stats import planning

    pts, highs, cover = [], [], 0
    for i in range(reps):
        df = simulate(
            "abab", rounds=3, runs=4, block_sd=truth, run_sd=0.01, rng=np.random.default_rng([seed, i]), seed=1
        )
        df = df.rename(columns={"value": "decode_tok_s"}).assign(valid=True, warmup=False, invalid_reason="")
        _, noise = planning.pilot_noise(pd.DataFrame(df), "A")
        pts.append(noise["block_sd_point"])
        highs.append(noise["block_sd_high"])
        cover += noise["block_sd_low"] <= truth <= noise["block_sd_high"]
    return float(np.median(pts)), float(np.median(highs)), float(np.mean(np.array(highs) >= truth)), cover / reps


def edges(tmp, reps, seed, resamples) -> list[str]:
    """Section 1b: 2 rounds at request sd 0.5-3 %, the two-speed cell with quiet blocks, the pilot's noise."""
    lines = [
        EDGES,
        "",
        f"Block sd 3 %, A/B/A/B, 5 runs per block, no drift, {reps} datasets per row (Monte Carlo standard "
        f"error of a 2.5 % rate {np.sqrt(0.025 * 0.975 / reps):.2%}). At 2 rounds the drift-adjusted fit has one "
        "block degree of freedom: it is never pooled with request noise there (no F pre-test on one df), and "
        "its variance is at least what request noise gives a block median. Two-speed cell: every arm's runs "
        "take one of two paths 8 % apart (each run on the fast one with chance 1/2), blocks differ by 0.2 %, "
        "request sd 0.5 %, 6 runs per block: the comparison uses block means of log rate.",
        "",
        "| case | analysis | no effect: false faster/slower | undetermined | ratio CI coverage | CI width |",
        "|---|---|---:|---:|---:|---:|",
    ]
    cases = [
        (f"2 rounds, request sd {rsd:.1%}", dict(rounds=2, block_sd=0.03, run_sd=rsd)) for rsd in (0.005, 0.01, 0.03)
    ]
    cases += [
        (f"two-speed cell, {r} rounds", dict(rounds=r, runs=6, block_sd=0.002, run_sd=0.005, two_speed=0.08))
        for r in (3, 5)
    ]
    for i, (name, sim) in enumerate(cases):
        n = reps if sim["rounds"] == 2 else max(reps // 4, 200)
        for an, extra in CALLS.items():
            r = cell(tmp, n, seed + 3000 + i, resamples, extra, summarize=False, **sim)
            lines.append(
                f"| {name} ({n} datasets) | {an} | {pct(r['false'])} | {pct(r['undetermined'])} | "
                f"{pct(r['cov'])} | {pct(r['width'], 2)} |"
            )
            print(lines[-1], flush=True)
    n = max(reps // 10, 100)
    med, high, above, cover = pilot_rows(n, seed + 4000)
    lines += [
        "",
        f"The design notebook's block noise (`planning.pilot_noise`) on {n} simulated pilots of 3 rounds "
        "(2 arms, 4 runs per block, request sd 1 %), true between-block sd 3 %: the point estimate (pooled "
        "variances), the upper end of its 90 % interval (what the notebook designs for by default), how often "
        "that upper end lies at or above the truth and how often the interval covers it.",
        "",
        "| truth | median point estimate | median upper end | upper end >= truth | interval covers |",
        "|---:|---:|---:|---:|---:|",
        f"| 3.00% | {med:.2%} | {high:.2%} | {pct(above)} | {pct(cover)} |",
    ]
    print(lines[-1], flush=True)
    return lines


RECHECK = "## 1c. Section 1 at block sd 3 %, re-run with the current analysis"


def recheck(tmp, reps, seed, resamples, rounds) -> list[str]:
    """Section 1c: the bracket rows of section 1 at block sd 3 % for `rounds`, with the analysis of today (section
    1 was generated before issue 29's changes), on the same seeds as section 1."""
    lines = [
        RECHECK,
        "",
        f"Section 1's settings (A/B/A/B, 5 runs per block, request sd 0.5 %, no drift, block sd 3 %), bracket's "
        f"analysis as it is now, {reps} datasets per row, the seeds of section 1's rows. Coverage is of `ci_*`, the "
        "interval the verdict rests on (with one block per arm it is empty, and the request-level `raw_ci_*` is "
        "counted: it covers request noise only).",
        "",
        "| block sd | rounds | analysis | no effect: false faster/slower | undetermined | ratio CI coverage | "
        'CI width | +3 %: "faster" |',
        "|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rounds:
        null = cell(tmp, reps, seed + r, resamples, (), rounds=r, block_sd=0.03, summarize=False)
        eff = cell(tmp, reps, seed + 100 + r, resamples, (), effect=1.03, summarize=False, rounds=r, block_sd=0.03)
        lines.append(
            f"| 3% | {r} | bracket | {pct(null['false'])} | {pct(null['undetermined'])} | {pct(null['cov'])} | "
            f"{pct(null['width'], 2)} | {pct(eff['faster'])} |"
        )
        print(lines[-1], flush=True)
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=200, help="simulated experiments per cell (default 200)")
    p.add_argument("--resamples", type=int, default=500, help="bootstrap resamples (one-block CIs only)")
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "design_efficiency.md"))
    p.add_argument("--edge-reps", type=int, default=2000, help="datasets per 2-round row of section 1b (default 2000)")
    p.add_argument("--edges-only", action="store_true", help="rerun section 1b only, keeping the rest of the file")
    p.add_argument("--recheck", default="", help="rounds (e.g. 2,3,7,8): write section 1c only, keeping the rest")
    args = p.parse_args(argv)
    t0 = time.time()
    tmp = Path(tempfile.mkdtemp(prefix="bracket-bench-")) / "sim.csv"
    if args.recheck:
        out = Path(args.out)
        old = out.read_text()
        new = "\n".join(
            recheck(tmp, args.reps, args.seed, args.resamples, [int(r) for r in args.recheck.split(",")])
        ) + (
            f"\n\nSection 1c: `nice -n 10 .venv/bin/python bench/design_efficiency.py --recheck {args.recheck} --reps "
            f"{args.reps} --seed {args.seed}`, {time.time() - t0:.0f} s on a shared 2-core machine.\n\n"
        )
        a = old.index(RECHECK) if RECHECK in old else old.index("## 2. ")
        b = old.index("## 2. ", a)
        out.write_text(old[:a] + new + old[b:])
        return 0
    if args.edges_only:
        out = Path(args.out)
        old = out.read_text()
        new = "\n".join(edges(tmp, args.edge_reps, args.seed, args.resamples)) + (
            f"\n\nSection 1b: `.venv/bin/python bench/design_efficiency.py --edges-only --edge-reps {args.edge_reps}`, "
            f"{time.time() - t0:.0f} s on a shared 2-core machine.\n\n"
        )
        if EDGES in old:
            a = old.index(EDGES)
            b = old.index("## 2. ", a)
            out.write_text(old[:a] + new + old[b:])
        else:
            b = old.index("## 2. ")
            out.write_text(old[:b] + new + old[b:])
        return 0
    se = 0.5 / np.sqrt(args.reps)
    lines = [
        "# Design efficiency (simulated, known truth, through the CLI)",
        "",
        f"Generated by `.venv/bin/python bench/design_efficiency.py --reps {args.reps} --resamples "
        f"{args.resamples} --seed {args.seed}`. Each simulated experiment is a CSV analysed by "
        f"`bracket compare --json` and `bracket summarize --json` (`--no-pool` for the textbook "
        f"analysis). {args.reps} experiments per row: a rate's Monte Carlo standard error is at most "
        f"{se:.1%}.",
        "",
        "The false faster/slower rates here are at block sd 0-3 %, where the 1 % noise band makes the test "
        "stricter than its 5 % level; at 6 % and 12 % they are 1.3-5.3 % (`bench/results/noise_ladder.md`).",
        "",
        "## 1. Block-to-block noise and rounds (A/B/A/B, 5 runs per block, request sd 0.5 %, no drift)",
        "",
        "bracket: OLS on log block medians (arm + position), t on blocks - 3 df, pooled with the "
        "within-block noise when an F test (level 0.5) finds no block variance. textbook: the same "
        "fit, never pooled. Coverage is of the CI the verdict rests on (with one block per arm, the "
        'request-level CI shown beside "undetermined"), and of `summarize`\'s per-arm median CI. '
        "Width: median of (CI high / CI low - 1). Undetermined counts every CI that neither clears "
        'the 1 % band nor stays within twice it on both sides ("no measurable effect" must rule out '
        "+/-2 %): with 3 % block noise no fixed design here earns it, which is the honest answer.",
        "",
        "| block sd | rounds | analysis | no effect: false faster/slower | undetermined | ratio CI "
        'coverage | per-arm CI coverage | CI width | +3 %: "faster" |',
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for bsd in BLOCK_SD:
        for rounds in ROUNDS:
            for name, extra in CALLS.items():
                null = cell(tmp, args.reps, args.seed + rounds, args.resamples, extra, rounds=rounds, block_sd=bsd)
                eff = cell(
                    tmp,
                    args.reps,
                    args.seed + 100 + rounds,
                    args.resamples,
                    extra,
                    effect=1.03,
                    summarize=False,
                    rounds=rounds,
                    block_sd=bsd,
                )
                lines.append(
                    f"| {bsd:.0%} | {rounds} | {name} | {pct(null['false'])} | "
                    f"{pct(null['undetermined'])} | {pct(null['cov'])} | {pct(null['arm_cov'])} | "
                    f"{pct(null['width'], 2)} | {pct(eff['faster'])} |"
                )
                print(lines[-1], flush=True)
    lines += [""] + edges(tmp, args.edge_reps, args.seed, args.resamples)
    lines += [
        "",
        "## 2. The issue's cases and two measured regimes",
        "",
        "Request sd 0.5 %, block sd 0.3 %, 5 runs per block, A/B/A/B unless stated. Per-arm "
        "coverage is of the arm's true median at the mean time of its blocks; n/a where the first "
        "run is slow by design (the median itself then shifts).",
        "",
        '| case | analysis | "faster" | "slower" | undetermined | ratio CI coverage | per-arm CI coverage |',
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for i, (name, effect, sim) in enumerate(SCENARIOS):
        for an, extra in CALLS.items():
            r = cell(tmp, args.reps, args.seed + 1000 + i, args.resamples, extra, effect=effect, **sim)
            lines.append(
                f"| {name} | {an} | {pct(r['faster'])} | {pct(r['slower'])} | "
                f"{pct(r['undetermined'])} | {pct(r['cov'])} | {pct(r['arm_cov'])} |"
            )
            print(lines[-1], flush=True)
    lines += [
        "",
        "## 3. The drift section's trend test on data without drift",
        "",
        "Block sd 3 %, request sd 0.5 %, A/B/A/B: share of datasets with slope p < 0.05 "
        "(bracket.stats.drift.trend; nominal 5 %).",
        "",
        "| rounds | p < 0.05 |",
        "|---:|---:|",
    ]
    for rounds in (2, 3, 4, 6):
        lines.append(f"| {rounds} | {pct(trend_false_rate(args.reps, rounds, args.seed + 2000 + rounds))} |")
        print(lines[-1], flush=True)
    lines += ["", f"{time.time() - t0:.0f} s on a shared 2-core machine."]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    # Section 4 (adaptive designs) is bench/sequential_design.py's: kept as it is.
    old = Path(args.out).read_text() if Path(args.out).exists() else ""
    kept = old[old.index(SEQUENTIAL) :] if SEQUENTIAL in old else ""
    Path(args.out).write_text("\n".join(lines) + "\n" + ("\n" + kept if kept else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
