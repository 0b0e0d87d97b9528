"""Render the H200 article on this machine from what the GPU machine returned (bench/h200/README.md).

    python bench/h200/render_here.py RESULTS_TAR RENDER_DIR

The GPU call's time ran out during the last block (self_draft, round 2), so the bracketed
comparison is rendered for the two arms whose both rounds completed: fa_on and fa_off (blocks
0, 1, 3 and 4 of the run, renumbered 0-3 with their recorded rounds and seeds). Nothing is
re-measured or edited but the block numbers; the self_draft block (run block 2) is summarised
beside the article by summarise_self_draft.py. The rendering rules run here with the records,
byte account and ceiling the GPU machine wrote.
"""
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

KEEP = {0: 0, 1: 1, 3: 2, 4: 3}  # run block -> article block
EXP = "h200_llamacpp"


def main() -> None:
    tar, dest = Path(sys.argv[1]), Path(sys.argv[2])
    repo = Path(__file__).resolve().parents[2]
    src = dest / "gpu"
    shutil.rmtree(dest, ignore_errors=True)
    src.mkdir(parents=True)
    with tarfile.open(tar) as t:
        t.extractall(src)
    subprocess.run(["rsync", "-a", "--exclude", ".venv", "--exclude", "resources", "--exclude", "results",
                    "--exclude", "logs", "--exclude", ".snakemake", "--exclude", ".git", f"{repo}/", f"{dest}/"],
                   check=True)
    exp = (repo / "bench/h200/h200_llamacpp.yaml").read_text()
    head, _, _ = exp.partition("  self_draft:")
    tail = exp[exp.index("reference:"):]
    (dest / "experiments" / f"{EXP}.yaml").write_text(
        head + tail.replace("reference:", "# self_draft ran one block only (the GPU time ran out): see self_draft.md\nreference:", 1))
    rec = dest / "resources/engines/llama.cpp-0.3.36/build.json"
    rec.parent.mkdir(parents=True)
    shutil.copy(src / "resources/engines/llama.cpp-0.3.36/build.json", rec)
    res, raw = dest / "results" / EXP, dest / "results" / EXP / "raw"
    raw.mkdir(parents=True)
    (dest / "logs" / EXP / "server").mkdir(parents=True)
    sched = ["position,arm,round,seed"]
    for old, new in KEEP.items():
        meta = json.loads((src / f"results/{EXP}/raw/block-{old}.meta.json").read_text())
        meta["block"] = new
        meta["log"] = f"logs/{EXP}/server/block-{new}.log"
        meta["run_block"] = old
        (raw / f"block-{new}.meta.json").write_text(json.dumps(meta))
        lines = []
        for line in (src / f"results/{EXP}/raw/block-{old}.jsonl").read_text().splitlines():
            r = json.loads(line)
            r["block"] = r["position"] = new
            lines.append(json.dumps(r))
        (raw / f"block-{new}.jsonl").write_text("\n".join(lines) + "\n")
        shutil.copy(src / f"logs/{EXP}/server/block-{old}.log", dest / f"logs/{EXP}/server/block-{new}.log")
        sched.append(f"{new},{meta['arm']},{meta['round']},{meta['seed']}")
    (res / "schedule.csv").write_text("\n".join(sched) + "\n")
    for f in ("weights.json", "ceiling.json"):
        shutil.copy(src / f"results/{EXP}/{f}", res / f)
    # Inputs older than outputs, so Snakemake reruns only what follows the blocks.
    old = time.time() - 3600
    for p in [dest / "experiments" / f"{EXP}.yaml", rec]:
        os.utime(p, (old, old))
    subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--touch", f"results/{EXP}/schedule.csv",
                    *[f"results/{EXP}/settings/block-{k}.json" for k in range(4)]], cwd=dest, check=False)
    subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--touch",
                    *[f"results/{EXP}/raw/block-{k}.jsonl" for k in range(4)],
                    f"results/{EXP}/weights.json", f"results/{EXP}/ceiling.json"], cwd=dest, check=False)
    subprocess.run([sys.executable, "-m", "snakemake", EXP, "--cores", "1", "--rerun-triggers", "mtime"],
                   cwd=dest, check=True)


if __name__ == "__main__":
    main()
