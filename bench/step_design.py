"""A level step under A/B/A/B and A/B/B/A: false verdicts, coverage and the step check (issue 43).

The machine changes speed once (a neighbour starting, a thermal limit): every block from a schedule position on
is slower by `--step` (-8 %). The drift-adjusted fit models time as a line; under A/B/B/A with 3 rounds
(A B B A A B) a step halfway through is taken for a slope while the arm carries 0.42 of it. bracket.stats.steps
finds the step positions a design cannot see and bracket.stats.compare checks the verdict against the fit with a
step there ("undetermined", Why.STEP, where the two do not agree).

Each dataset is bracket.stats.simulate's model (5 runs per block, request sd 0.5 %, no drift, no true effect)
analysed by bracket.stats.cells.compare_arms, the analysis step's own comparison (one comparison: Holm leaves it
as it is). Part 1: the step at a uniformly drawn position (between any two blocks), rounds 2-8, block sd 1 % and
3 %. Part 2: the step at every position, 3 and 5 rounds, the worst position. Part 3: what the check costs, a true
+5 % with no step. Rates are counted over all datasets; coverage is of `ci_*` (the interval the verdict rests
on; beside "undetermined", the union it was judged on), and beside it over the datasets the check left unflagged.

    .venv/bin/python bench/step_design.py --reps 200
    .venv/bin/python bench/step_design.py --middle-reps 400     # part 4 alone, kept beside the rest
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from bracket.stats.cells import compare_arms
from bracket.stats.io import from_table
from bracket.stats.reasons import Why
from bracket.stats.simulate import simulate

DESIGNS = {"abab": "A/B/A/B", "abba": "A/B/B/A"}


def one(design, rounds, block_sd, step, at, effect, rng, i):
    df = simulate(design, rounds=rounds, block_sd=block_sd, step=step, step_at=at, effect=effect, rng=rng, seed=i)
    return compare_arms(from_table(df), "A", "B", "sim", seed=1, reference="A", n_resamples=200)


def cell(design, rounds, block_sd, reps, seed, *, step, at=None, effect=1.0):
    """Rates over `reps` datasets; `at` None draws the step's position uniformly among the 2 x rounds - 1."""
    rng = np.random.default_rng(seed)
    t = dict(false=0, faster=0, und=0, flagged=0, cov=0, n_cov=0, cov_u=0, n_u=0)
    for i in range(reps):
        k = int(rng.integers(1, 2 * rounds)) if at is None else at
        c = one(design, rounds, block_sd, step, k, effect, rng, i)
        t["false"] += c.verdict in ("faster", "slower") and effect == 1.0
        t["faster"] += c.verdict == "faster"
        t["und"] += c.verdict == "undetermined"
        flagged = bool(c.undetermined) and c.undetermined.get("why") == Why.STEP
        t["flagged"] += flagged
        if c.ci_low is not None:
            hit = c.ci_low <= effect <= c.ci_high
            t["cov"] += hit
            t["n_cov"] += 1
            if not flagged:
                t["cov_u"] += hit
                t["n_u"] += 1
    return {
        "false": t["false"] / reps,
        "faster": t["faster"] / reps,
        "und": t["und"] / reps,
        "flagged": t["flagged"] / reps,
        "cov": t["cov"] / t["n_cov"] if t["n_cov"] else None,
        "cov_u": t["cov_u"] / t["n_u"] if t["n_u"] else None,
    }


MIDDLE = "## 4. The issue's case: A/B/B/A, 3 rounds, the step halfway through"


def middle(reps, seed, step) -> list[str]:
    """Part 4: A B B A | A B with the line alone (the drift-adjusted CI, as before the check) and with the check."""
    lines = [
        MIDDLE,
        "",
        f"The step before position 3 of A B B A A B, no true effect, {reps} datasets per row (Monte Carlo standard "
        f"error of a 2.5 % rate {np.sqrt(0.025 * 0.975 / reps):.2%}). The line alone: the verdict of the "
        "drift-adjusted CI (`drift_adjusted_ci_*` against the band), what the analysis said before the check.",
        "",
        "| block sd | line alone: false faster/slower | line alone: coverage | with the check: false faster/slower | "
        "flagged (step) | coverage |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for bsd in (0.01, 0.03):
        rng = np.random.default_rng([seed, 4, int(bsd * 1000)])
        t = dict(lf=0, lc=0, f=0, fl=0, c=0)
        for i in range(reps):
            c = one("abba", 3, bsd, step, 3, 1.0, rng, i)
            lo, hi = c.drift_adjusted_ci_low, c.drift_adjusted_ci_high
            t["lf"] += lo > 1 + c.noise_band or hi < 1 / (1 + c.noise_band)
            t["lc"] += lo <= 1 <= hi
            t["f"] += c.verdict in ("faster", "slower")
            t["fl"] += bool(c.undetermined) and c.undetermined.get("why") == Why.STEP
            t["c"] += c.ci_low <= 1 <= c.ci_high
        lines.append(
            f"| {bsd:.0%} | {pct(t['lf'] / reps)} | {pct(t['lc'] / reps)} | {pct(t['f'] / reps)} | "
            f"{pct(t['fl'] / reps)} | {pct(t['c'] / reps)} |"
        )
        print(lines[-1], flush=True)
    return lines


def pct(x):
    return "n/a" if x is None else f"{x:.1%}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=200, help="datasets per row of part 1 (parts 2 and 3: half)")
    p.add_argument("--step", type=float, default=-0.08, help="the step, as a log change (default -0.08)")
    p.add_argument("--seed", type=int, default=43)
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "step_design.md"))
    p.add_argument("--middle-reps", type=int, default=0, help="run part 4 alone with this many datasets per row")
    args = p.parse_args(argv)
    t0 = time.time()
    if args.middle_reps:
        out = Path(args.out)
        old = out.read_text()
        kept = old[: old.index(MIDDLE)] if MIDDLE in old else old.rstrip("\n") + "\n\n"
        new = middle(args.middle_reps, args.seed, args.step) + [
            "",
            f"Part 4: `.venv/bin/python bench/step_design.py --middle-reps {args.middle_reps} --seed {args.seed}`, "
            f"{time.time() - t0:.0f} s.",
            "",
        ]
        out.write_text(kept + "\n".join(new))
        return 0
    se = np.sqrt(0.025 * 0.975 / args.reps)
    half = max(args.reps // 2, 50)
    lines = [
        "# A level step under A/B/A/B and A/B/B/A (simulated, known truth)",
        "",
        f"Generated by `.venv/bin/python bench/step_design.py --reps {args.reps} --seed {args.seed}`. "
        f"Every block from a schedule position on is slower by a step of {np.expm1(args.step):+.1%} (log "
        f"{args.step:g}); 5 runs per block, request sd 0.5 %, no drift. Analysis: "
        "`bracket.stats.cells.compare_arms`, the analysis step's comparison, with the step check of "
        "`bracket.stats.steps` (a verdict must hold under the fit with a step at every position the drift line "
        "cannot see; else undetermined, why `step`). Flagged: undetermined for that reason. Coverage: of `ci_*`, "
        "over all datasets and over those the check left unflagged. "
        f"{args.reps} datasets per row of part 1 (Monte Carlo standard error of a 2.5 % rate {se:.2%}, of a 95 % "
        f"coverage {np.sqrt(0.05 * 0.95 / args.reps):.2%}); {half} per row of parts 2 and 3.",
        "",
        "## 1. The step at a random position, no true effect",
        "",
        "| design | rounds | block sd | false faster/slower | undetermined | flagged (step) | coverage | "
        "coverage, unflagged |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for d, name in DESIGNS.items():
        for bsd in (0.01, 0.03):
            for r in range(2, 9):
                x = cell(d, r, bsd, args.reps, [args.seed, r, int(bsd * 1000), len(d)], step=args.step)
                lines.append(
                    f"| {name} | {r} | {bsd:.0%} | {pct(x['false'])} | {pct(x['und'])} | {pct(x['flagged'])} | "
                    f"{pct(x['cov'])} | {pct(x['cov_u'])} |"
                )
                print(lines[-1], flush=True)
    lines += [
        "",
        "## 2. The step at every position, no true effect: the worst position",
        "",
        "Per design, rounds and block sd, the step at each of the 2 x rounds - 1 positions; the position with the "
        "highest false rate, and the lowest coverage over positions (of all datasets; unflagged in brackets). The "
        "worst of 5 or 9 positions is biased away from the truth by the Monte Carlo error of each (100 datasets: "
        "standard error 1.6 points on a 2.5 % rate).",
        "",
        "| design | rounds | block sd | worst position | its false faster/slower | its flagged | lowest coverage "
        "(unflagged) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for d, name in DESIGNS.items():
        for r in (3, 5):
            for bsd in (0.01, 0.03):
                rows = {
                    k: cell(d, r, bsd, half, [args.seed, 1, r, k, int(bsd * 1000), len(d)], step=args.step, at=k)
                    for k in range(1, 2 * r)
                }
                k = max(rows, key=lambda k: rows[k]["false"])
                low = min(rows, key=lambda k: rows[k]["cov"] if rows[k]["cov"] is not None else 1)
                low_u = min(x["cov_u"] for x in rows.values() if x["cov_u"] is not None)
                lines.append(
                    f"| {name} | {r} | {bsd:.0%} | {k} | {pct(rows[k]['false'])} | {pct(rows[k]['flagged'])} | "
                    f"{pct(rows[low]['cov'])} at {low} ({pct(low_u)}) |"
                )
                print(lines[-1], flush=True)
    lines += [
        "",
        "## 3. What the check costs: a true +5 %, no step",
        "",
        'Share decided "faster" and share flagged by the step check (a flag here is power lost).',
        "",
        '| design | rounds | block sd | "faster" | flagged (step) | coverage |',
        "|---|---:|---:|---:|---:|---:|",
    ]
    for d, name in DESIGNS.items():
        for r in (3, 4, 5):
            x = cell(d, r, 0.01, half, [args.seed, 2, r, len(d)], step=0.0, effect=1.05)
            lines.append(f"| {name} | {r} | 1% | {pct(x['faster'])} | {pct(x['flagged'])} | {pct(x['cov'])} |")
            print(lines[-1], flush=True)
    lines += ["", f"{time.time() - t0:.0f} s on a shared 2-core machine.", ""]
    Path(args.out).write_text("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
