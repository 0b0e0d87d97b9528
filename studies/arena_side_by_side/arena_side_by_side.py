"""The arena cell measured by bracket and by llama-benchy 0.4.0, back to back on the same server.

One server (the embedded vLLM CPU engine with the tiny model, or a server you run: --attach URL),
one cell (depth, prompt tokens, response tokens, users). Each round runs a bracket block (one
warmup run, then --runs runs of bracket.arena.run.run_cell) and a llama-benchy block (its own
warmup, then --runs runs, the same cell flags), in alternating order (AB, BA, ...) so slow drift
of a shared machine does not favour one tool. Both read the same text: llama-benchy's book cache
is filled with bracket's deterministic text (bracket.arena.text), and llama-benchy tokenizes with
the served model's tokenizer.json. bracket's runs are summarised both ways (bracket.arena.run), and
exported as a llama-benchy report beside llama-benchy's own.

    .venv/bin/python studies/arena_side_by_side/arena_side_by_side.py                       # tiny model, depth 512, ~3 min
    .venv/bin/python studies/arena_side_by_side/arena_side_by_side.py --attach http://127.0.0.1:8000 --tokenizer DIR \\
        --depth 16384 --pp 2048 --tg 128 --users 2 --runs 10             # the Spark Arena cell

With --arena both tools run the Spark Arena's mode (sparkrun's @official/spark-arena-v2 flags): prefix
caching (bracket's `cache: prefix`, llama-benchy's --enable-prefix-caching: a context load, the "ctx"
rows, then inference on the cached context), the length left free (no --exact-tg), latency mode api, on a
server launched with its prefix cache on; --users takes several concurrencies (default 1 2 with --arena).
--engine llamacpp measures llama-server (the workflow's cached CPU build, the tiny model as GGUF)
instead of vLLM. The table at the end gives, per phase, concurrency and metric (pp, tg, ttfr, peak),
each tool's mean ± SD over its runs (requests at concurrency 1) and whether they agree within their
spreads (|mean difference| <= SD + SD). --quick is a small cell (depth 384, pp 64, tg 16, 2 runs, 2
rounds) to see the whole thing work, not to measure:

    .venv/bin/python studies/arena_side_by_side/arena_side_by_side.py --arena --quick                 # vLLM CPU, c1 and c2
    .venv/bin/python studies/arena_side_by_side/arena_side_by_side.py --arena --engine llamacpp       # llama-server

llama-benchy runs from bench/.venv-peers/llama-benchy (see bench/README.md), offline. It is given
--skip-coherence: the tiny model fails llama-benchy's coherence question, which would stop its run;
bracket asks the same question once per server and the report says what the model answered.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "workflow"))

from bracket import embedded, engines, interop  # noqa: E402
from bracket.arena import benchy as arena_benchy  # noqa: E402
from bracket.arena import readings as arena_stats  # noqa: E402
from bracket.arena import run as arena  # noqa: E402
from bracket.arena import text as arena_text  # noqa: E402
from bracket.controls.determinism import serve  # noqa: E402
from bracket.engines.reference_server import ReferenceProcess  # noqa: E402
from bracket.experiment import config  # noqa: E402
from bracket.experiment.design import Block  # noqa: E402
from bracket.measure.context import BlockContext  # noqa: E402

BENCHY = Path(os.environ.get("BRACKET_PEERS_DIR", HERE / ".venv-peers")) / "llama-benchy" / "bin" / "llama-benchy"
BOOK_URL = "file:///bracket-arena/text.txt"
TEMPLATE = ROOT / "tests" / "data" / "arena" / "chat_template.jinja"  # the tiny model has none


def experiment(a, text: str | None = None) -> dict:
    """One arena workload per concurrency (c1, c2, ...), on one server (its prefix cache on with --arena)."""
    cell = {
        "prompts": "experiments/prompts/chat.jsonl",
        "kind": "arena",
        "depth": a.depth,
        "prompt_tokens": a.pp,
        "tokens": a.tg,
    }
    if a.arena:
        cell.update(cache="prefix", tg_exact=False, latency="api")
    if text:
        cell["text"] = text
    ctx = max(2048, max(a.users) * (a.depth + a.pp + a.tg + 256))
    # vLLM as the embedded engine (its CPU memory and eager settings), serving --model (given to serve()).
    engine = {
        "vllm": {"kind": "vllm", "embedded": True, "port": a.port, "args": ["--chat-template", str(TEMPLATE)]},
        "llamacpp": {
            "kind": "llamacpp",
            "embedded": False,
            "model": a.model,
            "port": a.port,
            "executable": a.llama_server,
            "startup_timeout_s": 120,
            "args": ["--ctx-size", str(ctx), "--parallel", str(max(a.users)), "--threads", "2"],
        },
    }
    raw = {
        "engine": engine[a.engine],
        "arms": {"server": {"server": {"prefix_caching": True}} if a.arena else {}},
        "workloads": {f"c{u}": {**cell, "users": u} for u in a.users},
        "design": {"runs_per_block": a.runs, "warmup_runs": 1, "seed": 1},
        "request": {"max_tokens": a.tg},
    }
    if a.attach:
        raw["engine"] = {"kind": "openai", "launch": "attach", "embedded": False, "base_url": a.attach, "port": a.port}
    return config.validate(raw, source="arena_side_by_side")


def reference(a, work: Path):
    """bracket/engines/reference_server.py with a known ttft and rate, and the word-level tokenizer and book that
    count its tokens exactly (bench/harness_accuracy.py); bracket reads the same book as llama-benchy."""
    sys.path.insert(0, str(ROOT / "bench"))
    from harness_accuracy import write_offline_assets

    ref = ReferenceProcess(ttft=a.ref_ttft, rate=a.ref_rate, tokens_per_event=1)
    tok_dir, book = write_offline_assets(work, a.llama_benchy.parent / "python")
    (work / "book.txt").write_text(book)
    return ref, str(tok_dir / "tokenizer.json"), book


def bracket_block(cfg, http, base, rnd: int) -> list[dict]:
    """Each cell in turn, as llama-benchy runs its concurrencies: a warmup run, then the timed runs."""
    adapter = engines.get(cfg.engine.kind)
    ctx = BlockContext(cfg, "side_by_side", Block(position=rnd, arm="server", round=rnd, seed=cfg.design.seed), 1, "s")
    d = cfg.design
    recs = []
    for wl in cfg.workloads:
        for run in range(d.warmup_runs + d.runs_per_block):
            recs += arena.run_cell(ctx, adapter, wl, http, base, run, run < d.warmup_runs)
    return recs


def benchy_argv(a, base: str, tokenizer: str, out: Path) -> list[str]:
    """llama-benchy 0.4.0's command for the same cells; --arena: the Spark Arena's flags."""
    mode = ["--enable-prefix-caching", "--latency-mode", "api"] if a.arena else ["--exact-tg", "--latency-mode", "none"]
    return [
        str(a.llama_benchy),
        "--base-url",
        base + "/v1",
        "--model",
        "bracket-model",
        "--tokenizer",
        tokenizer,
        "--book-url",
        BOOK_URL,
        "--pp",
        str(a.pp),
        "--tg",
        str(a.tg),
        "--depth",
        str(a.depth),
        "--concurrency",
        *[str(u) for u in a.users],
        "--runs",
        str(a.runs),
        *mode,
        "--skip-coherence",
        "--format",
        "json",
        "--save-result",
        str(out),
    ]


def benchy_block(a, base: str, home: Path, tokenizer: str, out: Path) -> tuple[dict, list[str]]:
    argv = benchy_argv(a, base, tokenizer, out)
    p = subprocess.run(
        argv, capture_output=True, text=True, timeout=3600, env={**os.environ, "HOME": str(home), "HF_HUB_OFFLINE": "1"}
    )
    if p.returncode != 0 or not out.exists():
        raise RuntimeError(f"llama-benchy failed (exit {p.returncode}): {(p.stdout + p.stderr)[-1500:]}")
    return json.loads(out.read_text()), argv


METRICS = (
    ("pp", "pp_throughput", "t/s"),
    ("tg", "tg_throughput", "t/s"),
    ("ttfr", "ttfr", "ms"),
    ("peak", "peak_throughput", "t/s"),
)


def agree(b: dict | None, lb: dict | None) -> str:
    """ "yes" when the two means lie within the sum of the two SDs (their mean ± SD ranges overlap), else "no"."""
    if not b or not lb:
        return "n/a"
    return "yes" if abs(b["mean"] - lb["mean"]) <= b["std"] + lb["std"] else "no"


def comparison_rows(summary: dict, reports: list[dict]) -> list[dict]:
    """Per phase, concurrency and metric: bracket's llama-benchy-definition value and llama-benchy's own.

    bracket's over all its blocks' timed runs (arena_stats.summarize), llama-benchy's values pooled over its
    reports' runs; each as llama-benchy gives it (mean, population SD, values).
    """
    pooled: dict = {}
    for doc in reports:
        for c in interop.benchy_cells(doc):
            key = (c["concurrency"], c["is_context_prefill_phase"])
            for _, m, _ in METRICS:
                if c[m]:
                    pooled.setdefault(key, {}).setdefault(m, []).extend(c[m]["values"])
    rows = []
    for cell in summary["cells"]:
        key = (cell["users"], cell["phase"] == "ctx")
        for name, m, unit in METRICS:
            b = cell["llama_benchy"].get(m)
            lbv = pooled.get(key, {}).get(m)
            lb = arena_benchy.metric(lbv) if lbv else None
            rows.append(
                {
                    "phase": cell["phase"] or "fresh",
                    "users": cell["users"],
                    "metric": name,
                    "unit": unit,
                    "bracket": b,
                    "llama_benchy": lb,
                    "agree": agree(b, lb),
                }
            )
    return rows


def table(rows: list[dict]) -> list[str]:
    out = [
        "| phase | users | metric | bracket, mean ± SD (n) | llama-benchy 0.4.0, mean ± SD (n) | agree within spreads |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        d = 0 if r["unit"] == "ms" else 1
        cell = [
            f"{x['mean']:.{d}f} ± {x['std']:.{d}f} ({len(x['values'])})" if x else "n/a"
            for x in (r["bracket"], r["llama_benchy"])
        ]
        out.append(
            f"| {r['phase']} | {r['users']} | {r['metric']} ({r['unit']}) | {cell[0]} | {cell[1]} | {r['agree']} |"
        )
    return out


def pm(m) -> str:
    return "n/a" if not m else f"{m['mean']:.1f} ± {m['std']:.1f}"


def arguments(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--engine",
        choices=("vllm", "llamacpp"),
        default="vllm",
        help="the server launched: the embedded vLLM CPU engine, or llama-server (the workflow's build)",
    )
    ap.add_argument(
        "--arena",
        action="store_true",
        help="the Spark Arena's mode: prefix caching (ctx and inference rows), no exact tg, latency api",
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="a small cell (depth 384, pp 64, tg 16, 2 runs, 2 rounds): to see it work, not to measure",
    )
    ap.add_argument("--depth", type=int, default=512)
    ap.add_argument("--pp", type=int, default=128)
    ap.add_argument("--tg", type=int, default=32)
    ap.add_argument("--users", type=int, nargs="+", help="concurrencies (default: 1 2 with --arena, else 2)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--port", type=int, default=8183)
    ap.add_argument("--attach", help="measure a server you run (OpenAI-compatible base URL) instead")
    ap.add_argument(
        "--reference",
        action="store_true",
        help="measure bracket/engines/reference_server.py (known ttft and rate) instead of an engine: the truth row",
    )
    ap.add_argument("--ref-ttft", type=float, default=0.1, help="reference server's time to first token (s)")
    ap.add_argument("--ref-rate", type=float, default=200.0, help="reference server's tokens per second per request")
    ap.add_argument(
        "--model",
        help="the model served (default: the embedded tiny model under resources/models, its .gguf for llama.cpp)",
    )
    ap.add_argument("--engine-python", help="the vLLM environment's python (default: the embedded engine's)")
    ap.add_argument(
        "--llama-server",
        help="llama-server executable (default: the workflow's build, $BRACKET_LLAMACPP_BUILD/bin/llama-server)",
    )
    ap.add_argument("--tokenizer", help="tokenizer dir or tokenizer.json for llama-benchy (default: the tiny model)")
    ap.add_argument(
        "--llama-benchy",
        type=Path,
        default=BENCHY,
        help="llama-benchy executable (default: bench/.venv-peers, or $BRACKET_PEERS_DIR)",
    )
    ap.add_argument(
        "--out",
        help="the report (default: studies/arena_side_by_side/results/arena_side_by_side[_arena][_llamacpp].md)",
    )
    a = ap.parse_args(argv)
    if a.quick:
        a.depth, a.pp, a.tg, a.runs, a.rounds = 384, 64, 16, 2, 2
    a.users = a.users or ([1, 2] if a.arena else [2])
    a.out = a.out or str(
        HERE
        / "results"
        / (
            "arena_side_by_side"
            + ("_arena" if a.arena else "")
            + ("_llamacpp" if a.engine == "llamacpp" else "")
            + ("_quick" if a.quick else "")
            + ".md"
        )
    )
    probe = {
        "engine": {"kind": a.engine, "embedded": True},
        "arms": {"x": {}},
        "workloads": {"w": {"prompts": "experiments/prompts/chat.jsonl"}},
    }
    embedded_cfg = config.validate(probe, source="arena_side_by_side")
    a.model = a.model or str(ROOT / embedded.model_dir(embedded_cfg))
    a.engine_python = a.engine_python or str(ROOT / embedded.engine_python(embedded_cfg))
    a.llama_server = a.llama_server or str(embedded.llamacpp_build_dir(ROOT) / "bin" / "llama-server")
    if not a.attach and not a.reference:
        need = [(a.model, "--model")] + (
            [(a.llama_server, "--llama-server")] if a.engine == "llamacpp" else [(a.engine_python, "--engine-python")]
        )
        missing = [f"{flag} {path}" for path, flag in need if not Path(path).exists()]
        if missing:
            sys.exit(
                f"not found: {'; '.join(missing)}. Build the embedded engine and model (snakemake --cores 1 "
                f"draft_sweep; llama.cpp: llamacpp_sweep) or name them with these flags."
            )
    if a.rounds < 2:
        sys.exit(f"--rounds {a.rounds}: at least 2, so that each tool runs first once (AB, BA)")
    return a


def main(argv=None) -> int:
    a = arguments(argv)
    if not a.llama_benchy.exists():
        sys.exit(f"llama-benchy is not installed at {a.llama_benchy}; see bench/README.md")
    work = Path(tempfile.mkdtemp(prefix="arena-sbs-"))
    ref = None
    if a.reference:
        ref, ref_tokenizer, book = reference(a, work)
        a.attach, a.tokenizer = ref.url, ref_tokenizer
        cfg = experiment(a, text=str(work / "book.txt"))
    else:
        book = arena_text.join(arena_text.built_text())
        cfg = experiment(a)
    home = work / "home"
    cache = home / ".cache" / "llama-benchy"
    cache.mkdir(parents=True)
    (cache / (hashlib.md5(BOOK_URL.encode()).hexdigest() + ".txt")).write_text(book)
    model_dir = a.model[: -len(".gguf")] if a.model.endswith(".gguf") else a.model
    tokenizer = a.tokenizer or str(Path(model_dir) / "tokenizer.json")
    raw, reports, order, bargv, t0 = [], [], [], [], time.time()
    import contextlib

    ctx = (
        serve(
            cfg, "server", model=a.model, python=a.engine_python, log_path=work / "server.log", lock_dir=work / "locks"
        )
        if not a.attach
        else contextlib.nullcontext((httpx.Client(timeout=30.0), a.attach.rstrip("/"), None))
    )
    with ctx as (http, base, argv):
        for rnd in range(a.rounds):
            for tool in ("bracket", "llama-benchy") if rnd % 2 == 0 else ("llama-benchy", "bracket"):
                order.append(tool)
                print(f"round {rnd + 1}/{a.rounds}: {tool}", file=sys.stderr, flush=True)
                if tool == "bracket":
                    raw += bracket_block(cfg, http, base, rnd)
                else:
                    doc, bargv = benchy_block(a, base, home, tokenizer, work / f"benchy-{rnd}.json")
                    reports.append(doc)
    if ref is not None:
        ref.stop()
    summary = arena_stats.summarize(raw, cfg)
    rows = comparison_rows(summary, reports)
    res = Path(a.out)
    export = interop.export_arena(summary, "server", model="bracket-model (tiny)")
    interop.write(export, res.with_suffix(".bracket.json"))
    interop.write(reports[0], res.with_suffix(".llama-benchy.json"))
    server_words = (
        f"bracket/engines/reference_server.py (ttft {a.ref_ttft * 1000:g} ms, {a.ref_rate:g} tok/s per request, "
        f"one token per event)"
        if ref is not None
        else "attached at " + a.attach
        if a.attach
        else "embedded vLLM 0.32 CPU engine, tiny model"
        if a.engine == "vllm"
        else "llama-server (llama.cpp " + embedded.LLAMACPP_VERSION + ", CPU build), tiny model as GGUF"
    )
    checks = [r for r in raw if r.get("control") == "coherence"]
    coherence = (
        "not asked"
        if not checks
        else f"{'passed' if checks[0]['coherent'] else 'FAILED' if checks[0]['coherent'] is False else 'not checked'}"
        f" (answer {(checks[0]['output_text'] or checks[0]['error'] or '')[:80]!r})"
    )
    served = {}
    for r in raw:
        if not r.get("warmup") and not r.get("control") and r.get("prompt_tokens"):
            served.setdefault((r["workload"], r.get("arena_phase") or "fresh"), []).append(r["prompt_tokens"])
    cached = {}
    for r in raw:
        if not r.get("warmup") and r.get("arena_phase") == "inference":
            cached.setdefault(r["workload"], []).append(r.get("cached_tokens"))
    invalid = [
        f"{c['workload']} {c['phase'] or ''}: {sum(not x['valid'] for x in c['runs'])} of {len(c['runs'])}"
        for c in summary["cells"]
        if any(not x["valid"] for x in c["runs"])
    ]
    cmd = "  .venv/bin/python bench/" + " ".join(shlex.quote(x) for x in [Path(__file__).name] + sys.argv[1:])
    mode = (
        "the Spark Arena's mode (prefix caching: ctx and inference rows; length left free; latency api; "
        "the server's prefix cache on)"
        if a.arena
        else "the fresh cell (--exact-tg, latency none)"
    )
    lines = [
        "# The arena cell, bracket and llama-benchy side by side",
        "",
        f"Made {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(t0))} by",
        "",
        cmd,
        "",
        f"Server: {server_words} ({' '.join(argv[-8:]) if argv else ''}); a shared 2-core machine, so timings are "
        f"noisy{' (--quick: a check that it runs, not a measurement)' if a.quick else ''}.",
        f"Cells: {mode}; depth {a.depth} + prompt {a.pp} tokens, {a.tg} tokens per user, users "
        f"{', '.join(map(str, a.users))}, chat requests; {a.rounds} rounds of one bracket block and one llama-benchy "
        f"block ({a.runs} timed runs per cell each, after a warmup run), order {' / '.join(order)}.",
        "llama-benchy: `" + " ".join(shlex.quote(x) for x in bargv[1:]).replace(str(work), "$WORK") + "`",
        "",
        "Both columns are llama-benchy's definitions (bracket's computed from its own records by bracket.arena.benchy): "
        "mean ± population SD over runs, or over requests at concurrency 1; pp and tg in tokens/s, ttfr in ms, "
        "peak the most tokens in 1 s. Agree: the means differ by no more than the two SDs together.",
        "",
        *table(rows),
        "",
        "bracket's own window rate (median [95% CI], runs): "
        + "; ".join(
            f"{c['workload']} {c['phase'] or ''}: "
            + (
                f"{c['summary']['median']:.1f} [{c['summary']['ci_low']:.1f}, "
                f"{c['summary']['ci_high']:.1f}], {c['summary']['n']}"
                if c["summary"]
                else "no valid run"
            )
            for c in summary["cells"]
        )
        + ".",
        "",
        "Prompt tokens per request as the server counted them (bracket, median): "
        + "; ".join(f"{w} {ph}: {int(np.median(v))}" for (w, ph), v in sorted(served.items()))
        + f" (asked: ctx {a.depth}, inference and fresh {a.depth + a.pp}).",
        *(
            [
                "Cached tokens of bracket's inference requests (median, min): "
                + "; ".join(
                    f"{w}: {int(np.median([x or 0 for x in v]))}, {min(x or 0 for x in v)}"
                    for w, v in sorted(cached.items())
                )
                + f" (the context: {a.depth})."
            ]
            if cached
            else []
        ),
        *(
            [
                f"Invalid bracket runs (left out of the window rate, kept in llama-benchy's reading): {'; '.join(invalid)}."
            ]
            if invalid
            else []
        ),
        f"llama-benchy's coherence question, asked by bracket once: {coherence}.",
        "",
        "Why the two tools can differ on the same cell: (1) the clocks: llama-benchy stamps a chunk when its single "
        "asyncio loop reads it (`iter_any`); bracket stamps each network read in its own thread, so under load the "
        "two see different bursts; (2) the prompts: llama-benchy cuts its own tokenizer's tokens and shrinks the "
        "depth by the template's tokens measured at warmup, bracket cuts words to the server's /tokenize counts; "
        "(3) the time: blocks run one after the other on a shared machine, so drift between blocks is as large as "
        "any difference between tools.",
        "",
        f"bracket's cells exported as a llama-benchy report: `{res.with_suffix('.bracket.json').name}`; "
        f"llama-benchy's first report: `{res.with_suffix('.llama-benchy.json').name}`.",
    ]
    res.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(lines).replace(str(ROOT) + "/", "")
    res.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
