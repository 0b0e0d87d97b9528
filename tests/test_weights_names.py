"""Name patterns and storage formats of the families bracket users serve."""

from __future__ import annotations

import pytest
from bracket.physics import weights
from bracket.physics.storage import classify_format, group_modules
from bracket.physics.tensor_headers import TensorHeader


def t(name, dtype="BF16", shape=(8, 8)):
    n = 1
    for d in shape:
        n *= d
    bits = {"BF16": 16, "F32": 32, "F8_E4M3": 8, "U8": 8, "I32": 32, "F16": 16}[dtype]
    return TensorHeader(name, dtype, tuple(shape), n * bits // 8, "x.safetensors")


@pytest.mark.parametrize(
    "name, component",
    [
        # Qwen3 / Qwen3.5 / Qwen3.8
        ("model.embed_tokens.weight", "embedding"),
        ("model.language_model.embed_tokens.weight", "embedding"),
        ("model.language_model.layers.3.linear_attn.A_log", "backbone"),
        ("model.language_model.layers.3.self_attn.q_norm.weight", "backbone"),
        ("model.language_model.norm.weight", "backbone"),
        ("model.visual.blocks.0.attn.qkv.weight", "vision"),
        ("model.visual.merger.linear_fc2.bias", "vision"),
        ("mtp.fc.weight", "mtp"),
        ("mtp.layers.0.mlp.down_proj.weight_scale", "mtp"),
        ("lm_head.weight", "output"),
        ("lm_head.weight_scale", "output"),
        # Llama, Mistral (HF and consolidated), Mistral 3 / Pixtral, gpt-oss
        ("model.layers.31.mlp.down_proj.qweight", "backbone"),
        ("tok_embeddings.weight", "embedding"),
        ("layers.0.attention.wq.weight", "backbone"),
        ("output.weight", "output"),
        ("norm.weight", "backbone"),
        ("language_model.model.embed_tokens.weight", "embedding"),
        ("language_model.lm_head.weight", "output"),
        ("vision_tower.transformer.layers.0.attention.q_proj.weight", "vision"),
        ("multi_modal_projector.linear_1.weight", "vision"),
        ("vision_encoder.transformer.layers.0.attention.wq.weight", "vision"),
        ("model.layers.0.mlp.experts.gate_up_proj_blocks", "backbone"),
        ("model.layers.0.self_attn.sinks", "backbone"),
        # GGUF
        ("token_embd.weight", "embedding"),
        ("blk.0.ffn_up_exps.weight", "backbone"),
        ("output_norm.weight", "backbone"),
        ("v.blk.0.attn_q.weight", "vision"),
        ("mm.0.weight", "vision"),
    ],
)
def test_component_of_real_names(name, component):
    (module,) = group_modules([t(name)])
    assert weights.classify(module, num_layers=64)[0] == component


def test_nvfp4_modelopt_and_compressed_tensors_layouts():
    modelopt = classify_format(
        "a",
        (
            t("a.weight", "U8", (128, 32)),
            t("a.weight_scale", "F8_E4M3", (128, 4)),
            t("a.weight_scale_2", "F32", ()),
            t("a.input_scale", "F32", ()),
        ),
    )
    ct = classify_format(
        "a",
        (
            t("a.weight_packed", "U8", (128, 32)),
            t("a.weight_scale", "F8_E4M3", (128, 4)),
            t("a.weight_global_scale", "F32", ()),
        ),
    )
    for m in (modelopt, ct):
        assert m.format == "nvfp4" and m.weights == 128 * 64 and m.element_bits == 4
    # 128 x 64 weights: 4096 B values + 512 B scales + 8 (or 4) B globals -> 4.5 bits and a little.
    assert modelopt.bits_per_weight == pytest.approx(8 * (4096 + 512 + 8) / 8192)


def test_fp8_per_tensor_and_block_scales():
    per_tensor = classify_format("a", (t("a.weight", "F8_E4M3", (256, 256)), t("a.weight_scale", "F32", ())))
    block = classify_format("a", (t("a.weight", "F8_E4M3", (256, 256)), t("a.weight_scale_inv", "F32", (2, 2))))
    assert per_tensor.format == block.format == "fp8"
    assert block.bits_per_weight == pytest.approx(8 + 32 * 4 * 8 / 65536 / 8)


def test_bias_of_a_quantized_layer_is_its_own_bf16_module():
    mods = {
        m.key: m
        for m in group_modules(
            [t("a.weight", "F8_E4M3", (16, 16)), t("a.weight_scale", "F32", ()), t("a.bias", "BF16", (16,))]
        )
    }
    assert mods["a"].format == "fp8" and mods["a.bias"].format == "bf16"
