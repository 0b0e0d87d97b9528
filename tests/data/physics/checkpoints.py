"""Header-only checkpoints that mirror real ones: names, dtypes and shapes, no weight data.

Each builder returns a list of (name, dtype, shape) and a config dict; ``write`` lays them out
as safetensors files whose headers carry the real byte offsets while the files stop after the
header, so a 24 GB checkpoint costs a few hundred kilobytes on disk and the reader is forced to
rely on headers alone. Shapes come from the models' published configs:

- Qwen3.5/3.8-27B (text_config: hidden 5120, intermediate 17408, 64 layers with full attention
  every 4th, 24 heads x 256 with an output gate, 4 KV heads, linear attention 16 key heads and
  48 value heads of 128, conv kernel 4, vocab 248320, untied; vision: 27 blocks of 1152 with
  MLP 4304, merger 4608 -> 5120; one MTP layer with fc [5120, 10240], 424,699,392 weights).
- the embedded test model (Qwen3, 4 layers, hidden 256, vocab 4096, tied, bf16).
- Llama-3.1-8B (32 layers, hidden 4096, MLP 14336, 8 KV heads of 128, vocab 128256).
- gpt-oss-20b (24 layers, hidden 2880, 32 experts with 4 per token, MXFP4 expert blocks).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

BITS = {"BF16": 16, "F16": 16, "F32": 32, "F8_E4M3": 8, "U8": 8, "I32": 32, "I8": 8}


def nbytes(dtype: str, shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n * BITS[dtype] // 8


def write(directory: Path, tensors, config: dict | None = None, *, shards: int = 1, with_data: bool = False) -> Path:
    """Write ``tensors`` as ``shards`` safetensors files (+ index when sharded) and config.json.

    Without ``with_data`` each file ends after its header (header-only); with it, zero bytes fill
    the data section so that ``safetensors.safe_open`` can read the file too.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    per = -(-len(tensors) // shards)
    weight_map, total = {}, 0
    for i in range(shards):
        part = tensors[i * per : (i + 1) * per]
        fname = "model.safetensors" if shards == 1 else f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        header, offset = {}, 0
        for name, dtype, shape in part:
            size = nbytes(dtype, shape)
            header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
            offset += size
            weight_map[name] = fname
        total += offset
        raw = json.dumps(header, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)
        with (directory / fname).open("wb") as fh:
            fh.write(struct.pack("<Q", len(raw)) + raw)
            if with_data:
                fh.write(bytes(offset))
    if shards > 1:
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (directory / "model.safetensors.index.json").write_text(json.dumps(index))
    if config is not None:
        (directory / "config.json").write_text(json.dumps(config))
    return directory


# ---- storage formats of one linear layer [out, in] ------------------------------------------


def bf16(name, out, inp):
    return [(f"{name}.weight", "BF16", (out, inp))]


def fp8(name, out, inp):
    """ModelOpt FP8: E4M3 values, per-tensor FP32 weight and input scales."""
    return [
        (f"{name}.weight", "F8_E4M3", (out, inp)),
        (f"{name}.weight_scale", "F32", ()),
        (f"{name}.input_scale", "F32", ()),
    ]


def nvfp4(name, out, inp):
    """ModelOpt NVFP4: two E2M1 values a byte, one E4M3 scale per 16, FP32 global and input scales."""
    return [
        (f"{name}.weight", "U8", (out, inp // 2)),
        (f"{name}.weight_scale", "F8_E4M3", (out, inp // 16)),
        (f"{name}.weight_scale_2", "F32", ()),
        (f"{name}.input_scale", "F32", ()),
    ]


def gptq(name, out, inp, group=128):
    """GPTQ int4: qweight [in/8, out], qzeros [in/g, out/8], scales F16 [in/g, out], g_idx [in]."""
    return [
        (f"{name}.qweight", "I32", (inp // 8, out)),
        (f"{name}.qzeros", "I32", (inp // group, out // 8)),
        (f"{name}.scales", "F16", (inp // group, out)),
        (f"{name}.g_idx", "I32", (inp,)),
    ]


def awq(name, out, inp, group=128):
    """AWQ int4 (GEMM): qweight [in, out/8], qzeros [in/g, out/8], scales F16 [in/g, out]."""
    return [
        (f"{name}.qweight", "I32", (inp, out // 8)),
        (f"{name}.qzeros", "I32", (inp // group, out // 8)),
        (f"{name}.scales", "F16", (inp // group, out)),
    ]


def vec(name, n, dtype="BF16"):
    return [(name, dtype, (n,))]


# ---- Qwen3.5 / Qwen3.8 27B --------------------------------------------------------------------

Q_HIDDEN, Q_INTER, Q_LAYERS, Q_VOCAB = 5120, 17408, 64, 248320

QWEN35_CONFIG = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5",
    "text_config": {
        "model_type": "qwen3_5_text",
        "hidden_size": Q_HIDDEN,
        "intermediate_size": Q_INTER,
        "num_hidden_layers": Q_LAYERS,
        "num_attention_heads": 24,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 48,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
        "full_attention_interval": 4,
        "vocab_size": Q_VOCAB,
        "tie_word_embeddings": False,
        "mtp_num_hidden_layers": 1,
    },
}


def qwen35_layer(i: int, prefix: str, mlp_fmt, attn_fmt, lin_fmt, small_fmt=bf16) -> list:
    p = f"{prefix}.layers.{i}"
    t = vec(f"{p}.input_layernorm.weight", Q_HIDDEN) + vec(f"{p}.post_attention_layernorm.weight", Q_HIDDEN)
    t += mlp_fmt(f"{p}.mlp.gate_proj", Q_INTER, Q_HIDDEN) + mlp_fmt(f"{p}.mlp.up_proj", Q_INTER, Q_HIDDEN)
    t += mlp_fmt(f"{p}.mlp.down_proj", Q_HIDDEN, Q_INTER)
    if i % 4 == 3 or prefix == "mtp":  # full attention with output gate (q is 2 x 24 x 256)
        a = f"{p}.self_attn"
        t += attn_fmt(f"{a}.q_proj", 12288, Q_HIDDEN) + attn_fmt(f"{a}.k_proj", 1024, Q_HIDDEN)
        t += attn_fmt(f"{a}.v_proj", 1024, Q_HIDDEN) + attn_fmt(f"{a}.o_proj", Q_HIDDEN, 6144)
        t += vec(f"{a}.q_norm.weight", 256) + vec(f"{a}.k_norm.weight", 256)
    else:  # Gated DeltaNet
        a = f"{p}.linear_attn"
        t += lin_fmt(f"{a}.in_proj_qkv", 10240, Q_HIDDEN) + lin_fmt(f"{a}.in_proj_z", 6144, Q_HIDDEN)
        t += small_fmt(f"{a}.in_proj_b", 48, Q_HIDDEN) + small_fmt(f"{a}.in_proj_a", 48, Q_HIDDEN)
        t += lin_fmt(f"{a}.out_proj", Q_HIDDEN, 6144)
        t += [
            (f"{a}.conv1d.weight", "BF16", (10240, 1, 4)),
            (f"{a}.A_log", "F32", (48,)),
            (f"{a}.dt_bias", "BF16", (48,)),
            (f"{a}.norm.weight", "BF16", (128,)),
        ]
    return t


def qwen35_vision() -> list:
    """Qwen3.5 vision tower in BF16: 460,734,400 weights = 0.92 GB."""
    v, t = "model.visual", []
    t += [(f"{v}.patch_embed.proj.weight", "BF16", (1152, 3, 2, 16, 16))] + vec(f"{v}.patch_embed.proj.bias", 1152)
    t += [(f"{v}.pos_embed.weight", "BF16", (2304, 1152))]
    for b in range(27):
        p = f"{v}.blocks.{b}"
        for name, out, inp in (
            ("attn.qkv", 3456, 1152),
            ("attn.proj", 1152, 1152),
            ("mlp.linear_fc1", 4304, 1152),
            ("mlp.linear_fc2", 1152, 4304),
        ):
            t += bf16(f"{p}.{name}", out, inp) + vec(f"{p}.{name}.bias", out)
        for norm in ("norm1", "norm2"):
            t += vec(f"{p}.{norm}.weight", 1152) + vec(f"{p}.{norm}.bias", 1152)
    t += vec(f"{v}.merger.norm.weight", 1152) + vec(f"{v}.merger.norm.bias", 1152)
    t += bf16(f"{v}.merger.linear_fc1", 4608, 4608) + vec(f"{v}.merger.linear_fc1.bias", 4608)
    t += bf16(f"{v}.merger.linear_fc2", Q_HIDDEN, 4608) + vec(f"{v}.merger.linear_fc2.bias", Q_HIDDEN)
    return t


def qwen35_mtp() -> list:
    """The MTP head in BF16: one full-attention layer, fc [5120, 10240], norms: 424,699,392 weights."""
    t = bf16("mtp.fc", Q_HIDDEN, 2 * Q_HIDDEN)
    t += vec("mtp.norm.weight", Q_HIDDEN) + vec("mtp.pre_fc_norm_embedding.weight", Q_HIDDEN)
    t += vec("mtp.pre_fc_norm_hidden.weight", Q_HIDDEN)
    return t + qwen35_layer(0, "mtp", bf16, bf16, bf16)


def qwen38_27b_unsloth_nvfp4() -> tuple[list, dict]:
    """Seed 003's checkpoint: MLPs of layers 0-55 NVFP4; attention, linear-attention projections,
    the output layer and the MLPs of layers 56-63 FP8; embedding, vision and MTP in BF16."""
    prefix = "model.language_model"
    t = bf16(f"{prefix}.embed_tokens", Q_VOCAB, Q_HIDDEN)
    for i in range(Q_LAYERS):
        t += qwen35_layer(i, prefix, nvfp4 if i < 56 else fp8, fp8, fp8)
    t += vec(f"{prefix}.norm.weight", Q_HIDDEN) + fp8("lm_head", Q_VOCAB, Q_HIDDEN)
    return t + qwen35_vision() + qwen35_mtp(), QWEN35_CONFIG


def qwen38_27b_modelopt_nvfp4() -> tuple[list, dict]:
    """ModelOpt's default NVFP4 recipe (every decoder Linear NVFP4, lm_head and embedding BF16):
    the likeliest layout of seed 000's RadixArk checkpoint."""
    prefix = "model.language_model"
    t = bf16(f"{prefix}.embed_tokens", Q_VOCAB, Q_HIDDEN)
    for i in range(Q_LAYERS):
        t += qwen35_layer(i, prefix, nvfp4, nvfp4, nvfp4, small_fmt=nvfp4)
    t += vec(f"{prefix}.norm.weight", Q_HIDDEN) + bf16("lm_head", Q_VOCAB, Q_HIDDEN)
    return t + qwen35_vision() + qwen35_mtp(), QWEN35_CONFIG


# ---- the embedded test model ------------------------------------------------------------------


def embedded_qwen3(layers=4, hidden=256, vocab=4096) -> tuple[list, dict]:
    """What workflow/bracket/embedded/build_model.py saves: Qwen3, tied, bf16, head_dim 64."""
    heads, inter = hidden // 64, hidden * 3
    kv = max(1, heads // 2)
    t = bf16("model.embed_tokens", vocab, hidden)
    for i in range(layers):
        p = f"model.layers.{i}"
        t += vec(f"{p}.input_layernorm.weight", hidden) + vec(f"{p}.post_attention_layernorm.weight", hidden)
        t += bf16(f"{p}.self_attn.q_proj", heads * 64, hidden) + bf16(f"{p}.self_attn.k_proj", kv * 64, hidden)
        t += bf16(f"{p}.self_attn.v_proj", kv * 64, hidden) + bf16(f"{p}.self_attn.o_proj", hidden, heads * 64)
        t += vec(f"{p}.self_attn.q_norm.weight", 64) + vec(f"{p}.self_attn.k_norm.weight", 64)
        t += bf16(f"{p}.mlp.gate_proj", inter, hidden) + bf16(f"{p}.mlp.up_proj", inter, hidden)
        t += bf16(f"{p}.mlp.down_proj", hidden, inter)
    t += vec("model.norm.weight", hidden)
    config = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "vocab_size": vocab,
        "tie_word_embeddings": True,
    }
    return t, config


# ---- Llama-3.1-8B, int4 -----------------------------------------------------------------------


def llama31_8b(linear=gptq) -> tuple[list, dict]:
    h, inter, vocab = 4096, 14336, 128256
    t = bf16("model.embed_tokens", vocab, h)
    for i in range(32):
        p = f"model.layers.{i}"
        t += vec(f"{p}.input_layernorm.weight", h) + vec(f"{p}.post_attention_layernorm.weight", h)
        t += linear(f"{p}.self_attn.q_proj", h, h) + linear(f"{p}.self_attn.k_proj", 1024, h)
        t += linear(f"{p}.self_attn.v_proj", 1024, h) + linear(f"{p}.self_attn.o_proj", h, h)
        t += linear(f"{p}.mlp.gate_proj", inter, h) + linear(f"{p}.mlp.up_proj", inter, h)
        t += linear(f"{p}.mlp.down_proj", h, inter)
    t += vec("model.norm.weight", h) + bf16("lm_head", vocab, h)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "num_hidden_layers": 32,
        "vocab_size": vocab,
        "tie_word_embeddings": False,
        "quantization_config": {"quant_method": linear.__name__, "bits": 4, "group_size": 128},
    }
    return t, config


# ---- gpt-oss-20b ------------------------------------------------------------------------------


def gpt_oss_20b() -> tuple[list, dict]:
    """24 layers, hidden 2880, 64 query heads and 8 KV heads of 64, 32 experts (4 per token) whose
    MLP weights are MXFP4 blocks (U8 [E, out, in/32, 16]) with E8M0 scales (U8 [E, out, in/32])."""
    h, e, vocab = 2880, 32, 201088
    t = bf16("model.embed_tokens", vocab, h)
    for i in range(24):
        p = f"model.layers.{i}"
        t += vec(f"{p}.input_layernorm.weight", h) + vec(f"{p}.post_attention_layernorm.weight", h)
        for name, out, inp in (("q_proj", 4096, h), ("k_proj", 512, h), ("v_proj", 512, h), ("o_proj", h, 4096)):
            t += bf16(f"{p}.self_attn.{name}", out, inp) + vec(f"{p}.self_attn.{name}.bias", out)
        t += vec(f"{p}.self_attn.sinks", 64)
        t += bf16(f"{p}.mlp.router", e, h) + vec(f"{p}.mlp.router.bias", e)
        for name, out, inp in (("gate_up_proj", 2 * h, h), ("down_proj", h, h)):
            x = f"{p}.mlp.experts.{name}"
            t += [
                (f"{x}_blocks", "U8", (e, out, inp // 32, 16)),
                (f"{x}_scales", "U8", (e, out, inp // 32)),
                (f"{x}_bias", "BF16", (e, out)),
            ]
    t += vec("model.norm.weight", h) + bf16("lm_head", vocab, h)
    config = {
        "architectures": ["GptOssForCausalLM"],
        "num_hidden_layers": 24,
        "num_local_experts": e,
        "experts_per_token": 4,
        "vocab_size": vocab,
        "tie_word_embeddings": False,
    }
    return t, config
