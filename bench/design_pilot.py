"""The design notebook on real pilots: its noise estimate with its interval, the design it writes, and an
independent check by simulation that the power it states holds at the upper end of that interval.

For each pilot, notebooks/design.ipynb runs through papermill with its defaults (designs for
the upper end of the 90 % block-noise interval, chooses the adaptive design, min_power 80 %), writing the
designed experiment and its table. Then the chosen design is simulated again at the noise it was designed
for, with other random numbers and another loop (bench/sequential_design.run: bracket.stats.simulate and
bracket.stats.sequential.assess), and the two powers are compared with their Monte Carlo error.

Pilots: the draft sweep's (tests/data/draft_sweep: 4 arms x 3 rounds of 4 runs on the embedded vLLM CPU
engine, 12 blocks) and the llama.cpp sweep's (studies/llamacpp_sweep_cpu/pilot: 6 arms x 2 rounds of
2 runs on llama.cpp's CPU build, 12 blocks). Writes bench/results/design_pilot.md:

    nice -n 10 .venv/bin/python bench/design_pilot.py --reps 100 --check-reps 400
"""

from __future__ import annotations

import argparse
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bracket.stats import planning  # noqa: E402
from bracket.stats.compare import FASTER, SLOWER  # noqa: E402

PILOTS = {  # name: (runs.csv or a results tarball, the blocks' metadata folder, the experiment it is the pilot of)
    "draft_sweep": ("tests/data/draft_sweep/runs.csv", "tests/data/draft_sweep/raw", "experiments/draft_sweep.yaml"),
    "llamacpp_sweep": (
        "studies/llamacpp_sweep_cpu/pilot/results.tar.gz",
        None,
        "experiments/llamacpp_sweep.yaml",
    ),  # the pilot's own file names ngram_2, refused now
}


def pilot_files(src: str, meta: str | None, tmp: Path) -> tuple[Path, Path | None]:
    """(runs.csv, meta dir) of a pilot, unpacking a results tarball into `tmp`."""
    path = ROOT / src
    if path.suffix == ".csv":
        return path, ROOT / meta if meta else None
    with tarfile.open(path) as t:
        t.extractall(tmp, filter="data")
    [runs] = list(tmp.glob("results/*/runs.csv"))
    return runs, runs.parent / "raw"


#: (pilot, effect): the notebook's default effect, and one the pilot's noise leaves neither hopeless nor certain.
CASES = [("draft_sweep", 1.05), ("draft_sweep", 1.3), ("llamacpp_sweep", 2.0)]


def notebook(
    runs: Path, meta: Path | None, experiment: Path, out: Path, reps: int, seed: int, effect: float
) -> tuple[pd.DataFrame, str]:
    """Run notebooks/design.ipynb as a user would; (its designs' table, the experiment file it wrote)."""
    import papermill

    table = out.with_suffix(".csv")
    papermill.execute_notebook(
        str(ROOT / "notebooks" / "design.ipynb"),
        str(out.with_suffix(".ipynb")),
        parameters={
            "runs_csv": str(runs),
            "meta_dir": str(meta or ""),
            "experiment_path": str(experiment),
            "out_path": str(out),
            "table_csv": str(table),
            "reps": reps,
            "seed": seed,
            "effect": effect,
        },
        cwd=str(ROOT / "notebooks"),
        kernel_name="python3",
        progress_bar=False,
    )
    return pd.read_csv(table), out.read_text()


def check(noise: dict, design: dict, effect: float, reps: int, seed: int) -> dict:
    """The chosen adaptive design simulated again at the noise it was designed for (bench/sequential_design.run)."""
    import sequential_design as seq

    eff = seq.run(
        reps,
        seed,
        noise["block_sd"],
        effect,
        design.get("margin"),
        max_rounds=design["max_rounds"],
        fixed=(2,),
        run_sd=noise["run_sd"],
        drift=noise["drift"],
        runs=design["runs_per_block"],
        min_rounds=design["min_rounds"],
    )["adaptive"]
    null = seq.run(
        reps,
        seed + 1,
        noise["block_sd"],
        1.0,
        design.get("margin"),
        max_rounds=design["max_rounds"],
        fixed=(2,),
        run_sd=noise["run_sd"],
        drift=noise["drift"],
        runs=design["runs_per_block"],
        min_rounds=design["min_rounds"],
    )["adaptive"]
    at_point = seq.run(
        reps,
        seed + 2,
        noise["block_sd_point"],
        effect,
        design.get("margin"),
        max_rounds=design["max_rounds"],
        fixed=(2,),
        run_sd=noise["run_sd"],
        drift=noise["drift"],
        runs=design["runs_per_block"],
        min_rounds=design["min_rounds"],
    )["adaptive"]
    return {"power": eff[FASTER], "false": null[FASTER] + null[SLOWER], "point": at_point[FASTER]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=100, help="the notebook's simulated experiments per design")
    p.add_argument("--check-reps", type=int, default=400, help="datasets of the independent check")
    p.add_argument("--seed", type=int, default=29)
    p.add_argument("--cases", default=",".join(f"{n}:{e:g}" for n, e in CASES), help="pilot:effect, ...")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "design_pilot.md"))
    args = p.parse_args(argv)
    import yaml

    t0 = time.time()
    lines = [
        "# The design notebook on real pilots",
        "",
        f"Generated by `nice -n 10 .venv/bin/python bench/design_pilot.py --reps {args.reps} --check-reps "
        f"{args.check_reps} --seed {args.seed}`. For each pilot, `notebooks/design.ipynb` ran through papermill "
        f"with its defaults (the adaptive design, designed for the upper end of the 90 % interval of "
        f"the between-block noise, min_power 80 %) and {args.reps} simulated experiments per design; its chosen "
        f"design was then simulated again at that upper end, {args.check_reps} datasets with and without the "
        "effect, by another loop (bench/sequential_design.run) with other random numbers. Agreement: the "
        "difference of the two powers within 2 standard errors of it (both are Monte Carlo estimates).",
        "",
        "| pilot | effect | blocks (arms x rounds) | between-block sd: point | 90 % interval (df) | within-block sd | "
        "drift per block | design written | stated power at the upper end | "
        "check: power | check: false faster/slower | agrees | check: power at the point estimate | warning in the file |",
        "|---|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---|---:|---|",
    ]
    for case in args.cases.split(","):
        name, effect = case.split(":")[0], float(case.split(":")[1])
        src, meta, exp = PILOTS[name]
        with tempfile.TemporaryDirectory() as tmp:
            runs_csv, meta_dir = pilot_files(src, meta, Path(tmp))
            runs = pd.read_csv(runs_csv)
            cfg_pilot = yaml.safe_load((ROOT / exp).read_text())
            _, noise = planning.pilot_noise(runs, cfg_pilot.get("reference"))
            table, written = notebook(
                runs_csv, meta_dir, ROOT / exp, Path(tmp) / f"{name}_designed.yaml", args.reps, args.seed, effect
            )
        design = yaml.safe_load(written)["design"]
        row = table[
            table["design"].str.startswith("adaptive") & (table["runs per block"] == design["runs_per_block"])
        ].iloc[0]
        stated = float(row["power"])
        got = check(
            noise, {**design, "min_rounds": design.get("min_rounds", 2)}, effect, args.check_reps, args.seed + 7
        )
        se = np.sqrt(stated * (1 - stated) / args.reps + got["power"] * (1 - got["power"]) / args.check_reps)
        agrees = abs(stated - got["power"]) <= 2 * max(se, 1e-9)
        warn = next((ln[len("# WARNING: ") :] for ln in written.splitlines() if ln.startswith("# WARNING: ")), "")
        n_blocks = runs.drop_duplicates("block").shape[0]
        lines.append(
            f"| {name} | {effect:g} | {n_blocks} ({runs['arm'].nunique()} x {int(runs['round'].max())}) | "
            f"{noise['block_sd_point']:.2%} | {noise['block_sd_low']:.2%}-{noise['block_sd_high']:.2%} "
            f"({noise['block_df']:g}) | {noise['run_sd']:.1%} | {noise['drift']:.2%} | "
            f"adaptive {design.get('min_rounds', 2)}-{design['max_rounds']} rounds (first look: "
            f"{row['design'].split()[1].split('-')[0]}), {design['runs_per_block']} runs per block | "
            f"{stated:.0%} | {got['power']:.1%} (se of the difference {se:.1%}) | {got['false']:.1%} | "
            f"{'yes' if agrees else 'NO'} | {got['point']:.1%} | {'yes: ' + warn if warn else 'no'} |"
        )
        print(lines[-1], flush=True)
    lines += ["", f"{time.time() - t0:.0f} s on a shared 2-core machine."]
    Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
