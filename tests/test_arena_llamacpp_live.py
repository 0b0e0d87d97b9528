"""The arena cell on a real llama-server (the workflow's cached CPU build, the embedded model as GGUF):
llama-benchy's chat request through llama.cpp's own /v1/chat/completions stream, slices cut by its /tokenize;
and the Spark Arena's prefix-caching mode, with the server's prompt cache on and off."""

import httpx
import pytest
from bracket import engines, records
from bracket.arena import readings as arena_stats
from bracket.arena import run as arena
from bracket.engines import launch
from bracket.experiment import arena_workload, config
from bracket.experiment.design import Block
from bracket.measure.context import BlockContext

pytestmark = pytest.mark.engine


def _cfg(llama_server, port, **cell):
    return config.validate(
        {
            "engine": {
                "kind": "llamacpp",
                "embedded": False,
                "model": "unused",
                "port": port,
                "executable": llama_server["llama_server"],
                "startup_timeout_s": 120,
                "args": ["--ctx-size", "2048", "--parallel", "2", "--threads", "2"],
            },
            "arms": {"plain": {}},
            "request": {"timeout_s": 120},
            "workloads": {"cell": {"prompts": "p.jsonl", "kind": "arena", **cell}},
            "design": {"runs_per_block": 2, "warmup_runs": 1, "seed": 1},
            "analysis": {"bootstrap_resamples": 200},
        },
        source="test",
    )


def _run(cfg, arm, gguf, tmp_path, server_id, runs=3):
    """Warmup and timed runs of the cell on one fresh llama-server launched for `arm`; every record."""
    adapter = engines.get("llamacpp")
    argv = launch.server_argv(cfg, adapter, arm, gguf, "unused", name="unused")
    server = launch.make_server(
        cfg,
        adapter,
        argv=argv,
        env=launch.launch_env(cfg, adapter, arm),
        log_path=tmp_path / f"{server_id}.log",
        base_url=launch.base_url(cfg),
        secret_names=[],
    )
    base = launch.base_url(cfg)
    raw = []
    with server, httpx.Client(timeout=60) as http:
        server.wait_ready(90)
        ctx = BlockContext(cfg, "t", Block(position=0, arm="plain", round=0, seed=0), 1, server_id)
        for run in range(runs):
            raw += arena.run_cell(ctx, adapter, "cell", http, base, run, run == 0)
    return argv, raw


def test_arena_cell_on_llama_server(llama_server, trained_gguf, tmp_path):
    depth, pp, tg, users = 256, 64, 16, 2
    cfg = _cfg(llama_server, 8185, depth=depth, prompt_tokens=pp, tokens=tg, users=users)
    _, every = _run(cfg, cfg.arms["plain"], trained_gguf, tmp_path, "srv")
    (check,) = [r for r in every if r.get("control") == "coherence"]  # llama-benchy's question, asked once
    assert check["coherent"] is not None and check["error"] is None
    raw = [r for r in every if not r.get("control")]
    assert all(r["error"] is None for r in raw), [r["error"] for r in raw]
    assert all(r["completion_tokens"] == tg and r["finish_reason"] == "length" for r in raw)
    assert all(r["cached_tokens"] == 0 for r in raw)  # cache_prompt false, as the adapter sends
    assert all(abs(r["prompt_tokens"] - (depth + pp)) <= 8 for r in raw), [r["prompt_tokens"] for r in raw]
    (cell,) = arena_stats.summarize(every, cfg)["cells"]
    assert cell["summary"]["n"] == 2 and len(cell["llama_benchy"]["tg_throughput"]["values"]) == 2
    assert cell["llama_benchy"]["ttfr"]["mean"] > 0 and cell["llama_benchy"]["pp_throughput"]["mean"] > 0
    assert cell["coherence"]["status"] in ("passed", "failed") and cell["coherence"]["checked"] == 1


def test_prefix_cell_reads_its_context_from_the_cache_and_a_cache_off_server_reads_cache_miss(
    llama_server,
    trained_gguf,
    tmp_path,
):
    # Above the guard's one-block slack (256), so a context not served from the cache cannot pass for one that was.
    depth, pp, tg, users = 384, 32, 8, 2
    cfg = _cfg(
        llama_server,
        8186,
        depth=depth,
        prompt_tokens=pp,
        tokens=tg,
        users=users,
        cache="prefix",
        tg_exact=False,
        latency="api",
        coherence=False,
    )
    ((cached_arm, names),) = arena_workload.servers(cfg, "plain")  # the server bracket launches for a prefix cell
    assert names == ["cell"] and cached_arm.server.prefix_caching is True
    argv, raw = _run(cfg, cached_arm, trained_gguf, tmp_path, "on")
    assert "--no-cache-prompt" not in argv and not [r for r in raw if r.get("control")]  # coherence: false
    assert all(r["error"] is None for r in raw), [r["error"] for r in raw]
    ctx = [r for r in raw if r["arena_phase"] == "ctx"]
    inf = [r for r in raw if r["arena_phase"] == "inference"]
    assert len(ctx) == len(inf) == 3 * users and all(r["cache_expected"] == depth for r in inf)
    # each user's inference finds the context its own load left in its slot; the load found none of it
    assert all(abs(r["cached_tokens"] - depth) <= records.CACHE_BLOCK_SLACK for r in inf), [
        r["cached_tokens"] for r in inf
    ]
    assert all(r["cached_tokens"] > depth - 32 for r in inf), [r["cached_tokens"] for r in inf]
    assert all(records.validity(r) == [] for r in ctx + inf), [records.validity(r) for r in ctx + inf]
    assert all(r["latency_s"] > 0 for r in raw)  # latency api: three GET /v1/models, measured
    cells = arena_stats.summarize(raw, cfg)["cells"]
    assert [c["phase"] for c in cells] == ["ctx", "inference"]
    assert all(c["summary"]["n"] == 2 and c["llama_benchy"]["pp_throughput"]["mean"] > 0 for c in cells)
    assert cells[0]["llama_benchy"]["is_context_prefill_phase"] and cells[1]["llama_benchy"]["prompt_size"] == pp

    # The same cell on the arm as bracket launches it for everything else (--no-cache-prompt --cache-ram 0):
    # the request leaves cache_prompt out, as llama-benchy's does, so the server's default keeps nothing.
    argv, raw = _run(cfg, cfg.arms["plain"], trained_gguf, tmp_path, "off", runs=2)
    assert "--no-cache-prompt" in argv
    inf = [r for r in raw if r["arena_phase"] == "inference"]
    assert inf and all(r["error"] is None and r["cached_tokens"] < depth - records.CACHE_BLOCK_SLACK for r in inf)
    assert all([k for k, _ in records.reasons(r)] == ["cache miss"] for r in inf), [records.validity(r) for r in inf]
    (_, inference) = arena_stats.summarize(raw, cfg)["cells"]
    assert inference["summary"] is None and not any(r["valid"] for r in inference["runs"])
