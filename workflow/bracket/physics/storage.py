"""Storage formats of weight tensors: which tensors belong together, and how many weights they hold.

A quantized linear layer is stored as several tensors: packed values plus scales (and zeros).
The byte account needs them grouped per module, so that the scales are charged to the module
whose weights they scale, and it needs the logical weight count n of each module, so that
bits per weight = 8 * bytes / n can be reported and a "dequantised to FP8" hypothesis costs
n bytes. Recognised layouts:

=================  ============================================  ===========================
format             tensors of one module                          logical weights n
=================  ============================================  ===========================
nvfp4              weight U8 [out, in/2], weight_scale F8_E4M3   2 * numel(weight)
                   [out, in/16], weight_scale_2 F32, input_scale  (two E2M1 values a byte)
                   (ModelOpt; compressed-tensors names the
                   values weight_packed, the global scale
                   weight_global_scale)
mxfp4              <name>_blocks U8, <name>_scales U8 (E8M0,      2 * numel(blocks)
                   one per 32 values; gpt-oss)
fp8                weight F8_E4M3/E5M2 + weight_scale (per        numel(weight)
                   tensor/channel) or weight_scale_inv (blocks)
int8               weight I8 + weight_scale                       numel(weight)
gptq / awq         qweight I32, qzeros I32, scales F16, g_idx     numel(qweight) * 32 / bits
int-packed         weight_packed I32 + weight_scale (+ zero       numel(weight_packed) * 32/bits
                   point) (compressed-tensors pack-quantized)
mlx                weight U32 + scales + biases (MLX affine)      numel(weight) * 32 / bits
bf16, f16, f32     one tensor                                     numel
GGUF types         one tensor (Q4_K, Q8_0, ...), blocks inside    numel (GGUF shapes count
                                                                  logical elements)
=================  ============================================  ===========================

References: NVIDIA ModelOpt NVFP4 export and "Introducing NVFP4" (2025): E2M1 values, one
E4M3 scale per 16 values, one FP32 scale per tensor (4 + 8/16 = 4.5 bits per weight); OCP
Microscaling spec v1.0 (MXFP4: 32 values per E8M0 scale, 4.25 bits); GPTQ/AutoGPTQ and AWQ
packing (eight 4-bit values per int32, group-wise scales and zeros).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from bracket.physics.tensor_headers import TensorHeader

# Bits of one element of each safetensors dtype.
DTYPE_BITS = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E4M3": 8,
    "F8_E5M2": 8,
    "F8_E8M0": 8,
    "F8_E4M3FN": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "I64": 64,
    "U64": 64,
    "F64": 64,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
}

# Suffixes that carry the module's values (order: longest match first).
VALUE_SUFFIXES = (".weight_packed", ".qweight", "_blocks", ".weight", ".bias")
# Suffixes of overhead that belongs to a module: scales, zeros, indices, activation scales.
OVERHEAD_SUFFIXES = (
    ".weight_scale_inv",
    ".weight_scale_2",
    ".weight_global_scale",
    ".input_global_scale",
    ".weight_zero_point",
    ".weight_g_idx",
    ".weight_shape",
    ".weight_scale",
    ".input_scale",
    ".output_scale",
    ".qzeros",
    ".g_idx",
    ".scales",
    ".biases",
    "_scales",
    ".k_scale",
    ".v_scale",
    ".q_scale",
    ".prob_scale",
)


@dataclass(frozen=True)
class Module:
    """Tensors that store one weight (values plus their scales), with the format they form."""

    key: str
    tensors: tuple[TensorHeader, ...]
    format: str
    weights: int  # logical weight count n
    element_bits: float  # width of one stored value, scales excluded (4 for NVFP4, 8 for FP8)

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)

    @property
    def bits_per_weight(self) -> float:
        """8 * bytes / n, scales included (NVFP4: 4 + 8/16 = 4.5)."""
        return 8 * self.nbytes / self.weights if self.weights else float("nan")


def split_name(name: str) -> tuple[str, str, bool]:
    """(module key, suffix, is_value) of a tensor name; names with no known suffix are their own key."""
    for suffix in OVERHEAD_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)], suffix, False
    for suffix in VALUE_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)], suffix, True
    return name, "", True


def group_modules(
    tensors: list[TensorHeader] | tuple[TensorHeader, ...], *, quant_bits: int = 4, gguf: bool = False
) -> list[Module]:
    """Group tensors into modules and name each module's format.

    ``quant_bits`` is the integer width of GPTQ/AWQ/pack-quantized/MLX checkpoints (from the
    config's quantization block; 4 when it says nothing). A ``.bias`` of a quantized layer is
    its own BF16/F16 module: it is stored and read at its own width.
    """
    groups: dict[str, list[TensorHeader]] = defaultdict(list)
    for t in tensors:
        key, suffix, _ = split_name(t.name)
        if suffix == ".bias":
            key = t.name
        groups[key].append(t)
    return [classify_format(key, tuple(ts), quant_bits=quant_bits, gguf=gguf) for key, ts in groups.items()]


def classify_format(key: str, tensors: tuple[TensorHeader, ...], *, quant_bits: int = 4, gguf: bool = False) -> Module:
    """The storage format of one module's tensors and its logical weight count (see module table)."""
    if gguf:  # one tensor per module; GGUF shapes count logical elements
        t = max(tensors, key=lambda x: x.nbytes)
        return Module(key, tensors, t.dtype.lower(), sum(x.numel for x in tensors), ggml_bits(t.dtype))
    by_suffix = {split_name(t.name)[1]: t for t in tensors}
    values = [t for t in tensors if split_name(t.name)[2]]
    if not values:  # scales whose values live elsewhere (e.g. a kv-cache k_scale): overhead only
        return Module(key, tensors, "scale", 0, float("nan"))
    value = max(values, key=lambda t: t.nbytes)
    scale = by_suffix.get(".weight_scale")
    pack = max(1, 32 // quant_bits)
    if "_blocks" in by_suffix:
        return Module(key, tensors, "mxfp4", 2 * value.numel, 4)
    if value.dtype == "U8" and scale is not None and scale.dtype.startswith("F8_E4M3"):
        return Module(key, tensors, "nvfp4", 2 * value.numel, 4)
    if value.dtype == "U8" and scale is not None and scale.dtype in ("U8", "F8_E8M0"):
        return Module(key, tensors, "mxfp4", 2 * value.numel, 4)
    if ".qweight" in by_suffix:
        q = by_suffix[".qweight"]
        s = by_suffix.get(".scales")
        awq = s is not None and len(q.shape) == 2 and len(s.shape) == 2 and q.shape[1] * pack == s.shape[1]
        return Module(key, tensors, f"int{quant_bits}-{'awq' if awq else 'gptq'}", q.numel * pack, quant_bits)
    if ".weight_packed" in by_suffix and value.dtype in ("I32", "U32"):
        return Module(key, tensors, f"int{quant_bits}-packed", value.numel * pack, quant_bits)
    if value.dtype == "U32" and ".scales" in by_suffix:
        return Module(key, tensors, f"mlx-int{quant_bits}", value.numel * pack, quant_bits)
    if value.dtype.startswith("F8_"):
        return Module(key, tensors, "fp8", value.numel, 8)
    if value.dtype == "I8" and scale is not None:
        return Module(key, tensors, "int8", value.numel, 8)
    n = sum(t.numel for t in values)
    return Module(
        key, tensors, value.dtype.lower(), n, DTYPE_BITS.get(value.dtype, 8 * value.nbytes / max(1, value.numel))
    )


def ggml_bits(type_name: str) -> float:
    """Bits per weight of a GGML type, blocks' scales included: 8 * type_size / block_size."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[type_name]]
    return 8 * size / block
