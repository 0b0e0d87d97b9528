"""The weights byte account, on header-only fixtures that mirror real checkpoints.

Expected values are worked out by hand from the models' shapes (see tests/data/physics/
checkpoints.py) and checked against the figures seeds 000 and 003 publish.
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import numpy as np
import pytest
from bracket.experiment import config
from bracket.physics import weights
from hypothesis import given, settings
from hypothesis import strategies as st

_spec = importlib.util.spec_from_file_location(
    "physics_checkpoints", Path(__file__).parent / "data" / "physics" / "checkpoints.py"
)
ck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ck)

GB = 1e9


@pytest.fixture(scope="module")
def unsloth(tmp_path_factory):
    """Seed 003's Unsloth Qwen3.8-27B NVFP4, in 6 header-only shards."""
    tensors, config = ck.qwen38_27b_unsloth_nvfp4()
    return ck.write(tmp_path_factory.mktemp("unsloth"), tensors, config, shards=6)


def test_seed003_components_match_the_published_account(unsloth):
    # Seed 003: 64 layers 17.83 GB, output 1.27 GB, embedding 2.54 GB, vision 0.92 GB, MTP 0.85 GB.
    # By hand: output FP8 248320 x 5120 = 1,271,398,400 B (+ two FP32 scales);
    # embedding BF16 2 x 248320 x 5120 = 2,542,796,800 B; MTP 424,699,392 weights x 2 B.
    a = weights.account(unsloth)
    c = a["components"]
    assert round(c["backbone"] / GB, 2) == 17.83
    assert c["output"] == 248320 * 5120 + 8
    assert c["embedding"] == 2 * 248320 * 5120
    assert round(c["vision"] / GB, 2) == 0.92
    assert c["mtp"] == 2 * 424_699_392
    assert a["weights"]["mtp"] == 424_699_392
    assert a["tied_embeddings"] is False
    assert a["files"] == [f"model-0000{i}-of-00006.safetensors" for i in range(1, 7)]


def test_seed003_bytes_per_token_is_backbone_output_and_one_embedding_row(unsloth):
    # 17.83 + 1.27 + one row (2 x 5120 B) = 19.10 GB; vision and MTP are not read.
    a = weights.account(unsloth)
    assert a["per_token"]["embedding_row"] == 2 * 5120
    assert a["bytes_per_token"] == a["components"]["backbone"] + a["components"]["output"] + 2 * 5120
    assert round(a["bytes_per_token"] / GB, 2) == 19.10


def test_seed003_mtp_step_reads_the_head_and_output_per_draft(unsloth):
    # Seed 003: 19.10 + 3 x (0.85 + 1.27) = 19.10 + 3 x 2.12 = 25.5 GB per step with 3 drafts.
    a = weights.account(unsloth)
    assert round(a["draft_pass_bytes"] / GB, 2) == 2.12
    assert round(weights.mtp_step_bytes(a, 3) / GB, 1) == 25.5
    spec = weights.account(unsloth, speculative_method="mtp")
    assert spec["bytes_per_token"] == a["bytes_per_token"] + a["components"]["mtp"]
    assert weights.mtp_step_bytes(spec, 3) == weights.mtp_step_bytes(a, 3)


def test_seed003_formats_and_bits_per_weight(unsloth):
    # "168 of the tensors are packed 4-bit weights": the MLPs of layers 0-55 (56 x 3).
    # NVFP4 costs 4 + 8/16 (+ two FP32 scalars) = 4.5 bits per weight. The seed's "about 5.6 bits"
    # for the layers divides by 25.5e9 weights; the headers hold 24.35e9, so 8 x 17.83e9 / 24.35e9 = 5.86.
    a = weights.account(unsloth)
    backbone = a["formats"]["backbone"]
    assert backbone["nvfp4"]["modules"] == 168
    assert backbone["nvfp4"]["bits_per_weight"] == pytest.approx(4.5, abs=1e-4)
    assert backbone["fp8"]["bits_per_weight"] == pytest.approx(8.0, abs=1e-4)
    assert a["bits_per_weight"]["backbone"] == pytest.approx(5.86, abs=0.01)
    assert a["bits_per_weight"]["output"] == pytest.approx(8.0, abs=1e-6)
    assert a["bits_per_weight"]["embedding"] == 16.0


def test_seed000_du_counts_parts_a_text_token_never_reads(tmp_path):
    # Seed 000's first mistake: du of the directory as the denominator. With ModelOpt's default
    # NVFP4 recipe (all decoder linears NVFP4, lm_head and embedding BF16) the stored total is
    # 13.70 + 2 x 2.54 + 0.92 + 0.85 = 20.56 GB (seed 000's du: 20.42), but one token reads
    # 13.70 + 2.54 + one row = 16.25 GB.
    tensors, config = ck.qwen38_27b_modelopt_nvfp4()
    a = weights.account(ck.write(tmp_path, tensors, config))
    assert round(a["stored_bytes"] / GB, 2) == 20.56
    assert round(a["bytes_per_token"] / GB, 2) == 16.25
    # The language model on disk, embedding included in full, is 18.79 GB: within 0.1% of
    # seed 000's 18.77, which suggests the seed counted the whole embedding table as read.
    language = sum(a["components"][c] for c in ("backbone", "embedding", "output"))
    assert language / GB == pytest.approx(18.77, rel=0.002)


def test_embedded_model_account_equals_the_sum_of_its_tensors(tmp_path):
    # Tied, bf16, nothing unread: bytes per token = every tensor's bytes, summed independently
    # from the shapes: 2 x (4096 x 256 + 4 x (3 x 256 x 768 + 2 x 256 x 256 + 2 x 128 x 256
    # + 2 x 256 + 2 x 64) + 256) = 8,394,240 B.
    tensors, config = ck.embedded_qwen3()
    a = weights.account(ck.write(tmp_path, tensors, config, with_data=True))
    expected = 2 * (4096 * 256 + 4 * (3 * 256 * 768 + 2 * 256 * 256 + 2 * 128 * 256 + 2 * 256 + 2 * 64) + 256)
    assert sum(ck.nbytes(d, s) for _, d, s in tensors) == expected == 8_394_240
    assert a["tied_embeddings"] is True
    assert a["bytes_per_token"] == expected
    assert a["per_token"] == {
        "backbone": expected - 2 * 4096 * 256,
        "output": 2 * 4096 * 256,
        "mtp": 0,
        "embedding_row": 0,
    }
    assert a["bits_per_weight"]["backbone"] == 16.0
    assert a["unmatched"] == [] and a["notes"] == []


def test_embedded_model_header_matches_safetensors_library(tmp_path):
    # Our header reader agrees with safetensors' own on a complete file.
    from safetensors import safe_open

    tensors, config = ck.embedded_qwen3()
    d = ck.write(tmp_path, tensors, config, with_data=True)
    a = weights.account(d)
    with safe_open(d / "model.safetensors", "np") as f:
        total = sum(2 * int(np.prod(f.get_slice(k).get_shape())) for k in f.keys())
    assert a["stored_bytes"] == total


@pytest.mark.integration
@pytest.mark.serial
def test_20_gb_checkpoint_reads_in_well_under_a_second(unsloth):
    # 24 GB described by 6 headers of about 0.2 MB: nothing else is read.
    t0 = time.perf_counter()
    a = weights.account(unsloth)
    assert time.perf_counter() - t0 < 0.5
    assert a["stored_bytes"] > 20 * GB
    assert sum(p.stat().st_size for p in unsloth.glob("*.safetensors")) < 2_000_000


def test_gptq_and_awq_int4_count_packed_weights(tmp_path):
    # Llama-3.1-8B int4, group 128. AWQ per module: qweight in x out / 2 B, qzeros in x out / 256 B,
    # scales in x out / 64 B, so 8 x (1/2 + 1/256 + 1/64) = 4.15625 bits per weight exactly;
    # GPTQ adds g_idx (32 bits per input row, 32 / out bits per weight: 0.002 to 0.03).
    for packing in (ck.gptq, ck.awq):
        tensors, config = ck.llama31_8b(packing)
        a = weights.account(ck.write(tmp_path / packing.__name__, tensors, config))
        fmt = a["formats"]["backbone"][f"int4-{packing.__name__}"]
        assert fmt["modules"] == 32 * 7
        assert fmt["weights"] == 32 * (2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096)
        if packing is ck.awq:
            assert fmt["bits_per_weight"] == pytest.approx(4.15625, abs=1e-4)
        else:
            assert 4.15625 < fmt["bits_per_weight"] < 4.16625
        assert a["components"]["output"] == 2 * 128256 * 4096


def test_gpt_oss_reads_four_of_32_experts(tmp_path):
    # gpt-oss-20b: MXFP4 expert blocks (4 + 8/32 = 4.25 bits); a token reads 4/32 of them.
    tensors, config = ck.gpt_oss_20b()
    a = weights.account(ck.write(tmp_path, tensors, config, shards=3))
    mx = a["formats"]["backbone"]["mxfp4"]
    assert mx["modules"] == 48
    assert mx["bits_per_weight"] == pytest.approx(4.25)
    assert a["routed_experts"]["active_fraction"] == 4 / 32
    expert_bytes = a["routed_experts"]["stored_bytes"]
    assert a["per_token"]["backbone"] == pytest.approx(a["components"]["backbone"] - expert_bytes * 28 / 32, abs=2)
    assert a["bytes_per_token"] < a["stored_bytes"] / 3


def test_overrides_move_tensors_between_components(unsloth):
    # Declaring the vision merger part of the backbone adds its 0.045 GB to what a token reads.
    a = weights.account(unsloth)
    b = weights.account(unsloth, overrides={r"^model\.visual\.merger\.": "backbone"})
    merger = 2 * (4608 * 4608 + 4608 + 5120 * 4608 + 5120 + 2 * 1152)
    assert b["components"]["vision"] == a["components"]["vision"] - merger
    assert b["bytes_per_token"] == a["bytes_per_token"] + merger
    with pytest.raises(ValueError, match="must be one of"):
        weights.account(unsloth, overrides={"lm_head": "head"})
    with pytest.raises(ValueError, match="not a valid regular expression"):
        weights.account(unsloth, overrides={"(": "other"})


def test_deepseek_style_mtp_layer_past_num_hidden_layers(tmp_path):
    tensors = ck.bf16("model.embed_tokens", 1000, 64) + ck.bf16("lm_head", 1000, 64) + ck.vec("model.norm.weight", 64)
    for i in range(3):
        tensors += ck.bf16(f"model.layers.{i}.mlp.up_proj", 128, 64)
    tensors += ck.bf16("model.layers.2.embed_tokens", 1000, 64)  # layer 2 of a 2-layer model: MTP
    a = weights.account(ck.write(tmp_path, tensors, {"num_hidden_layers": 2, "num_nextn_predict_layers": 1}))
    assert a["components"]["mtp"] == 2 * (128 * 64 + 1000 * 64)
    assert a["components"]["backbone"] == 2 * (2 * 128 * 64 + 64)


def test_unknown_names_count_as_backbone_and_are_listed(tmp_path):
    tensors = ck.bf16("model.embed_tokens", 100, 8) + ck.bf16("mystery.proj", 8, 8)
    a = weights.account(ck.write(tmp_path, tensors, {}))
    assert a["unmatched"] == ["mystery.proj"]
    assert a["per_token"]["backbone"] == 2 * 64
    assert any("unmatched" in n for n in a["notes"])


def test_errors_name_the_problem_and_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="no .safetensors or .gguf files"):
        weights.account(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        weights.account(tmp_path / "nope")
    (tmp_path / "model.safetensors").write_bytes(b"version https://git-lfs")
    with pytest.raises(ValueError, match="Git LFS pointer"):
        weights.account(tmp_path)


def test_index_naming_a_missing_shard_is_an_error(tmp_path):
    tensors, config = ck.embedded_qwen3()
    ck.write(tmp_path, tensors, config, shards=2)
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="Finish the download"):
        weights.account(tmp_path)


def test_write_json_notes_per_arm_bytes(unsloth, tmp_path):
    cfg = config.validate(
        {
            "arms": {
                "plain": {},
                "mtp3": {"speculative": {"method": "mtp", "draft_tokens": 3}},
                "ngram": {"speculative": {"method": "ngram", "draft_tokens": 8}},
            }
        }
    )
    out = tmp_path / "weights.json"
    weights.write_json(unsloth, out, cfg)
    a = json.loads(out.read_text())
    assert a["arms"]["plain"]["bytes_per_step"] == a["bytes_per_token"]
    assert round(a["arms"]["mtp3"]["bytes_per_step"] / GB, 1) == 25.5
    assert a["arms"]["ngram"]["bytes_per_step"] == a["bytes_per_token"]


@settings(max_examples=30, deadline=None)
@given(vocab=st.integers(8, 5000), hidden=st.integers(1, 64), layers=st.integers(1, 4), tied=st.booleans())
def test_bytes_per_token_never_exceeds_stored_and_tied_reads_everything(tmp_path_factory, vocab, hidden, layers, tied):
    tensors = ck.bf16("model.embed_tokens", vocab, hidden) + ck.vec("model.norm.weight", hidden)
    for i in range(layers):
        tensors += ck.bf16(f"model.layers.{i}.mlp.up_proj", 2 * hidden, hidden)
    if not tied:
        tensors += ck.bf16("lm_head", vocab, hidden)
    a = weights.account(ck.write(tmp_path_factory.mktemp("p"), tensors, {"num_hidden_layers": layers}))
    assert a["bytes_per_token"] <= a["stored_bytes"]
    if tied:
        assert a["bytes_per_token"] == a["stored_bytes"]
    else:
        assert a["bytes_per_token"] == a["stored_bytes"] - 2 * vocab * hidden + 2 * hidden


def test_file_written_by_the_safetensors_library(tmp_path):
    # An independent writer (safetensors.numpy.save_file, with its own header padding): the
    # account equals the sum of the arrays' nbytes.
    from safetensors.numpy import save_file

    arrays = {
        "model.embed_tokens.weight": np.zeros((300, 16), np.float16),
        "lm_head.weight": np.zeros((300, 16), np.float16),
        "model.layers.0.mlp.up_proj.weight": np.zeros((48, 16), np.float32),
        "model.norm.weight": np.zeros(16, np.float16),
    }
    save_file(arrays, str(tmp_path / "model.safetensors"))
    a = weights.account(tmp_path)
    assert a["stored_bytes"] == sum(x.nbytes for x in arrays.values())
    assert a["bytes_per_token"] == 48 * 16 * 4 + 16 * 2 + 300 * 16 * 2 + 16 * 2
    assert a["notes"] == []


@pytest.mark.engine
def test_the_built_embedded_model_account_matches_its_tensors(embedded_engine):
    """The model the workflow actually trains and serves: headers alone give the same bytes as the
    tensors safetensors loads, and as the hand formula of the shapes above."""
    from safetensors import safe_open

    _, model = embedded_engine
    a = weights.account(model)
    with safe_open(model / "model.safetensors", "np") as f:
        loaded = {k: f.get_slice(k) for k in f.keys()}
        total = sum(2 * int(np.prod(s.get_shape())) for s in loaded.values())
    assert a["stored_bytes"] == total == 8_394_240
    assert a["bytes_per_token"] == total  # tied: the output layer is the whole embedding, read once
    assert a["tied_embeddings"] is True and "lm_head.weight" not in loaded
