"""The reference server (engines/reference_server.py) as an engine the workflow launches: `engine.kind: reference`.

A server whose every timing is fixed in advance: ttft, tokens per second, tokens per stream event,
bursts, faults, a context, an API key, all set by its flags (`python -m bracket.engines.reference_server
--help`), so an arm is its flags (`arms.X.args`, e.g. ["--rate", "250"]) and the true value of every
number bracket reports follows from them (`reference_server.truth`). It needs no model and no engine
environment: it runs on the Python that runs bracket, and a block takes seconds, not an engine's
start-up. The test suite runs the workflow's plumbing on it (blocks, faults, resumes, executors, the
article); real engines keep the tests of what only they show.

It answers as vLLM does (its routes, its /metrics names, its error messages), so it is sent vLLM's request
body and read through vLLM's counters:
- speculation: an arm's `speculative.draft_tokens` D becomes D + 1 tokens per stream event after a
  prefill event of one token (`--tokens-per-event D+1 --draft-budget D --prefill-token`): every draft
  accepted, whatever the method names, so a request of n tokens has 1 + ceil((n - 1) / (D + 1)) verify
  steps, all of them counted in vLLM's spec-decode counters;
- server timing: vLLM's decode-time and generation-token histograms, from the schedule:
  (E - 1) k / rate seconds over n - 1 tokens;
- `server.context_length` is --max-model-len; the server keeps no cache, so there is nothing to flush.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx

from bracket.engines import vllm
from bracket.engines.base import Engine, ServerTiming, SpecCounters, get_json, server_of, state_record
from bracket.typed.experiment import Arm, Experiment, Request

MODULE = "bracket.engines.reference_server"
# reference_server.API_KEY_ENV, named here without importing the server's module: `python -m` would find it
# imported already (by this package's __init__) and warn before running it.
API_KEY_ENV = "BRACKET_REFERENCE_API_KEY"
# The folder that holds the bracket package: the server is started with `python -m` from there, in a clone
# (workflow/) as after `pip install .` (site-packages).
PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
# Most tokens one stream event carries (reference_server._check): a verify step of 7 drafts and the bonus token.
MAX_DRAFT_TOKENS = 7


class Reference(Engine):
    kind = "reference"
    api_key_env = API_KEY_ENV
    # Any generic method: the schedule drafts D tokens per step and accepts them all.
    spec_methods = dict(vllm.METHODS)
    server_keys = frozenset({"context_length"})
    timing_from_metrics = True

    def check_arm(self, name: str, arm: Arm) -> list[str]:
        out = super().check_arm(name, arm)
        spec = arm.speculative
        if spec is not None and not 1 <= spec.draft_tokens <= MAX_DRAFT_TOKENS:
            out.append(
                f"arms.{name}.speculative.draft_tokens is {spec.draft_tokens!r}; the reference server "
                f"verifies 1 to {MAX_DRAFT_TOKENS} drafts per step (at most 8 tokens per stream event)"
            )
        return out

    def launch_argv(self, exp: Experiment, arm: Arm, model: str, python: str) -> list[str]:
        """`python -m bracket.engines.reference_server` on engine.host and engine.port; `model` is not read.

        The Python is engine.python, else the one running bracket (the server needs nothing but the
        standard library and the package's folder, which launch_env puts on PYTHONPATH)."""
        eng = exp.engine
        argv = [eng.python or sys.executable, "-m", MODULE, "--host", eng.host, "--port", str(eng.port)]
        context = server_of(arm).context_length
        if context is not None:
            argv += ["--max-model-len", str(context)]
        if arm.speculative is not None:
            d = arm.speculative.draft_tokens
            argv += ["--tokens-per-event", str(d + 1), "--draft-budget", str(d), "--prefill-token"]
        return argv + list(eng.args) + list(arm.args)

    def launch_env(self, exp: Experiment, arm: Arm) -> dict[str, str]:
        here = os.environ.get("PYTHONPATH")
        env = {"PYTHONPATH": PACKAGE_PARENT + (os.pathsep + here if here else "")}
        env.update(super().launch_env(exp, arm))
        return env

    def request_body(self, model_name: str, prompt: str, request: Request, seed: int, arm: Arm | None = None) -> dict:
        """vLLM's body: the server imitates vLLM, and its `--body-cost` charges each field beyond a plain
        client's (repetition_penalty here), so the neutrality control has a cost of known size to find."""
        return vllm.VLLM().request_body(model_name, prompt, request, seed, arm)

    def server_timing(self, events: list[dict], before: str | None, after: str | None) -> ServerTiming | None:
        return vllm.decode_from_metrics(before, after)

    def spec_counters(self, metrics_text: str) -> SpecCounters | None:
        return vllm.VLLM().spec_counters(metrics_text)

    def server_state(self, argv: list[str] | None, env: dict, arm: Arm | None) -> dict:
        if argv is None:
            return state_record("unknown", ["the server was started by hand (attach)"])
        return state_record("off", ["the reference server keeps nothing between requests"])

    def flush_cache(self, http: httpx.Client, base: str, model_name: str) -> str:
        return "nothing to flush: the reference server keeps no cache"

    def provenance(self, http: httpx.Client, base: str, model_name: str) -> dict:
        """Its version, and the schedule it served (GET /reference/config): the truth the records are read against."""
        ver = get_json(http, base + "/version")
        schedule = get_json(http, base + "/reference/config")
        return {
            "engine_version": ver.get("version") if isinstance(ver, dict) else None,
            "server_info": {"schedule": schedule} if isinstance(schedule, dict) else None,
        }
