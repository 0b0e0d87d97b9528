"""GGUF files (llama.cpp) through the gguf package: types, tied output, shapes in row-major order."""

from __future__ import annotations

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from bracket.physics import ceiling, weights  # noqa: E402


def write_gguf(path, *, tied: bool, vocab=256, hidden=64, layers=2):
    """A tiny llama GGUF: Q8_0 projections (34 bytes per 32 weights = 8.5 bits), F32 norms."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(layers)
    w.add_embedding_length(hidden)
    rng = np.random.default_rng(0)

    def q8(name, rows, cols):
        data = rng.standard_normal((rows, cols)).astype(np.float32)
        w.add_tensor(
            name, gguf.quantize(data, gguf.GGMLQuantizationType.Q8_0), raw_dtype=gguf.GGMLQuantizationType.Q8_0
        )

    q8("token_embd.weight", vocab, hidden)
    for i in range(layers):
        q8(f"blk.{i}.attn_q.weight", hidden, hidden)
        q8(f"blk.{i}.ffn_up.weight", 2 * hidden, hidden)
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(hidden, dtype=np.float32))
    w.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    if not tied:
        q8("output.weight", vocab, hidden)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("tied", [True, False])
def test_gguf_account_by_hand(tmp_path, tied):
    # Q8_0: 32 weights in 34 bytes. Embedding 256 x 64 = 16384 weights = 17408 B; per layer
    # (64 x 64 + 128 x 64) x 34/32 = 13056 B + a 256 B F32 norm; final norm 256 B.
    path = write_gguf(tmp_path / "m.gguf", tied=tied)
    a = weights.account(path)
    emb = 256 * 64 * 34 // 32
    backbone = 2 * ((64 * 64 + 128 * 64) * 34 // 32 + 256) + 256
    assert a["format"] == "gguf" and a["files"] == ["m.gguf"]
    assert a["components"]["embedding"] == emb
    assert a["components"]["backbone"] == backbone
    assert a["tied_embeddings"] is tied
    assert a["formats"]["embedding"]["q8_0"]["bits_per_weight"] == pytest.approx(8.5)
    if tied:
        assert a["bytes_per_token"] == backbone + emb
    else:
        assert a["components"]["output"] == emb
        assert a["bytes_per_token"] == backbone + emb + emb // 256  # one row of the embedding
    # Q8_0 is at least 8 bits wide, so only the BF16 hypothesis widens it: 16384 weights x 2 B.
    rows = {h["name"]: h for h in ceiling.hypotheses(a, 100)}
    assert rows["dequantised to FP8"]["bytes_per_token"] == a["bytes_per_token"]
    assert rows["dequantised to BF16"]["bytes_per_token"] > a["bytes_per_token"]


def test_gguf_directory_is_found(tmp_path):
    write_gguf(tmp_path / "model-q8.gguf", tied=True)
    assert weights.account(tmp_path)["format"] == "gguf"
