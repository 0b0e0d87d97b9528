"""The synthetic GGUF's weights have no artefacts: no repeated rows, no exact ties among the top logits.

An earlier writer (bench/h200/write_gguf.py) tiled one pool of 2^26 values, so the rows of a
4,096-wide matrix repeated every 16,384 and the output matrix's best candidates tied exactly (token
ids 16,384 apart): the self-draft arm's acceptance on the H200 measured those ties. These tests hold
the writer to Qwen2's real vocabulary size (151,936 rows), where the tiling repeated, and check that
the same checks find the tiled matrix's ties, so that they can fail.
"""

import numpy as np
import pytest
from bracket.embedded import synthetic
from conftest import ROOT

N_VOCAB = 151_936  # Qwen2's tokenizer, as in ggml-vocab-qwen2.gguf
TOP = 16


def repeated_rows(m: np.ndarray) -> int:
    """Rows equal, byte for byte, to an earlier row."""
    rows = np.ascontiguousarray(m).view(np.dtype((np.void, m.shape[1] * m.itemsize))).ravel()
    return m.shape[0] - np.unique(rows).size


def top_ties(out: np.ndarray, hidden: np.ndarray, top: int = TOP) -> list[int]:
    """For each hidden state, how many of the `top` largest logits (float32, output matrix x state) equal another."""
    logits = out.astype(np.float32) @ hidden.T.astype(np.float32)  # (n_vocab, states)
    ties = []
    for j in range(logits.shape[1]):
        best = np.sort(logits[:, j])[-top:]
        ties.append(top - np.unique(best).size)
    return ties


def hidden_states(hidden: int, n: int = 6) -> np.ndarray:
    """Final hidden states as llama.cpp feeds the output matrix: RMS-normalised (output_norm is ones),
    from random vectors and from the embedding table's own rows (a token's state before any layer)."""
    rng = np.random.default_rng(7)
    return rng.standard_normal((n, hidden)).astype(np.float32)


def rms(x: np.ndarray) -> np.ndarray:
    return x / np.sqrt((x.astype(np.float32) ** 2).mean(axis=1, keepdims=True) + 1e-6)


@pytest.fixture(scope="module")
def tiny():
    shape = synthetic.SHAPES["tiny"]
    return shape, dict(synthetic.tensors(shape, N_VOCAB, seed=0, workers=2))


def test_tensors_have_the_shapes_the_header_declares(tiny):
    shape, t = tiny
    expected = synthetic.tensor_shapes(shape, N_VOCAB)
    assert list(t) == [name for name, _ in expected]
    for name, dims in expected:
        assert t[name].shape == dims
        assert t[name].dtype == (np.float32 if len(dims) == 1 else np.float16)
    assert np.all(t["output_norm.weight"] == 1)
    spread = float(t["output.weight"].astype(np.float32).std())
    assert 0.018 < spread < 0.022  # normal values with spread 0.02


def test_no_matrix_repeats_a_row(tiny):
    _, t = tiny
    for name, m in t.items():
        if m.ndim == 2:
            assert repeated_rows(m) == 0, name
    # rows also differ between the embedding and the output matrix (not the same tensor twice)
    assert not np.array_equal(t["token_embd.weight"][:100], t["output.weight"][:100])


def test_output_logits_have_no_exact_ties_among_the_top_candidates(tiny):
    shape, t = tiny
    out, embd = t["output.weight"], t["token_embd.weight"]
    states = np.concatenate(
        [rms(hidden_states(shape["hidden"])), rms(embd[[0, 42, 16_384, 151_000]].astype(np.float32))]
    )
    assert top_ties(out, states) == [0] * len(states)


def test_the_checks_find_the_tiled_pools_ties():
    """The earlier writer's output matrix: the pool tiled, so rows repeat every pool_size / hidden.
    With 8B's width (4,096) and the 2^26 pool, 16,384; here a 2^20 pool and width 64 give the same period."""
    pool = synthetic.pool(0, bits=20)
    hidden = 64
    tiled = np.tile(pool, -(-N_VOCAB * hidden // pool.size))[: N_VOCAB * hidden].reshape(N_VOCAB, hidden)
    assert repeated_rows(tiled) == N_VOCAB - pool.size // hidden
    assert all(ties > 0 for ties in top_ties(tiled, rms(hidden_states(hidden))))


def test_row_offsets_are_distinct_and_fit_the_pool():
    for rows, cols in [(N_VOCAB, 4096), (12_288, 4096), (4096, 12_288)]:
        for k in (0, 1, 398):
            off = synthetic.row_offsets(rows, cols, 1 << synthetic.POOL_BITS, k)
            assert np.unique(off).size == rows
            assert off.min() >= 0 and off.max() + cols <= 1 << synthetic.POOL_BITS
    with pytest.raises(ValueError, match="do not fit"):
        synthetic.row_offsets(100, 64, 128, 0)


def test_the_workflow_writes_the_synthetic_models_it_names():
    """The rule's shapes are the writer's; a native llama.cpp experiment serving one passes preflight
    before the file exists (rule synthetic_gguf writes it), while any other missing model is named."""
    from bracket import embedded
    from bracket.experiment import config, preflight

    assert set(embedded.SYNTHETIC_SHAPES) == set(synthetic.SHAPES)
    name = embedded.SYNTHETIC_GGUF.format(shape="8b")
    assert embedded.is_synthetic(name) and not embedded.is_synthetic("resources/models/other-8b-f16.gguf")
    cfg = config.validate(
        {
            "engine": {"kind": "llamacpp", "embedded": False, "model": name},
            "arms": {"a": {}, "d": {"speculative": {"method": "draft_model", "draft_tokens": 4, "model": name}}},
        }
    )
    assert preflight.model_problems(cfg, ROOT) == []
    cfg = cfg.model_copy(
        update={"engine": cfg.engine.model_copy(update={"model": "resources/models/missing-f16.gguf"})}
    )
    assert any("missing-f16.gguf" in p for p in preflight.model_problems(cfg, ROOT))


@pytest.mark.integration
def test_the_written_gguf_has_no_repeated_output_rows_and_no_tied_logits(tmp_path):
    """The file itself, as rule synthetic_gguf writes it (tiny shape, Qwen2's vocabulary from the llama.cpp
    source that build_llamacpp.sh unpacks), read back through gguf-py: the output matrix the server
    multiplies has no repeated rows and no exact ties among its top logits."""
    import json
    import subprocess
    import sys

    from bracket import embedded

    record = tmp_path / "source.json"
    proc = subprocess.run(
        [
            "bash",
            str(ROOT / "workflow/scripts/build_llamacpp.sh"),
            embedded.LLAMACPP_VERSION,
            "source",
            "1",
            str(record),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    source = json.loads(record.read_text())["source_dir"]
    out = tmp_path / "synthetic-qwen3-tiny-f16.gguf"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "workflow/bracket/embedded/synthetic.py"), source, str(out), "--shape", "tiny"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    sys.path.insert(0, f"{source}/gguf-py")
    import gguf

    tensors = {t.name: t for t in gguf.GGUFReader(str(out)).tensors}
    hidden = synthetic.SHAPES["tiny"]["hidden"]
    w = np.asarray(tensors["output.weight"].data).reshape(-1, hidden)
    assert w.shape == (N_VOCAB, hidden) and w.dtype == np.float16
    assert repeated_rows(w) == 0
    assert top_ties(w, rms(hidden_states(hidden))) == [0] * 6
