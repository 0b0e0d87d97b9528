"""Prompt files: read them, and check before any server starts that every prompt can be served.

A prompt file is JSONL, one {"id": ..., "prompt": ...} object per line. Before launch each workload's
file must parse and hold at least one prompt, and every prompt, with its unique prefix and
request.max_tokens, must fit the context its arm is served with. A prompt over the context would get
HTTP 400 from every request of its block; it is refused up front instead, with the numbers.

The fit is counted in tokens where a tokenizer is at hand (bracket.experiment.tokencount: the model's
tokenizer.json, or an attached server's /tokenize). Where none is, it uses a stated lower bound: no
token of the model's vocabulary is longer than its longest entry, so a prompt of B bytes is at least
ceil(B / longest) tokens; the check then says that the tokens could not be counted, and why.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

from bracket import engines
from bracket.experiment import arena_grid, tokencount
from bracket.typed.experiment import Experiment, Workload

# The unique prefix the runner puts before each prompt (unique_prefix) is 13 bytes.
PREFIX_BYTES = 13


def unique_prefix(seed: int, workload: str, run: int, block: int | None = None) -> str:
    """A short tag that makes every prompt unique within a block, so the prefix cache cannot serve it.

    It depends on the experiment's design seed, the workload and the run index, not on the block:
    every arm sees the same prompt at the same run index, so greedy outputs can be compared
    across arms (bracket.controls.agreement), and each block runs in a fresh server, whose cache is empty.
    An attached server is not restarted between blocks, so there the block is part of the tag
    (`block`): a later block must not find an earlier one's prompts in the cache.
    """
    key = f"{seed}:{workload}:{run}" + (f":{block}" if block is not None else "")
    nonce = hashlib.sha256(key.encode()).hexdigest()[:10]
    return f"# {nonce}\n"


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
    for i, line in enumerate(text.split("\n")):  # a prompt may hold U+2028 or U+0085 as text
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PromptError(
                f'{path}:{i + 1}: not JSON ({exc.msg}); each line must be {{"id": ..., "prompt": ...}}'
            ) from None
        if not isinstance(obj, dict) or "prompt" not in obj:
            raise PromptError(f'{path}:{i + 1}: each line must be an object with a "prompt" key')
        if not isinstance(obj["prompt"], str) or not obj["prompt"].strip():
            raise PromptError(f'{path}:{i + 1}: "prompt" must be non-empty text')
        prompts.append({"id": str(obj.get("id", i)), "prompt": obj["prompt"], "line": i + 1})
    if not prompts:
        raise PromptError(f'{path}: no prompts; add one {{"id": ..., "prompt": ...}} object per line')
    return [{"id": p["id"], "prompt": p["prompt"]} for p in prompts]


def _flag_value(args: list[str], flags: tuple[str, ...]) -> int | None:
    """The value of the last of `flags` in a command line (argparse and llama.cpp keep the last one)."""
    found = None
    for i, a in enumerate(args):
        if a in flags and i + 1 < len(args):
            value = args[i + 1]
        elif "=" in a and a.split("=", 1)[0] in flags:
            value = a.split("=", 1)[1]
        else:
            continue
        m = re.fullmatch(r"(\d+)([kK]?)", value.strip())
        if m:
            found = int(m.group(1)) * (1024 if m.group(2) else 1)
    return found


CONTEXT_FLAGS = ("--max-model-len", "--context-length", "--ctx-size", "-c")


def _launch_argv(exp: Experiment, arm_name: str) -> list[str]:
    """The command bracket starts the arm's server with (the adapter's defaults included), or [] under attach."""
    if exp.engine.launch == "attach":
        return []
    try:
        return [str(a) for a in engines.get(exp.engine.kind).launch_argv(exp, exp.arms[arm_name], "MODEL", "python")]
    except Exception:  # noqa: BLE001 (an adapter that cannot build the command here says so at launch)
        return []


def context_length(
    exp: Experiment, arm_name: str, model_dir: Path | None, server: tuple[int, str] | None = None
) -> tuple[int, str] | None:
    """The context the arm is served with, and where that number comes from; None when unknown here.

    In order: the arm's server.context_length, a context flag in the arm's or the engine's args, the
    attached server's own report (`server`, bracket.experiment.tokencount.server_context), else the smaller of the
    command bracket launches (an adapter's default, such as the embedded vLLM's --max-model-len 2048)
    and the model's config.json."""
    arm = exp.arms[arm_name]
    stated = arm.server.context_length if arm.server is not None else None
    if stated:
        return int(stated), f"arms.{arm_name}.server.context_length"
    for where, args in ((f"arms.{arm_name}.args", arm.args), ("engine.args", exp.engine.args)):
        n = _flag_value([str(a) for a in args], CONTEXT_FLAGS)
        if n:
            return n, where
    if server:
        return server
    found = []
    n = _flag_value(_launch_argv(exp, arm_name), CONTEXT_FLAGS)
    if n:
        found.append((n, f"the {exp.engine.kind} command bracket launches for arm {arm_name!r}"))
    if model_dir is not None and (model_dir / "config.json").is_file():
        try:
            conf = json.loads((model_dir / "config.json").read_text())
        except (OSError, ValueError):
            conf = {}
        for key in ("max_position_embeddings", "max_sequence_length", "seq_length", "n_positions"):
            if isinstance(conf.get(key), int) and not isinstance(conf.get(key), bool):
                found.append((conf[key], f"{model_dir}/config.json {key}"))
                break
    # the smaller: vLLM refuses a --max-model-len over the model's own (where both are known)
    return min(found, key=lambda c: c[0]) if found else None


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


def _prefix_tokens(exp: Experiment, name: str, counter) -> int:
    """The most tokens a unique prefix of this workload takes in one block (0 without prefixes).

    Counted alone, without special tokens: the prefix ends in a newline, where the byte-level
    pre-tokenizers of BPE vocabularies split, so prefix and prompt add up to what the server counts
    (tests/test_token_fit.py checks this on the embedded model's tokenizer)."""
    if not exp.request.unique_prefix:
        return 0
    design = exp.design
    runs = design.warmup_runs + design.runs_per_block
    per_block = 0 if exp.engine.launch == "attach" else None
    return max(
        counter.count(unique_prefix(design.seed, name, r, per_block), special=False) for r in range(max(runs, 1))
    )


def _token_problems(
    exp: Experiment, name: str, wl: Workload, prompts: list[dict], counter, contexts: dict
) -> list[str]:
    """Each arm whose context a prompt of this workload does not fit, counted in tokens; the longest named."""
    max_tokens = exp.request.max_tokens
    prefix = _prefix_tokens(exp, name, counter)
    counts = [(counter.count(p["prompt"]) + prefix, p) for p in prompts]
    out = []
    for arm_name, (limit, where) in contexts.items():
        over = [(n, p) for n, p in counts if n + max_tokens > limit]
        if not over:
            continue
        n, worst = max(over, key=lambda c: c[0])
        more = f" ({len(over) - 1} more prompt(s) of the file are over too)" if len(over) > 1 else ""
        out.append(
            f"workloads.{name}: prompt {worst['id']!r} of {wl.prompts} is {n:,} tokens with its unique prefix "
            f"(counted by {counter.source}); with request.max_tokens {max_tokens} it needs {n + max_tokens:,}, over "
            f"the {limit:,}-token context of arm {arm_name!r} ({where}){more}. Shorten the prompt, lower "
            f"request.max_tokens, or serve a longer context (arms.{arm_name}.server.context_length)."
        )
        break
    return out


def _byte_problems(
    exp: Experiment, name: str, wl: Workload, prompts: list[dict], longest: int, contexts: dict, why: str
) -> list[str]:
    """The stated lower bound, where the tokens could not be counted (`why`)."""
    max_tokens = exp.request.max_tokens
    biggest = max(prompts, key=lambda p: len(p["prompt"].encode("utf-8")))
    nbytes = len(biggest["prompt"].encode("utf-8")) + PREFIX_BYTES
    at_least = math.ceil(nbytes / longest)
    for arm_name, (limit, where) in contexts.items():
        if at_least + max_tokens > limit:
            return [
                f"workloads.{name}: prompt {biggest['id']!r} of {wl.prompts} is {nbytes:,} bytes, so at least "
                f"{at_least:,} tokens (the model's longest token is {longest} bytes; its tokens could not be "
                f"counted: {why}); with request.max_tokens {max_tokens} it cannot fit the {limit:,}-token context "
                f"of arm {arm_name!r} ({where}). Shorten the prompt, lower request.max_tokens, or serve a longer "
                f"context."
            ]
    return []


def check(
    exp: Experiment,
    root: Path,
    model_dir: str | Path | None = None,
    source: str = "experiment",
    counter=None,
    server_context: tuple[int, str] | None = None,
    why_not: str = "",
) -> list[str]:
    """Every workload's prompts parse, exist, and fit every arm's context.

    `counter` counts tokens as the server does (bracket.experiment.tokencount; an attached server's /tokenize);
    without one, the model's tokenizer.json under `model_dir` is used where it can be read, else the
    byte bound (`why_not` says why an attached server could not count). `server_context` is the
    context an attached server reports. Raises PromptError with every problem found, one per line;
    returns notes for the log (tokens that could not be counted, and why)."""
    root = Path(root)
    local = None
    if model_dir:
        candidate = Path(model_dir) if Path(model_dir).is_absolute() else root / model_dir
        local = candidate if candidate.is_dir() else None
    why = why_not
    if counter is None:
        counter, own = tokencount.local(local)
        why = "; ".join(w for w in (why_not, own) if w)
    longest = longest_token_bytes(local) if counter is None else None
    contexts = {}
    for arm_name in exp.arms:
        ctx = context_length(exp, arm_name, local, server_context)
        if ctx is not None:
            contexts[arm_name] = ctx
    problems, notes = [], []
    for name, wl in exp.workloads.items():
        path = root / wl.prompts
        if not path.is_file():
            problems.append(f"workloads.{name}.prompts names {wl.prompts!r}, which does not exist (looked in {path}).")
            continue
        try:
            prompts = load(path)
        except PromptError as exc:
            problems.append(f"workloads.{name}.prompts: {exc}")
            continue
        if (wl.kind or "single") != "single" or not contexts:
            continue  # arena cells size their context from `depth`, not from the prompts' length
        if counter is not None:
            try:
                problems += _token_problems(exp, name, wl, prompts, counter, contexts)
                continue
            except tokencount.CountError as exc:
                why = str(exc)
        if longest is None:
            longest = longest_token_bytes(local)
        notes.append(
            f"workloads.{name}: prompt tokens not counted before the first block ({why or 'no tokenizer'})"
            + (
                f"; checked against a lower bound from bytes (the longest token is {longest} bytes)"
                if longest
                else "; not checked against the context"
            )
        )
        if longest:
            problems += _byte_problems(exp, name, wl, prompts, longest, contexts, why or "no tokenizer")
    problems += arena_grid.context_problems(exp, lambda arm: context_length(exp, arm, local, server_context))
    if problems:
        err = PromptError(f"{source}: " + f"\n{source}: ".join(problems))
        err.problems = problems
        raise err
    return notes
