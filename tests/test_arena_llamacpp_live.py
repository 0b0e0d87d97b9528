"""The arena cell on a real llama-server (the workflow's cached CPU build, the embedded model as GGUF):
llama-benchy's chat request through llama.cpp's own /v1/chat/completions stream, slices cut by its /tokenize."""

from types import SimpleNamespace

import httpx
import pytest

from bracket import arena, arena_stats, config, engines
from bracket.engines import launch

from test_engines_llamacpp_live import llama_server, trained_gguf  # noqa: F401 (fixtures)

pytestmark = pytest.mark.engine


def test_arena_cell_on_llama_server(llama_server, trained_gguf, tmp_path):  # noqa: F811
    depth, pp, tg, users = 256, 64, 16, 2
    cfg = config.validate({
        "engine": {"kind": "llamacpp", "embedded": False, "model": "unused", "port": 8185,
                   "executable": llama_server["llama_server"], "startup_timeout_s": 120,
                   "args": ["--ctx-size", "2048", "--parallel", "2", "--threads", "2"]},
        "arms": {"plain": {}}, "request": {"timeout_s": 120},
        "workloads": {"cell": {"prompts": "p.jsonl", "kind": "arena", "depth": depth, "prompt_tokens": pp,
                               "tokens": tg, "users": users}},
        "design": {"runs_per_block": 2, "warmup_runs": 1, "seed": 1},
        "analysis": {"bootstrap_resamples": 200}}, source="test")
    adapter = engines.get("llamacpp")
    arm = cfg["arms"]["plain"]
    argv = launch.server_argv(cfg, adapter, arm, trained_gguf, "unused", name="unused")
    server = launch.make_server(cfg, adapter, argv=argv, env=launch.launch_env(cfg, adapter, arm),
                                log_path=tmp_path / "server.log", base_url=launch.base_url(cfg), secret_names=[])
    base = launch.base_url(cfg)
    raw = []
    with server, httpx.Client(timeout=60) as http:
        server.wait_ready(90)
        block = SimpleNamespace(arm="plain", position=0, round=0)
        for run in range(3):
            raw += arena.run_cell(cfg, "t", block, arm, adapter, "cell", [], http, base, "srv", run, run == 0, None)
    assert all(r["error"] is None for r in raw), [r["error"] for r in raw]
    assert all(r["completion_tokens"] == tg and r["finish_reason"] == "length" for r in raw)
    assert all(r["cached_tokens"] == 0 for r in raw)  # cache_prompt false, as the adapter sends
    assert all(abs(r["prompt_tokens"] - (depth + pp)) <= 8 for r in raw), [r["prompt_tokens"] for r in raw]
    (cell,) = arena_stats.summarize(raw, cfg)["cells"]
    assert cell["summary"]["n"] == 2 and len(cell["llama_benchy"]["tg_throughput"]["values"]) == 2
    assert cell["llama_benchy"]["ttfr"]["mean"] > 0 and cell["llama_benchy"]["pp_throughput"]["mean"] > 0
