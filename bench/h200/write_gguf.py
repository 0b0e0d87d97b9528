"""Write a Qwen3-shaped GGUF with random F16 weights, without a model hub (docs/llamacpp.md).

    python write_gguf.py LLAMA_CPP_SOURCE OUT.gguf [--shape 8b|0.6b] [--seed 0]

The tokenizer is Qwen2's, copied field by field from the llama.cpp source's
models/ggml-vocab-qwen2.gguf; the embedding and output matrices have one row per token of it.
Weights are normal with a small spread so activations stay finite; they are not independent
(slices of one random pool) because only their bytes and shapes matter: the file has the shape,
size and memory traffic of the real model, and its outputs mean nothing, so speculative
acceptance measured on it means nothing either.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

SHAPES = {  # Qwen3 model cards' config.json values
    "8b": dict(hidden=4096, layers=36, heads=32, kv_heads=8, head_dim=128, ffn=12288),
    "0.6b": dict(hidden=1024, layers=28, heads=16, kv_heads=8, head_dim=128, ffn=3072),
    "tiny": dict(hidden=64, layers=2, heads=2, kv_heads=1, head_dim=32, ffn=128),  # for live tests (39 MB)
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("source", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="8b")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    sys.path.insert(0, str(a.source / "gguf-py"))
    import gguf

    s = SHAPES[a.shape]
    t0 = time.time()
    vocab = gguf.GGUFReader(str(a.source / "models" / "ggml-vocab-qwen2.gguf"))
    w = gguf.GGUFWriter(str(a.out), "qwen3")
    w.add_name(f"random Qwen3-{a.shape}-shaped (bracket bench/h200/write_gguf.py, seed {a.seed})")
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
    h, hd, ffn = s["hidden"], s["head_dim"], s["ffn"]
    shapes: list[tuple[str, tuple[int, ...]]] = [("token_embd.weight", (n_vocab, h))]
    for i in range(s["layers"]):
        b = f"blk.{i}."
        shapes += [(b + "attn_norm.weight", (h,)), (b + "attn_q.weight", (s["heads"] * hd, h)),
                   (b + "attn_k.weight", (s["kv_heads"] * hd, h)), (b + "attn_v.weight", (s["kv_heads"] * hd, h)),
                   (b + "attn_output.weight", (h, s["heads"] * hd)), (b + "attn_q_norm.weight", (hd,)),
                   (b + "attn_k_norm.weight", (hd,)), (b + "ffn_norm.weight", (h,)),
                   (b + "ffn_gate.weight", (ffn, h)), (b + "ffn_up.weight", (ffn, h)), (b + "ffn_down.weight", (h, ffn))]
    shapes += [("output_norm.weight", (h,)), ("output.weight", (n_vocab, h))]
    for name, shape in shapes:
        dtype = np.float32 if len(shape) == 1 else np.float16
        n = int(np.prod(shape))
        w.add_tensor_info(name, shape, np.dtype(dtype), n * np.dtype(dtype).itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(a.seed)
    pool = (rng.standard_normal(1 << 26, dtype=np.float32) * 0.02).astype(np.float16)  # 128 MiB
    total = 0
    for k, (_name, shape) in enumerate(shapes):
        n = int(np.prod(shape))
        if len(shape) == 1:
            arr = np.ones(shape, dtype=np.float32)
        else:
            reps = -(-n // pool.size)
            start = (k * 7919) % pool.size
            flat = np.roll(pool, -start) if reps == 1 else np.tile(pool, reps)
            arr = flat[:n].reshape(shape)
        w.write_tensor_data(arr)
        total += arr.nbytes
    w.close()
    print(f"wrote {a.out}: {len(shapes)} tensors, {total / 1e9:.2f} GB of weights, vocab {n_vocab}, "
          f"{time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
