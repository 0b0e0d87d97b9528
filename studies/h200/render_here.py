"""Render the H200 article on this machine from what the GPU machine returned (studies/h200/README.md).

    python studies/h200/render_here.py RESULTS_TAR RENDER_DIR [EXPERIMENT]

EXPERIMENT is h200_llamacpp (the default: experiments/h200_llamacpp.yaml, studies/h200/run.sh) or
h200_speculation (studies/h200/h200_speculation.yaml, studies/h200/run_spec.sh).

Every block the schedule lists is rendered as it ran when all of them came back (the second run,
studies/h200/llamacpp/). Where an arm lacks a round (the first run: the GPU time ran out
during the last block, self_draft round 2), the bracketed comparison is rendered for the arms whose
rounds all completed, their blocks renumbered in order with their recorded rounds and seeds, and the
incomplete arm is left out of the experiment file (studies/h200/llamacpp/first_run/). Nothing
is re-measured or edited but the block numbers. The rendering rules run here with the records, byte
account and ceiling the GPU machine wrote.
"""

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

EXP = sys.argv[3] if len(sys.argv) > 3 else "h200_llamacpp"


def kept_blocks(src: Path) -> tuple[dict[int, int], list[str]]:
    """Run block -> article block for the arms whose every scheduled block came back; the arms left out."""
    sched = [line.split(",") for line in (src / f"results/{EXP}/schedule.csv").read_text().splitlines()[1:] if line]
    done = {int(pos) for pos, *_ in sched if (src / f"results/{EXP}/raw/block-{pos}.jsonl").is_file()}
    dropped = sorted({arm for pos, arm, *_ in sched if int(pos) not in done})
    keep = [int(pos) for pos, arm, *_ in sched if arm not in dropped]
    return {old: new for new, old in enumerate(keep)}, dropped


def account_here(src: Path, res: Path, dest: Path) -> None:
    """Where the GPU machine could not read the GGUF's headers (the first speculation run carried no
    `gguf` wheel), the byte account from the same file here and the ceiling from the bandwidth the GPU
    machine detected (ceiling.json's `bandwidth_source`). Only for a GGUF this machine holds byte for
    byte: studies/h200/run_spec.sh unpacks .gpu/spec/NAME.gguf.xz, made from resources/models/NAME.gguf."""
    dev = json.loads((src / f"results/{EXP}/weights.json").read_text())
    if dev.get("status") != "unknown" or "gguf" not in (dev.get("reason") or ""):
        return
    sys.path.insert(0, str(dest / "workflow"))
    from bracket.experiment import config
    from bracket.physics import ceiling, weights

    cfg = config.load(dest / "experiments" / f"{EXP}.yaml")
    model = Path(cfg.engine.model)
    repo = Path(__file__).resolve().parents[2]
    local, packed = repo / "resources/models" / model.name, repo / ".gpu/spec" / f"{model.name}.xz"
    import hashlib
    import lzma

    digest = hashlib.sha256(local.read_bytes()).hexdigest()
    if hashlib.sha256(lzma.open(packed).read()).hexdigest() != digest:
        sys.exit(f"{local} is not the GGUF the GPU machine served ({packed}): no byte account here")
    model.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(local, model)  # the path the experiment names, as on the GPU machine
    acct = weights.write_for_experiment(cfg, res / "weights.json", root=dest)
    acct["computed_here"] = (
        f"the GPU machine lacked the gguf package; this account was computed on the CPU "
        f"machine from the same file (sha256 {digest})"
    )
    (res / "weights.json").write_text(json.dumps(acct, indent=1) + "\n")
    ceil = json.loads((src / f"results/{EXP}/ceiling.json").read_text())
    out = ceiling.build(acct, ceil["bandwidth_gbps"], ceil["bandwidth_source"])
    out["computed_here"] = "bytes from the account computed here; bandwidth as the GPU machine resolved it"
    (res / "ceiling.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"byte account here: {acct['bytes_per_token']} bytes per token; ceiling {out['ceiling_tok_s']:.0f} tok/s")


def main() -> None:
    tar, dest = Path(sys.argv[1]), Path(sys.argv[2])
    repo = Path(__file__).resolve().parents[2]
    src = dest / "gpu"
    shutil.rmtree(dest, ignore_errors=True)
    src.mkdir(parents=True)
    with tarfile.open(tar) as t:
        t.extractall(src)
    skip = {
        ".venv",
        "resources",
        "results",
        "logs",
        ".snakemake",
        ".git",
        ".gpu",
        "bench/.venv-peers",
        "bench/results",
        ".hypothesis",
    }  # the code and its inputs, not gigabytes of environments

    def ignore(folder: str, names: list[str]) -> set[str]:
        rel = os.path.relpath(folder, repo)
        return {n for n in names if os.path.normpath(os.path.join(rel, n)) in skip or n == "__pycache__"}

    shutil.copytree(repo, dest, ignore=ignore, dirs_exist_ok=True, symlinks=True)
    keep, dropped = kept_blocks(src)
    exp_file = repo / "experiments" / f"{EXP}.yaml"  # h200_llamacpp; h200_speculation lives in studies/h200/
    exp = (exp_file if exp_file.is_file() else repo / f"studies/h200/{EXP}.yaml").read_text()
    if dropped:  # only self_draft has ever been short of a round; it is the last arm in the file
        if dropped != ["self_draft"] or EXP != "h200_llamacpp":
            sys.exit(f"arms {dropped} lack a round; render_here.py knows how to leave out self_draft only")
        head, _, _ = exp.partition("  self_draft:")
        tail = exp[exp.index("reference:") :]
        exp = head + tail.replace("reference:", "# self_draft ran one block only (the GPU time ran out)\nreference:", 1)
    (dest / "experiments" / f"{EXP}.yaml").write_text(exp)
    rec = dest / "resources/engines/llama.cpp-0.3.36/build.json"
    rec.parent.mkdir(parents=True)
    shutil.copy(src / "resources/engines/llama.cpp-0.3.36/build.json", rec)
    stubs = [rec]
    if (src / "resources/engines/llama.cpp-0.3.36/source.json").is_file():
        stubs.append(rec.with_name("source.json"))
        shutil.copy(src / "resources/engines/llama.cpp-0.3.36/source.json", stubs[-1])
    sys.path.insert(0, str(dest / "workflow"))
    from bracket import embedded

    for size in embedded.SYNTHETIC_SHAPES:  # the GGUF the GPU machine wrote (16 GB) stays there: an empty
        name = embedded.SYNTHETIC_GGUF.format(shape=size)  # stand-in, older than the records, keeps the
        if name in exp:  # rules that read it from running again here (weights.json came back)
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes(b"")
            stubs.append(dest / name)
    res, raw = dest / "results" / EXP, dest / "results" / EXP / "raw"
    raw.mkdir(parents=True)
    (dest / "logs" / EXP / "server").mkdir(parents=True)
    sched = ["position,arm,round,seed"]
    for old, new in keep.items():
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
    account_here(src, res, dest)
    # Inputs older than outputs, so Snakemake reruns only what follows the blocks.
    old = time.time() - 3600
    for p in [dest / "experiments" / f"{EXP}.yaml", *stubs]:
        os.utime(p, (old, old))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--cores",
            "1",
            "--touch",
            f"results/{EXP}/schedule.csv",
            *[f"results/{EXP}/settings/block-{k}.json" for k in range(len(keep))],
        ],
        cwd=dest,
        check=False,
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--cores",
            "1",
            "--touch",
            *[f"results/{EXP}/raw/block-{k}.jsonl" for k in range(len(keep))],
            f"results/{EXP}/weights.json",
            f"results/{EXP}/ceiling.json",
        ],
        cwd=dest,
        check=False,
    )
    subprocess.run(
        [sys.executable, "-m", "snakemake", EXP, "--cores", "1", "--rerun-triggers", "mtime"], cwd=dest, check=True
    )


if __name__ == "__main__":
    main()
