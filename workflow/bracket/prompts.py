"""Prompt files: read them, and check before any server starts that every prompt can be served.

A prompt file is JSONL, one {"id": ..., "prompt": ...} object per line. Before launch each workload's
file must parse and hold at least one prompt, and, where the model's files are on this machine,
every prompt must fit the context its arm asks for. The fit uses a stated lower bound, not the
engine's tokenizer: no token of the model's vocabulary is longer than its longest entry, so a prompt
of B bytes is at least ceil(B / longest) tokens. A prompt over that bound would get HTTP 400 from
every request; it is refused up front instead, with the numbers.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

# The unique prefix the runner puts before each prompt (bracket.runner.unique_prefix) is 13 bytes.
PREFIX_BYTES = 13


class PromptError(ValueError):
    """A prompt file that cannot be used as written; the message says which line and what to change."""


def load(path: str | Path) -> list[dict]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PromptError(f"{path}: no such prompt file") from None
    except UnicodeDecodeError as exc:
        raise PromptError(f"{path}: not UTF-8 text (byte {exc.start}); save the file as UTF-8") from None
    prompts = []
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PromptError(f"{path}:{i + 1}: not JSON ({exc.msg}); each line must be "
                              f'{{"id": ..., "prompt": ...}}') from None
        if not isinstance(obj, dict) or "prompt" not in obj:
            raise PromptError(f'{path}:{i + 1}: each line must be an object with a "prompt" key')
        if not isinstance(obj["prompt"], str) or not obj["prompt"].strip():
            raise PromptError(f'{path}:{i + 1}: "prompt" must be non-empty text')
        prompts.append({"id": str(obj.get("id", i)), "prompt": obj["prompt"], "line": i + 1})
    if not prompts:
        raise PromptError(f'{path}: no prompts; add one {{"id": ..., "prompt": ...}} object per line')
    return [{"id": p["id"], "prompt": p["prompt"]} for p in prompts]


def _flag_value(args: list[str], flags: tuple[str, ...]) -> int | None:
    for i, a in enumerate(args):
        for flag in flags:
            if a == flag and i + 1 < len(args):
                value = args[i + 1]
            elif a.startswith(flag + "="):
                value = a.split("=", 1)[1]
            else:
                continue
            m = re.fullmatch(r"(\d+)([kK]?)", value.strip())
            if m:
                return int(m.group(1)) * (1024 if m.group(2) else 1)
    return None


CONTEXT_FLAGS = ("--max-model-len", "--context-length", "--ctx-size", "-c")


def context_length(cfg: dict, arm_name: str, model_dir: Path | None) -> tuple[int, str] | None:
    """The context the arm is served with, and where that number comes from; None when unknown here."""
    arm = cfg["arms"][arm_name]
    stated = (arm.get("server") or {}).get("context_length")
    if stated:
        return int(stated), f"arms.{arm_name}.server.context_length"
    for where, args in ((f"arms.{arm_name}.args", arm.get("args") or []),
                        ("engine.args", cfg["engine"].get("args") or [])):
        n = _flag_value([str(a) for a in args], CONTEXT_FLAGS)
        if n:
            return n, where
    if model_dir is not None and (model_dir / "config.json").is_file():
        try:
            conf = json.loads((model_dir / "config.json").read_text())
        except (OSError, ValueError):
            return None
        for key in ("max_position_embeddings", "max_sequence_length", "seq_length", "n_positions"):
            if isinstance(conf.get(key), int):
                return conf[key], f"{model_dir}/config.json {key}"
    return None


def longest_token_bytes(model_dir: Path | None) -> int | None:
    """Bytes of the longest entry of the model's vocabulary (tokenizer.json), or None when not here.

    A byte-level BPE vocabulary writes each byte as one character ("Ġ" for a space), so an entry
    covers as many bytes as it has characters; any other vocabulary is measured in UTF-8 bytes."""
    if model_dir is None or not (model_dir / "tokenizer.json").is_file():
        return None
    try:
        tok = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    vocab = (tok.get("model") or {}).get("vocab")
    entries = list(vocab) if isinstance(vocab, dict) else [v[0] for v in vocab or [] if isinstance(v, list)]
    byte_level = "ByteLevel" in json.dumps([tok.get("pre_tokenizer"), tok.get("decoder")])
    lengths = [len(e) if byte_level else len(e.encode("utf-8")) for e in entries if isinstance(e, str)]
    lengths += [len(t.get("content", "").encode("utf-8")) for t in tok.get("added_tokens") or [] if isinstance(t, dict)]
    return max(lengths) if lengths else None


def check(cfg: dict, root: Path, model_dir: str | Path | None = None, source: str = "experiment") -> None:
    """Every workload's prompts parse, exist, and (where the model is here) fit every arm's context.

    Raises PromptError with every problem found, one per line."""
    root = Path(root)
    local = None
    if model_dir:
        candidate = Path(model_dir) if Path(model_dir).is_absolute() else root / model_dir
        local = candidate if candidate.is_dir() else None
    longest = longest_token_bytes(local)
    problems = []
    max_tokens = cfg["request"]["max_tokens"]
    for name, wl in cfg["workloads"].items():
        path = root / wl["prompts"]
        if not path.is_file():
            problems.append(f"workloads.{name}.prompts names {wl['prompts']!r}, which does not exist "
                            f"(looked in {path}).")
            continue
        try:
            prompts = load(path)
        except PromptError as exc:
            problems.append(f"workloads.{name}.prompts: {exc}")
            continue
        if longest is None or (wl.get("kind") or "single") != "single":
            continue  # arena cells size their context from `depth`, not from the prompts' length
        biggest = max(prompts, key=lambda p: len(p["prompt"].encode("utf-8")))
        nbytes = len(biggest["prompt"].encode("utf-8")) + PREFIX_BYTES
        at_least = math.ceil(nbytes / longest)
        for arm_name in cfg["arms"]:
            ctx = context_length(cfg, arm_name, local)
            if ctx is None:
                continue
            limit, where = ctx
            if at_least + max_tokens > limit:
                problems.append(
                    f"workloads.{name}: prompt {biggest['id']!r} of {wl['prompts']} is {nbytes:,} bytes, so at least "
                    f"{at_least:,} tokens (the model's longest token is {longest} bytes); with request.max_tokens "
                    f"{max_tokens} it cannot fit the {limit:,}-token context of arm {arm_name!r} ({where}). "
                    f"Shorten the prompt, lower request.max_tokens, or serve a longer context.")
                break
    from bracket import arena_grid  # arena cells: depth + prompt_tokens + tokens within each arm's context

    problems += arena_grid.context_problems(cfg, lambda arm: context_length(cfg, arm, local))
    if problems:
        raise PromptError(f"{source}: " + f"\n{source}: ".join(problems))
