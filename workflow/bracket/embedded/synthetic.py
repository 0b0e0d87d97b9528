"""A Qwen3-shaped GGUF with random F16 weights, written without a model hub (docs/llamacpp.md).

    python synthetic.py LLAMA_CPP_SOURCE OUT.gguf [--shape 8b|0.6b|tiny] [--seed 0]

Rule `synthetic_gguf` (workflow/rules/engine.smk) runs it for resources/models/synthetic-qwen3-SHAPE-f16.gguf,
with the llama.cpp source the llamacpp_build rule unpacked: its gguf-py writes the file and its
models/ggml-vocab-qwen2.gguf gives the tokenizer, copied field by field, so the embedding and output
matrices have one row per token of Qwen2's vocabulary (151,936).

The file has the shape, size and memory traffic of the real model; its outputs mean nothing beyond
what random weights give. Every matrix row is a window of one pool of 2^26 random F16 values
(normal, spread 0.02) that starts at its own offset: offsets walk the pool with a step coprime to its
span, so no two rows of a matrix start at the same place and none repeats another. Writing is a copy
of windows, four tensors ahead of the disk: the 16.38 GB 8B-shaped file took 18.8 s on the lent H200
machine's 16 cores (2026-12-01). (An earlier writer tiled the
pool, so rows repeated every 2^26 / 4096 = 16,384 and the output matrix's top candidates tied
exactly: speculative acceptance measured on it was the ties' artefact.) tests/test_synthetic_gguf.py
checks rows and output logits for ties.

Runs in any Python with numpy; imports nothing from bracket (the rule runs it as a script).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

SHAPES = {  # Qwen3 model cards' config.json values
    "8b": dict(hidden=4096, layers=36, heads=32, kv_heads=8, head_dim=128, ffn=12288),
    "0.6b": dict(hidden=1024, layers=28, heads=16, kv_heads=8, head_dim=128, ffn=3072),
    "tiny": dict(hidden=64, layers=2, heads=2, kv_heads=1, head_dim=32, ffn=128),  # for live tests (39 MB)
}
POOL_BITS = 26  # 2^26 F16 values, 128 MiB
SPREAD = 0.02  # small enough that activations stay finite through 36 layers


def tensor_shapes(shape: dict, n_vocab: int) -> list[tuple[str, tuple[int, ...]]]:
    """Qwen3's tensors in GGUF's names, each as (rows, columns) as numpy holds it; norms are 1-D."""
    h, hd, ffn = shape["hidden"], shape["head_dim"], shape["ffn"]
    out: list[tuple[str, tuple[int, ...]]] = [("token_embd.weight", (n_vocab, h))]
    for i in range(shape["layers"]):
        b = f"blk.{i}."
        out += [
            (b + "attn_norm.weight", (h,)),
            (b + "attn_q.weight", (shape["heads"] * hd, h)),
            (b + "attn_k.weight", (shape["kv_heads"] * hd, h)),
            (b + "attn_v.weight", (shape["kv_heads"] * hd, h)),
            (b + "attn_output.weight", (h, shape["heads"] * hd)),
            (b + "attn_q_norm.weight", (hd,)),
            (b + "attn_k_norm.weight", (hd,)),
            (b + "ffn_norm.weight", (h,)),
            (b + "ffn_gate.weight", (ffn, h)),
            (b + "ffn_up.weight", (ffn, h)),
            (b + "ffn_down.weight", (h, ffn)),
        ]
    return out + [("output_norm.weight", (h,)), ("output.weight", (n_vocab, h))]


def pool(seed: int, bits: int = POOL_BITS) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(1 << bits, dtype=np.float32) * SPREAD).astype(np.float16)


def row_offsets(rows: int, cols: int, pool_size: int, tensor_index: int) -> np.ndarray:
    """One start offset per row, all distinct: start + r * step (mod span), step coprime to span.

    span = pool_size - cols + 1 windows fit in the pool; distinct offsets need rows <= span."""
    span = pool_size - cols + 1
    if rows > span:
        raise ValueError(f"{rows} rows of {cols} do not fit {pool_size} pool values with distinct offsets")
    step = int(span * 0.6180339887) | 1  # golden-ratio stride: neighbouring rows land far apart
    while math.gcd(step, span) != 1:
        step += 2
    start = (tensor_index * 7919 * 104729) % span
    return (start + np.arange(rows, dtype=np.int64) * step) % span


def matrix(values: np.ndarray, shape: tuple[int, int], tensor_index: int) -> np.ndarray:
    """A (rows, cols) F16 matrix whose row r is the pool's window at row_offsets(...)[r]."""
    rows, cols = shape
    windows = np.lib.stride_tricks.sliding_window_view(values, cols)
    return windows[row_offsets(rows, cols, values.size, tensor_index)]  # fancy indexing copies


def tensors(shape: dict, n_vocab: int, seed: int = 0, workers: int = 4) -> Iterator[tuple[str, np.ndarray]]:
    """Every tensor of the model in file order: norms are ones (F32), matrices windows of one pool (F16).

    `workers` threads copy the next tensors while the caller writes this one (numpy copies without
    the GIL); at most 2 * workers tensors are held at once."""
    values = pool(seed)
    shapes = tensor_shapes(shape, n_vocab)

    def make(k: int) -> np.ndarray:
        dims = shapes[k][1]
        return np.ones(dims, dtype=np.float32) if len(dims) == 1 else matrix(values, dims, k)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
        ahead = deque(ex.submit(make, k) for k in range(min(len(shapes), 2 * workers)))
        for k, (name, _dims) in enumerate(shapes):
            arr = ahead.popleft().result()
            if k + len(ahead) + 1 < len(shapes):
                ahead.append(ex.submit(make, k + len(ahead) + 1))
            yield name, arr


def write(source: Path, out: Path, shape_name: str = "8b", seed: int = 0) -> dict:
    """Write the GGUF to `out` (through out.tmp, so a file at `out` is always whole); returns a summary."""
    sys.path.insert(0, str(source / "gguf-py"))
    import gguf

    s = SHAPES[shape_name]
    t0 = time.time()
    vocab = gguf.GGUFReader(str(source / "models" / "ggml-vocab-qwen2.gguf"))
    tmp = out.with_name(out.name + ".tmp")
    out.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(tmp), "qwen3")
    w.add_name(f"random Qwen3-{shape_name}-shaped (bracket embedded/synthetic.py, seed {seed})")
    w.add_context_length(40960)
    w.add_embedding_length(s["hidden"])
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["ffn"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_key_length(s["head_dim"])
    w.add_value_length(s["head_dim"])
    w.add_rope_freq_base(1_000_000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    n_vocab = None
    for name, field in vocab.fields.items():
        if not name.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        sub = field.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
        value = field.contents()
        w.add_key_value(name, value, vtype, sub_type=sub)
        if name == "tokenizer.ggml.tokens":
            n_vocab = len(value)
    if not n_vocab:
        raise SystemExit(f"{source}/models/ggml-vocab-qwen2.gguf has no tokenizer.ggml.tokens")
    shapes = tensor_shapes(s, n_vocab)
    for name, dims in shapes:
        dtype = np.dtype(np.float32 if len(dims) == 1 else np.float16)
        w.add_tensor_info(name, dims, dtype, int(np.prod(dims)) * dtype.itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    total = 0
    for _name, arr in tensors(s, n_vocab, seed):
        w.write_tensor_data(arr)
        total += arr.nbytes
    w.close()
    tmp.replace(out)
    summary = {
        "path": str(out),
        "shape": shape_name,
        "seed": seed,
        "tensors": len(shapes),
        "vocab": n_vocab,
        "weight_bytes": total,
        "seconds": round(time.time() - t0, 1),
    }
    print(
        f"wrote {out}: {len(shapes)} tensors, {total / 1e9:.2f} GB of weights, vocab {n_vocab}, {summary['seconds']} s"
    )
    return summary


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=Path, help="llama.cpp source (holds gguf-py/ and models/ggml-vocab-qwen2.gguf)")
    ap.add_argument("out", type=Path)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="8b")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if not (a.source / "gguf-py").is_dir() or not (a.source / "models" / "ggml-vocab-qwen2.gguf").is_file():
        ap.error(
            f"{a.source} is not a llama.cpp source with gguf-py/ and models/ggml-vocab-qwen2.gguf "
            f"(the llamacpp_build rule's record names it: source_dir)"
        )
    write(a.source, a.out, a.shape, a.seed)


if __name__ == "__main__":
    main()
