"""The arena cell on the real embedded vLLM CPU engine, at a small depth, through the block runner a
workflow run uses (one server start, about a minute).

Chat requests need a chat template, which the tiny model lacks: tests/data/arena/chat_template.jinja
is passed with --chat-template, as a user would for such a model.
"""

import pytest
from bracket import article, interop, records
from bracket.arena import readings as arena_stats
from bracket.block.runner import run_block
from bracket.experiment import config
from bracket.experiment.design import Block
from conftest import ROOT

pytestmark = pytest.mark.engine


def test_arena_cell_runs_on_vllm_and_reports_both_definitions(tmp_path, embedded_engine):
    engine, model = embedded_engine
    depth, pp, tg, users = 256, 64, 16, 2
    cfg = config.validate(
        {
            "engine": {
                "kind": "vllm",
                "embedded": True,
                "port": 8184,
                "args": ["--chat-template", str(ROOT / "tests" / "data" / "arena" / "chat_template.jinja")],
            },
            "arms": {"base": {}},
            "workloads": {
                "cell": {
                    "prompts": "experiments/prompts/chat.jsonl",
                    "kind": "arena",
                    "depth": depth,
                    "prompt_tokens": pp,
                    "tokens": tg,
                    "users": users,
                }
            },
            "design": {"runs_per_block": 3, "warmup_runs": 1, "seed": 1},
            "analysis": {"bootstrap_resamples": 200},
        },
        source="test",
    )
    path = run_block(
        cfg,
        "arena",
        Block(position=0, arm="base", round=1, seed=1),
        1,
        raw_path=tmp_path / "raw" / "block-0.jsonl",
        meta_path=tmp_path / "raw" / "block-0.meta.json",
        log_path=tmp_path / "block-0.log",
        model=str(model),
        python=str(engine / "bin" / "python"),
        root=ROOT,
        lock_dir=tmp_path / "locks",
    )
    every = records.read([path])
    # llama-benchy's coherence question, once, before the first run; the tiny model answers with code
    (check,) = [r for r in every if r.get("control") == "coherence"]
    assert check["coherent"] is not None and check["error"] is None and check["output_text"]
    raw = [r for r in every if not r.get("control")]
    assert len(raw) == 4 * users and all(r["error"] is None for r in raw), [r["error"] for r in raw]
    assert all(r["completion_tokens"] == tg and r["finish_reason"] == "length" for r in raw)
    # depth + prompt as the server counts them: slices cut by vLLM's /tokenize to the calibrated counts
    assert all(abs(r["prompt_tokens"] - (depth + pp)) <= 8 for r in raw), [r["prompt_tokens"] for r in raw]
    # each user its own slice: no prefix served from another request's cache
    assert all(r["cached_tokens"] == 0 for r in raw if not r["warmup"])
    assert all(r["ttfr_s"] is not None and 0 < r["ttfr_s"] <= r["ttft_s"] for r in raw)
    summary = arena_stats.summarize(every, cfg)
    (cell,) = summary["cells"]
    assert cell["coherence"]["status"] == ("passed" if check["coherent"] else "failed")
    assert cell["summary"]["n"] == 3 and cell["summary"]["ci_low"] <= cell["summary"]["median"]
    lb = cell["llama_benchy"]
    # A run whose every stream arrived in one network read has no decode window: llama-benchy drops it from
    # tg without a word, and bracket counts it (a loaded machine can coalesce a 16-token stream into one read)
    drop = cell["llama_benchy_dropped"]
    assert drop["unit"] == "runs" and drop["of"] == 3
    assert len(lb["tg_throughput"]["values"]) + drop["tg"] == 3 and lb["tg_throughput"]["mean"] > 0
    assert lb["pp_throughput"]["mean"] > 0 and len(lb["ttfr"]["values"]) == 3 * users
    # The two definitions agree run by run where every network read brought one token: llama-benchy counts
    # the tokens after the first read's, bracket's window every token after the first. A loaded machine can
    # deliver several events in one read (a burst), and there llama-benchy's number is its own (issue 27).
    by_run: dict = {}
    for r in raw:
        if not r["warmup"]:
            by_run.setdefault((r["block"], r["run"]), []).append(r)
    for row in cell["runs"]:
        recs = by_run[(row["block"], row["run"])]
        if all(len({t for t, _ in x["text_chunks"]}) == len(x["text_chunks"]) for x in recs):
            # Equal up to the clock's float: chunk times are kept as offsets and added back to an epoch
            # start (~1.8e9 s, a double's step there is 2.4e-7 s), so a 0.1 s window agrees to ~1e-6.
            assert row["llama_benchy_tg"] == pytest.approx(row["window_tok_s"], rel=2e-5)
    md = article.section_arena(None, article.Controls([], None, None, summary))._repr_markdown_()
    assert f"{depth} + {pp}" in md and " ± " in md
    (back,) = interop.benchy_cells(interop.export_arena(summary, "base"))
    assert (back["context_size"], back["prompt_size"], back["response_size"], back["concurrency"]) == (depth, pp, tg, 2)
