"""An arena workload as the experiment states it: its cell, the servers a block of it needs, and what makes it unrunnable.

The cell is llama-benchy's (bracket.arena.run: depth, users, tokens, prompt_tokens, api, cache), read with its
defaults; the validation (bracket.experiment.config), the preflight, the probe, the runner and the neutrality control
read it here, before anything is measured.
"""

from __future__ import annotations

import copy
from pathlib import Path

from bracket.experiment import arena_grid, prompts
from bracket.experiment.schema import schema_of
from bracket.typed.experiment import Arm, Experiment, ServerSettings, Workload

DEFAULTS = {"depth": 16384, "users": 2, "tokens": 128, "prompt_tokens": 2048}


def chat_refusal(kind: str) -> str | None:
    """Why an engine's adapter cannot send llama-benchy's chat request through its own stream (None: it can)."""
    if kind == "sglang":
        return (
            "SGLang's adapter measures through its native /generate, which takes raw text and applies no chat "
            "template, so it cannot send llama-benchy's chat request (system context + user prompt)"
        )
    return None


def spec(wl: Workload) -> dict:
    """The cell of an arena workload: depth, users, tokens, prompt_tokens, api, cache (defaults where absent)."""
    out = {k: int(getattr(wl, k)) if getattr(wl, k) is not None else v for k, v in DEFAULTS.items()}
    out["api"] = wl.api or "chat"
    out["cache"] = wl.cache or "fresh"
    out["text"] = wl.text or None
    out["tg_exact"] = True if wl.tg_exact is None else wl.tg_exact
    out["latency"] = wl.latency or "none"
    out["coherence"] = True if wl.coherence is None else wl.coherence
    return out


def is_arena(wl: Workload | None) -> bool:
    return wl is not None and wl.kind == "arena"


def problems(exp: Experiment) -> list[str]:
    """What makes an arena workload unrunnable on this engine, one sentence each, before anything starts."""
    out = []
    kind = exp.engine.kind
    for name, wl in exp.workloads.items():
        if not is_arena(wl):
            continue
        s = spec(wl)
        why = chat_refusal(kind) if s["api"] == "chat" else None
        if why:
            out.append(
                f"workloads.{name} is an arena cell with api: chat (llama-benchy's request), but {why}. "
                f"Set workloads.{name}.api: completions (context and prompt as one text through /generate), "
                f"or attach to the server's OpenAI-compatible endpoint (engine.kind: openai, engine.launch: "
                f"attach, engine.base_url)."
            )
        if s["text"] and not Path(s["text"]).is_file():
            out.append(
                f"workloads.{name}.text is {s['text']!r}, which is not a file; name a long text file "
                f"(a book) or remove text to use the built-in deterministic text."
            )
    out += arena_grid.context_problems(exp, lambda arm: prompts.context_length(exp, arm, None))
    return out


# ---- the server a prefix-caching cell needs ----------------------------------------------------------------

# Engines whose prefix cache is a launch flag of bracket's (off unless an arm turns it on): vLLM
# --no-enable-prefix-caching, SGLang --disable-radix-cache, llama.cpp --no-cache-prompt --cache-ram 0 (its
# RAM cache is what keeps several users' contexts when one slot serves them in turn).
PREFIX_SWITCH = ("vllm", "sglang", "llamacpp")


def servers(exp: Experiment, arm_name: str) -> list[tuple[Arm, list[str]]]:
    """The servers a block of `arm_name` runs, in order: (arm as launched, workload names it serves).

    A prefix-caching arena cell (cache: prefix) needs the engine's prefix cache on, which bracket turns off
    for every other measurement; so on an engine where that is a launch flag, the block's prefix cells get
    a server of their own, launched after the others' with arms.ARM.server.prefix_caching true, and the
    other workloads keep the arm's server as it is. One server where nothing differs: no prefix cell, an
    arm that turns the cache on itself, an attached server (its state is the user's; the inverted cache
    guard tells whether it served the contexts), or an engine with no switch (Ollama).
    """
    arm = exp.arms[arm_name]
    names = list(exp.workloads)
    prefix = [n for n in names if is_arena(exp.workloads[n]) and spec(exp.workloads[n])["cache"] == "prefix"]
    on = arm.server is not None and arm.server.prefix_caching is True
    if not prefix or on or exp.engine.launch == "attach" or exp.engine.kind not in PREFIX_SWITCH:
        return [(arm, names)]
    rest = [n for n in names if n not in prefix]
    return ([(arm, rest)] if rest else []) + [(with_prefix_caching(arm), prefix)]


def with_prefix_caching(arm: Arm) -> Arm:
    """The arm with server.prefix_caching true; its other server settings as they were (the schema's defaults
    where the arm states none)."""
    if arm.server is not None:
        server = arm.server.model_copy(update={"prefix_caching": True})
    else:
        defaults = {
            k: copy.deepcopy(v.get("default")) for k, v in schema_of("arms", "*", "server")["properties"].items()
        }
        server = ServerSettings.model_validate({**defaults, "prefix_caching": True})
    return arm.model_copy(update={"server": server})
