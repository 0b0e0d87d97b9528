"""The weights byte account: bytes per component, and bytes read for each decoded token.

Single-stream decoding reads every weight it uses once per step, so the denominator of the
decode ceiling is the bytes of the weights a text token touches, counted from tensor headers
(never from file sizes, which include parts a text token never reads):

    bytes_per_token = backbone + output + embedding / vocab          (untied)
    bytes_per_token = backbone + embedding                            (tied: the output layer
                                                                       is the embedding, read once)

plus the MTP head when speculation drafts with it (``speculative_method="mtp"``). The vision
tower is never read for text. Components:

- ``backbone``: the decoder layers and final norm of the language model (also anything not
  recognised, listed under ``unmatched`` so a wrong guess is visible; override it).
- ``embedding``: the token embedding table; a token reads one row.
- ``output``: the output projection (``lm_head``), absent when tied.
- ``vision``: vision tower and projector (``model.visual.*``, ``vision_tower.*``, GGUF mmproj).
- ``mtp``: multi-token-prediction head (``mtp.*``; layers past ``num_hidden_layers``, as in
  DeepSeek-V3 and GLM; GGUF ``nextn`` tensors).
- ``other``: recognised parts that text decoding never reads (audio encoders).

Seed 003's account of Qwen3.8-27B (Unsloth NVFP4): layers 17.83 GB + output 1.27 GB + one
embedding row = 19.10 GB per token; the embedding (2.54 GB), vision (0.92 GB) and MTP head
(0.85 GB) are stored but not read.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from bracket.physics import modelsource
from bracket.physics.storage import Module, group_modules
from bracket.physics.tensor_headers import Checkpoint, read_checkpoint, read_hub_checkpoint

# `exp` is the validated experiment (bracket.typed.experiment.Experiment), read by attribute; not imported
# here: experiment/ stands above this layer (ARCHITECTURE.md, the floor plan).

COMPONENTS = ("backbone", "embedding", "output", "vision", "mtp", "other")
# Parts a plain text token never reads.
NOT_READ = ("vision", "mtp", "other")

# (component, pattern searched in the module key), first match wins. The key is the tensor
# name without its .weight/.weight_scale/... suffix.
COMPONENT_PATTERNS: tuple[tuple[str, str], ...] = (
    (
        "vision",
        r"(^|\.)(visual|vision_tower|vision_model|vision_encoder|image_encoder|vision_language_adapter"
        r"|multi_modal_projector|mm_projector|patch_merger|pre_mm_projector_norm|embed_vision)(\.|$)"
        r"|^(v|mm)\.|^model\.vision_",
    ),
    ("other", r"(^|\.)(audio_tower|audio_model|audio_encoder|embed_audio|speech_encoder)(\.|$)|^a\."),
    ("mtp", r"(^|\.)mtp(\.|$)|(^|\.)nextn(\.|$)"),
    ("output", r"(^|\.)lm_head(\.|$)|^output$|(^|\.)embed_out$"),
    ("embedding", r"(^|\.)(embed_tokens|wte|word_embeddings|tok_embeddings)$|^token_embd$"),
    ("backbone", r"(^|\.)(layers|h|blocks|blk|decoder)\.\d+\.|(^|\.)(norm|ln_f|final_layernorm|output_norm)$"),
)
_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers|blk|h)\.(\d+)\.")

# What each speculative method reads beyond the target model, for the per-arm note.
SPECULATIVE_EXTRA = {
    "ngram": "none: proposals come from the context; each step verifies up to K+1 tokens with the same bytes",
    "suffix": "none: proposals come from a suffix tree of earlier output; same bytes per step",
    "mtp": "the MTP head and the output layer once per draft token (seed 003: 19.10 + 3 x 2.12 = 25.5 GB)",
    "draft_model": "a separate draft model, once per draft token",
    "eagle": "a separate draft head, once per draft token",
    "eagle3": "a separate draft head, once per draft token",
    "dflash": "a separate block-diffusion drafter, once per step",
}


def compile_overrides(overrides: dict | None) -> list[tuple[re.Pattern, str]]:
    """Validate ``{regex: component}`` overrides; the error names the bad entry and the choices."""
    compiled = []
    for pattern, component in (overrides or {}).items():
        if component not in COMPONENTS:
            raise ValueError(
                f"weights override {pattern!r} -> {component!r}: the component must be one of {', '.join(COMPONENTS)}."
            )
        try:
            compiled.append((re.compile(pattern), component))
        except re.error as exc:
            raise ValueError(f"weights override {pattern!r} is not a valid regular expression: {exc}.") from exc
    return compiled


def classify(module: Module, *, num_layers: int | None = None, overrides=()) -> tuple[str, bool]:
    """(component, matched) for one module: overrides first, then the name patterns.

    Layers numbered ``num_layers`` or more are MTP layers (DeepSeek-V3 stores its MTP module as
    ``model.layers.61`` of a 61-layer model). ``matched`` is False for a name no pattern knows;
    such modules count as backbone (read per token), the conservative choice for a ceiling.
    """
    names = [module.key, *(t.name for t in module.tensors)]
    for pattern, component in overrides:
        if any(pattern.search(n) for n in names):
            return component, True
    key = module.key
    for component, pattern in COMPONENT_PATTERNS[:2]:
        if re.search(pattern, key):
            return component, True
    m = _LAYER_INDEX.search(key)
    if num_layers is not None and m and int(m.group(1)) >= num_layers and not re.search(COMPONENT_PATTERNS[0][1], key):
        return "mtp", True
    for component, pattern in COMPONENT_PATTERNS[2:]:
        if re.search(pattern, key):
            return component, True
    return "backbone", False


def text_config(config: dict) -> dict:
    """The language model's part of a HF config (multimodal configs nest it under text_config)."""
    for key in ("text_config", "language_config", "llm_config"):
        if isinstance(config.get(key), dict):
            return {**config, **config[key]}
    return config


def num_text_layers(ckpt: Checkpoint) -> int | None:
    """Decoder layers of the language model, MTP layers excluded, from config.json or GGUF metadata."""
    if ckpt.format == "gguf":
        arch = ckpt.config.get("general.architecture")
        blocks = ckpt.config.get(f"{arch}.block_count")
        nextn = ckpt.config.get(f"{arch}.nextn_predict_layers") or 0
        return int(blocks) - int(nextn) if blocks is not None else None
    n = text_config(ckpt.config).get("num_hidden_layers")
    return int(n) if n is not None else None


def quant_bits(config: dict) -> int:
    """Integer width of a GPTQ/AWQ/compressed-tensors/MLX checkpoint (4 when the config says nothing)."""
    for block in (
        config.get("quantization_config"),
        config.get("quantization"),
        text_config(config).get("quantization_config"),
    ):
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("bits"), int):
            return block["bits"]
        for group in (block.get("config_groups") or {}).values():
            bits = (group.get("weights") or {}).get("num_bits")
            if isinstance(bits, int):
                return bits
    return 4


def tied_embeddings(ckpt: Checkpoint, has_output: bool) -> tuple[bool, list[str]]:
    """Whether the output layer is the embedding matrix, and notes when config and tensors disagree."""
    said = text_config(ckpt.config).get("tie_word_embeddings") if ckpt.format == "safetensors" else None
    if said is True and has_output:
        return True, ["config ties the output layer to the embedding; the stored lm_head copy is not read"]
    if said is False and not has_output:
        return True, ["config says tie_word_embeddings=false but no output layer is stored; counted as tied"]
    return not has_output, []


def embedding_row_bytes(modules: list[Module]) -> float:
    """Bytes of one embedding row: bytes / rows of each embedding table ([vocab, hidden] in headers)."""
    total = 0.0
    for m in modules:
        values = [t for t in m.tensors if len(t.shape) >= 2]
        if values:
            rows = max(values, key=lambda t: t.nbytes).shape[0]
            total += m.nbytes / rows
    return total


_ROUTED_EXPERT = re.compile(r"(^|\.)experts(\.|$)|_exps$")


def active_expert_fraction(ckpt: Checkpoint) -> float | None:
    """k / E: routed experts used per token over experts stored (None when the config does not say).

    A mixture-of-experts token reads only its k routed experts in each layer, so their bytes count
    k / E of the stored size (gpt-oss-20b: 4 of 32). Shared experts are always read.
    """
    if ckpt.format == "gguf":
        arch = ckpt.config.get("general.architecture")
        k, e = ckpt.config.get(f"{arch}.expert_used_count"), ckpt.config.get(f"{arch}.expert_count")
    else:
        cfg = text_config(ckpt.config)
        k = next((cfg[x] for x in ("num_experts_per_tok", "experts_per_token", "moe_topk") if cfg.get(x)), None)
        e = next((cfg[x] for x in ("num_experts", "num_local_experts", "n_routed_experts") if cfg.get(x)), None)
    return k / e if k and e else None


def is_routed_expert(module: Module) -> bool:
    return bool(_ROUTED_EXPERT.search(module.key)) and "shared_expert" not in module.key


def account(model_path, *, speculative_method: str | None = None, overrides: dict | None = None) -> dict:
    """Bytes per component and bytes read per decoded token of the model at ``model_path``.

    Reads tensor headers only (safetensors, sharded via ``model.safetensors.index.json``, or
    GGUF). ``overrides`` maps regular expressions over tensor names to components and wins over
    the built-in name patterns. ``speculative_method="mtp"`` adds the MTP head to the bytes
    read; other methods read the target's bytes unchanged (their drafters live elsewhere).

    Returns a JSON-ready dict: ``components`` (bytes), ``weights`` (logical weight counts),
    ``bits_per_weight`` (8 * bytes / weights per component), ``formats`` (per component, bytes
    and weights by storage format), ``per_token`` (what one token reads, by part),
    ``bytes_per_token``, ``read_formats`` (what one token reads, by storage format: the input
    of the precision hypotheses), ``routed_experts`` (stored bytes and k / E, for MoE models),
    ``draft_pass_bytes`` (MTP head + output layer: what each MTP draft token reads),
    ``embedding_row_bytes``, ``tied_embeddings``, ``format``, ``files``, ``tensors``,
    ``unmatched`` (names no pattern recognised, counted as backbone) and ``notes``.
    """
    ckpt = model_path if isinstance(model_path, Checkpoint) else read_checkpoint(model_path)
    compiled = compile_overrides(overrides)
    layers = num_text_layers(ckpt)
    modules = group_modules(ckpt.tensors, quant_bits=quant_bits(ckpt.config), gguf=ckpt.format == "gguf")
    by_component: dict[str, list[Module]] = defaultdict(list)
    unmatched: list[str] = []
    for m in modules:
        component, matched = classify(m, num_layers=layers, overrides=compiled)
        by_component[component].append(m)
        if not matched:
            unmatched.append(m.key)

    components = {c: sum(m.nbytes for m in by_component[c]) for c in COMPONENTS}
    weights = {c: sum(m.weights for m in by_component[c]) for c in COMPONENTS}
    bits = {c: round(8 * components[c] / weights[c], 4) if weights[c] else None for c in COMPONENTS}
    formats = {c: format_table(by_component[c]) for c in COMPONENTS if by_component[c]}

    tied, notes = tied_embeddings(ckpt, bool(by_component["output"]))
    row = embedding_row_bytes(by_component["embedding"])
    fraction, experts = active_expert_fraction(ckpt), [m for m in by_component["backbone"] if is_routed_expert(m)]
    if experts and fraction is None:
        notes.append(
            "routed experts found but the config gives no experts-per-token count: all experts counted as read"
        )
    read = read_modules(
        by_component, tied=tied, expert_fraction=fraction if experts else None, speculative_method=speculative_method
    )
    per_token = {part: round(sum(m.nbytes * f for m, f in mods)) for part, mods in read.items()}
    per_token["embedding_row"] = 0 if tied else round(row)
    read_formats = format_table([(m, f) for mods in read.values() for m, f in mods])
    if per_token["embedding_row"]:
        read_formats["embedding_row"] = {
            "bytes": per_token["embedding_row"],
            "weights": 0,
            "modules": 0,
            "element_bits": None,
            "bits_per_weight": None,
        }
    if not by_component["embedding"] and not by_component["output"]:
        notes.append("no embedding or output layer recognised: check the names, or pass overrides")
    if unmatched:
        notes.append(f"{len(unmatched)} module name(s) matched no pattern and count as backbone (see unmatched)")
    output_read = components["embedding"] if tied else components["output"]
    mtp_read = round(
        sum(
            m.nbytes * f
            for m, f in read_modules(
                by_component, tied=tied, expert_fraction=fraction if experts else None, speculative_method="mtp"
            )["mtp"]
        )
    )
    return {
        "status": "measured",
        "model": ckpt.path,
        "format": ckpt.format,
        "files": list(ckpt.files),
        "tensors": len(ckpt.tensors),
        "modules": len(modules),
        "num_hidden_layers": layers,
        "tied_embeddings": tied,
        "speculative_method": speculative_method,
        "components": components,
        "weights": weights,
        "bits_per_weight": bits,
        "formats": formats,
        "stored_bytes": sum(components.values()),
        "embedding_row_bytes": row,
        "per_token": per_token,
        "bytes_per_token": sum(per_token.values()),
        "read_formats": read_formats,
        "routed_experts": {
            "stored_bytes": sum(m.nbytes for m in experts),
            "active_fraction": fraction,
        }
        if experts
        else None,
        "draft_pass_bytes": mtp_read + output_read if components["mtp"] else None,
        "overrides": dict(overrides or {}),
        "unmatched": unmatched[:50],
        "notes": list(ckpt.notes) + notes,
    }


def format_table(modules) -> dict[str, dict]:
    """Bytes, logical weights, module count and element width per storage format.

    ``modules`` holds Modules or (Module, factor) pairs; a factor scales bytes and weights
    (routed experts read k / E of their stored size).
    """
    table: dict[str, dict] = {}
    for item in modules:
        m, f = item if isinstance(item, tuple) else (item, 1.0)
        row = table.setdefault(m.format, {"bytes": 0, "weights": 0, "modules": 0, "element_bits": m.element_bits})
        row["bytes"] += m.nbytes * f
        row["weights"] += m.weights * f
        row["modules"] += 1
    for row in table.values():
        row["bytes"], row["weights"] = round(row["bytes"]), round(row["weights"])
        row["bits_per_weight"] = round(8 * row["bytes"] / row["weights"], 4) if row["weights"] else None
        if row["element_bits"] != row["element_bits"]:  # NaN (scale-only modules) is not JSON
            row["element_bits"] = None
    return table


def read_modules(
    by_component: dict, *, tied: bool, expert_fraction: float | None, speculative_method: str | None = None
) -> dict[str, list[tuple[Module, float]]]:
    """What one decoded token reads, by part, as (module, fraction read) pairs.

    backbone (routed experts at k / E) + output, where a tied output is the embedding matrix
    read in full once (its row lookup lies inside that read); the embedding row of an untied
    model is added by the caller. ``speculative_method="mtp"`` adds the MTP head.
    """

    def weighted(mods):
        return [(m, expert_fraction if expert_fraction is not None and is_routed_expert(m) else 1.0) for m in mods]

    return {
        "backbone": weighted(by_component["backbone"]),
        "output": weighted(by_component["embedding" if tied else "output"]),
        "mtp": weighted(by_component["mtp"]) if speculative_method == "mtp" else [],
    }


def plain_bytes_per_token(acct: dict) -> float:
    """Bytes per token of plain decoding (no MTP), whatever method the account was made for."""
    return acct["bytes_per_token"] - acct["per_token"].get("mtp", 0)


def mtp_step_bytes(acct: dict, draft_tokens: int) -> float:
    """Bytes read by one MTP speculative step: target + K * (MTP head + output layer).

    Each of the K drafts is a sequential pass through the MTP layer that ends in the shared
    output layer, and the verify pass reads the target once (seed 003: 19.10 + 3 x 2.12 = 25.5 GB).
    """
    if draft_tokens < 1:
        raise ValueError(f"draft_tokens must be at least 1, got {draft_tokens}.")
    if not acct.get("draft_pass_bytes"):
        raise ValueError(f"{acct.get('model')}: the checkpoint has no MTP head, so MTP speculation cannot run on it.")
    return plain_bytes_per_token(acct) + draft_tokens * acct["draft_pass_bytes"]


def arm_notes(acct: dict, exp) -> dict[str, dict]:
    """Per arm, what its speculative method reads beyond plain decoding."""
    notes = {}
    for arm, a in exp.arms.items():
        spec = a.speculative
        if spec is None:
            notes[arm] = {"method": None, "bytes_per_step": plain_bytes_per_token(acct), "extra": "none"}
            continue
        method, k = spec.method, spec.draft_tokens
        entry = {"method": method, "draft_tokens": k, "extra": SPECULATIVE_EXTRA.get(method, "unknown")}
        if method == "mtp":
            entry["bytes_per_step"] = mtp_step_bytes(acct, k) if acct.get("draft_pass_bytes") else None
            if not acct.get("draft_pass_bytes"):
                entry["extra"] = "the checkpoint has no MTP head: this arm cannot run as configured"
        elif method in ("ngram", "suffix"):
            entry["bytes_per_step"] = plain_bytes_per_token(acct)
        else:
            entry["bytes_per_step"] = None  # the drafter's bytes are not in this checkpoint
            draft = spec.model
            if draft and Path(draft).exists():
                try:
                    entry["draft_bytes_per_pass"] = account(draft)["bytes_per_token"]
                except (OSError, ValueError) as exc:
                    entry["draft_note"] = f"the draft's headers could not be read: {exc}"
        notes[arm] = entry
    return notes


def write_json(model_path, out_path, exp) -> dict:
    """Write the plain-decoding account of ``model_path`` to ``out_path``, with per-arm notes.

    Classification overrides come from the experiment's ``weights.overrides``.
    """
    acct = account(model_path, overrides=dict(exp.weights.overrides) or None)
    acct["arms"] = arm_notes(acct, exp)
    _write(acct, out_path)
    return acct


def unknown_account(source: modelsource.Source, reason: str | None = None) -> dict:
    """weights.json when no headers could be read: the status, why, and the key that would give them."""
    return {
        "status": "unknown",
        "model": source.name or None,
        "source": source.to_dict(),
        "reason": reason or source.detail,
        "key": source.key or "engine.model",
        "bytes_per_token": None,
        "components": {},
        "per_token": {},
        "notes": [],
        "arms": {},
    }


def account_for_experiment(exp, root=".", model: str | None = None, remote: bool | None = None) -> dict:
    """The byte account of the experiment's model from whatever this host has (bracket.physics.modelsource),
    or, when nothing has its headers, an account with ``status: unknown`` that says why.

    Physics never costs the article: a model whose headers cannot be found or read is recorded,
    not raised. ``model`` replaces engine.model (the workflow passes the embedded model's directory).
    """
    overrides = dict(exp.weights.overrides) or None
    compile_overrides(overrides)  # a bad override is the user's error: raised, not hidden
    src = modelsource.resolve(exp, root, model=model, remote=remote)
    if not src.found:
        return unknown_account(src)
    try:
        ckpt = read_hub_checkpoint(src.repo_id) if src.kind == "hub" else src.path
        acct = account(ckpt, overrides=overrides)
    except Exception as exc:  # noqa: BLE001 - any failure to read headers leaves the ceiling unknown, said why
        return unknown_account(src, f"{src.detail}, but its headers could not be read: {type(exc).__name__}: {exc}")
    acct["model"] = src.name or acct["model"]  # as the experiment names it; where it was read is in source
    acct["source"] = src.to_dict()
    acct["arms"] = arm_notes(acct, exp)
    return acct


def write_for_experiment(exp, out_path, root=".", model: str | None = None, remote: bool | None = None) -> dict:
    """Write weights.json for the experiment (rule ``weights``); see ``account_for_experiment``."""
    acct = account_for_experiment(exp, root, model, remote)
    _write(acct, out_path)
    return acct


def _write(acct: dict, out_path) -> None:
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(acct, indent=1) + "\n")
