"""Which code path MKL's BLAS takes for each MKL_CBWR request on this CPU, and the bytes one sgemm gives.

The embedded model's trainer (workflow/bracket/embedded/build_model.py) holds MKL to one branch so that
the weights do not depend on the CPU. MKL honours a request only where the branch is one it supports
on that vendor's CPU; otherwise it takes AUTO without a word. Run this with a torch that carries MKL
(the trainer's venv) on two machines and compare the digests: a branch is portable between them where
its digest is equal.

    resources/engines/trainer-torch-2.13.0/bin/python bench/mkl_branch.py

Prints a Markdown table: the request, the branch MKL reports (mkl_cbwr_get), and the sha256 of a
96x256 @ 256x768 float32 product (the size of one of the model's projections), inputs from numpy's
generator with seed 0, on 2 threads as the trainer runs.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

TRAINER = Path(__file__).resolve().parents[1] / "workflow" / "bracket" / "embedded"
REQUESTS = ("AVX2,STRICT", "AVX512,STRICT", "COMPATIBLE,STRICT", "AUTO,STRICT")


def one() -> str:
    """In a process started with MKL_CBWR set: 'branch digest'."""
    import numpy as np
    import torch

    sys.path.insert(0, str(TRAINER))
    from build_model import mkl_branch

    branch = mkl_branch(torch)
    rng = np.random.default_rng(0)
    a = torch.from_numpy(rng.standard_normal((96, 256)).astype(np.float32))
    b = torch.from_numpy(rng.standard_normal((256, 768)).astype(np.float32))
    return f"{branch} {hashlib.sha256((a @ b).numpy().tobytes()).hexdigest()[:16]}"


def main() -> int:
    if sys.argv[1:] == ["one"]:
        print(one())
        return 0
    sys.path.insert(0, str(TRAINER))
    import torch
    from build_model import cpu_name

    print(f"CPU: {cpu_name()}; torch {torch.__version__}\n")
    print("| MKL_CBWR | branch MKL takes | sgemm sha256 (first 16) |")
    print("|---|---|---|")
    for req in REQUESTS:
        env = dict(os.environ, MKL_CBWR=req, OMP_NUM_THREADS="2", ATEN_CPU_CAPABILITY="avx2")
        out = subprocess.run([sys.executable, __file__, "one"], env=env, capture_output=True, text=True, check=True)
        branch, digest = out.stdout.split()
        print(f"| {req} | {branch} | {digest} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
