"""The arena cell measured by bracket and by llama-benchy 0.4.0, back to back on the same server.

One server (the embedded vLLM CPU engine with the tiny model, or a server you run: --attach URL),
one cell (depth, prompt tokens, response tokens, users). Each round runs a bracket block (one
warmup run, then --runs runs of bracket.arena.run_cell) and a llama-benchy block (its own
warmup, then --runs runs, the same cell flags), in alternating order (AB, BA, ...) so slow drift
of a shared machine does not favour one tool. Both read the same text: llama-benchy's book cache
is filled with bracket's deterministic text (bracket.arena_text), and llama-benchy tokenizes with
the served model's tokenizer.json. bracket's runs are summarised both ways (bracket.arena), and
exported as a llama-benchy report beside llama-benchy's own.

    .venv/bin/python bench/arena_side_by_side.py                       # tiny model, depth 512, ~3 min
    .venv/bin/python bench/arena_side_by_side.py --attach http://127.0.0.1:8000 --tokenizer DIR \\
        --depth 16384 --pp 2048 --tg 128 --users 2 --runs 10             # the Spark Arena cell

llama-benchy runs from bench/.venv-peers/llama-benchy (see bench/README.md), offline.
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
from types import SimpleNamespace

import httpx
import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "workflow"))

from bracket import arena, arena_benchy, arena_stats, arena_text, config, embedded, engines, interop  # noqa: E402
from bracket.determinism import serve  # noqa: E402

BENCHY = Path(os.environ.get("BRACKET_PEERS_DIR", HERE / ".venv-peers")) / "llama-benchy" / "bin" / "llama-benchy"
BOOK_URL = "file:///bracket-arena/text.txt"
TEMPLATE = ROOT / "tests" / "data" / "arena" / "chat_template.jinja"  # the tiny model has none


def experiment(a, text: str | None = None) -> dict:
    raw = {"engine": {"kind": "vllm", "embedded": True, "port": a.port, "args": ["--chat-template", str(TEMPLATE)]},
           "arms": {"server": {}},
           "workloads": {"cell": {"prompts": "experiments/prompts/chat.jsonl", "kind": "arena", "depth": a.depth,
                                  "prompt_tokens": a.pp, "tokens": a.tg, "users": a.users}},
           "design": {"runs_per_block": a.runs, "warmup_runs": 1, "seed": 1},
           "request": {"max_tokens": a.tg}}
    if a.attach:
        raw["engine"] = {"kind": "openai", "launch": "attach", "embedded": False, "base_url": a.attach, "port": a.port}
    if text:
        raw["workloads"]["cell"]["text"] = text
    return config.validate(raw, source="arena_side_by_side")


def reference(a, work: Path):
    """bench/reference_server.py with a known ttft and rate, and the word-level tokenizer and book that
    count its tokens exactly (bench/harness_accuracy.py); bracket reads the same book as llama-benchy."""
    sys.path.insert(0, str(HERE))
    from harness_accuracy import write_offline_assets
    from reference_server import ReferenceProcess

    ref = ReferenceProcess(ttft=a.ref_ttft, rate=a.ref_rate, tokens_per_event=1)
    tok_dir, book = write_offline_assets(work, a.llama_benchy.parent / "python")
    (work / "book.txt").write_text(book)
    return ref, str(tok_dir / "tokenizer.json"), book


def bracket_block(cfg, http, base, rnd: int) -> list[dict]:
    adapter = engines.get(cfg["engine"]["kind"])
    block = SimpleNamespace(arm="server", position=rnd, round=rnd)
    d = cfg["design"]
    recs = []
    for run in range(d["warmup_runs"] + d["runs_per_block"]):
        recs += arena.run_cell(cfg, "side_by_side", block, {}, adapter, "cell", [], http, base, "s", run,
                               run < d["warmup_runs"], None)
    return recs


def benchy_block(a, base: str, home: Path, tokenizer: str, out: Path) -> tuple[dict, list[str]]:
    argv = [str(a.llama_benchy), "--base-url", base + "/v1", "--model", "bracket-model", "--tokenizer", tokenizer,
            "--book-url", BOOK_URL, "--pp", str(a.pp), "--tg", str(a.tg), "--depth", str(a.depth),
            "--concurrency", str(a.users), "--runs", str(a.runs), "--exact-tg", "--latency-mode", "none",
            "--skip-coherence", "--format", "json", "--save-result", str(out)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=1800,
                       env={**os.environ, "HOME": str(home), "HF_HUB_OFFLINE": "1"})
    if p.returncode != 0 or not out.exists():
        raise RuntimeError(f"llama-benchy failed (exit {p.returncode}): {(p.stdout + p.stderr)[-1500:]}")
    return json.loads(out.read_text()), argv


def pm(m) -> str:
    return "n/a" if not m else f"{m['mean']:.1f} ± {m['std']:.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depth", type=int, default=512)
    ap.add_argument("--pp", type=int, default=128)
    ap.add_argument("--tg", type=int, default=32)
    ap.add_argument("--users", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--port", type=int, default=8183)
    ap.add_argument("--attach", help="measure a server you run (OpenAI-compatible base URL) instead")
    ap.add_argument("--reference", action="store_true",
                    help="measure bench/reference_server.py (known ttft and rate) instead of an engine: the truth row")
    ap.add_argument("--ref-ttft", type=float, default=0.1, help="reference server's time to first token (s)")
    ap.add_argument("--ref-rate", type=float, default=200.0, help="reference server's tokens per second per request")
    ap.add_argument("--tokenizer", help="tokenizer dir or tokenizer.json for llama-benchy (default: the tiny model)")
    ap.add_argument("--llama-benchy", type=Path, default=BENCHY,
                    help="llama-benchy executable (default: bench/.venv-peers, or $BRACKET_PEERS_DIR)")
    ap.add_argument("--out", default=str(HERE / "results" / "arena_side_by_side.md"))
    a = ap.parse_args()
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
    model = str(ROOT / embedded.model_dir(cfg)) if not a.attach else None
    tokenizer = a.tokenizer or str(Path(model) / "tokenizer.json")
    raw, reports, order, t0 = [], [], [], time.time()
    import contextlib
    ctx = (serve(cfg, "server", model=model, python=str(ROOT / embedded.engine_python(cfg)),
                 log_path=work / "server.log", lock_dir=work / "locks") if not a.attach else
           contextlib.nullcontext((httpx.Client(timeout=30.0), a.attach.rstrip("/"), None)))
    with ctx as (http, base, argv):
        for rnd in range(a.rounds):
            for tool in (("bracket", "llama-benchy") if rnd % 2 == 0 else ("llama-benchy", "bracket")):
                order.append(tool)
                if tool == "bracket":
                    raw += bracket_block(cfg, http, base, rnd)
                else:
                    doc, bargv = benchy_block(a, base, home, tokenizer, work / f"benchy-{rnd}.json")
                    reports.append(doc)
    if ref is not None:
        ref.stop()
    summary = arena_stats.summarize(raw, cfg)
    (cell,) = summary["cells"]
    lb_bracket = cell["llama_benchy"]
    cells = [interop.benchy_cells(d)[0] for d in reports]
    pooled = {m: arena_benchy.metric([v for c in cells if c[m] for v in c[m]["values"]])
              for m in ("tg_throughput", "pp_throughput", "ttfr", "e2e_ttft", "tg_req_throughput")}
    sm = cell["summary"] or {}
    served = sorted(t for r in raw if not r.get("warmup") for t in [r.get("prompt_tokens")] if t)
    res = Path(a.out)
    export = interop.export_arena(summary, "server", model="bracket-model (tiny)")
    interop.write(export, res.with_suffix(".bracket.json"))
    interop.write(reports[0], res.with_suffix(".llama-benchy.json"))
    server_words = (f"bench/reference_server.py (ttft {a.ref_ttft * 1000:g} ms, {a.ref_rate:g} tok/s per request, "
                    f"one token per event)" if ref is not None else
                    "attached at " + a.attach if a.attach else "embedded vLLM 0.32 CPU engine, tiny model")
    truth = []
    if ref is not None:
        truth = [f"| truth (the reference's schedule) | {a.users * a.ref_rate:.1f} (at most: {a.users} x "
                 f"{a.ref_rate:g}, less the arrival spread) | same | {a.users * (a.depth + a.pp) / a.ref_ttft:.1f} "
                 f"(at most) | about 0 (the role chunk is written at once) | {a.ref_ttft * 1000:.1f} | per request: "
                 f"tg {a.ref_rate:g} |"]
    cmd = "  .venv/bin/python bench/" + " ".join(shlex.quote(x) for x in [Path(__file__).name] + sys.argv[1:])
    lines = [
        "# The arena cell, bracket and llama-benchy side by side", "",
        f"Made {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(t0))} by", "", cmd, "",
        f"Server: {server_words} "
        f"({' '.join(argv[-6:]) if argv else ''}); a shared 2-core machine, so timings are noisy.",
        f"Cell: depth {a.depth} + prompt {a.pp} tokens, {a.tg} tokens per user, {a.users} users, chat requests; "
        f"{a.rounds} rounds of one bracket block and one llama-benchy block ({a.runs} timed runs each, after a "
        f"warmup run), order {' / '.join(order)}.",
        "llama-benchy: `" + " ".join(shlex.quote(x) for x in bargv[1:]).replace(str(work), "$WORK") + "`", "",
        "| tool | tg (tok/s), mean ± SD | bracket window rate, median [95% CI] | pp (tok/s), mean ± SD | "
        "ttfr (ms), mean ± SD | e2e_ttft (ms) | runs |",
        "|---|---|---|---|---|---|---|",
        f"| bracket | {pm(lb_bracket['tg_throughput'])} | {sm.get('median', float('nan')):.1f} "
        f"[{sm.get('ci_low', float('nan')):.1f}, {sm.get('ci_high', float('nan')):.1f}] | "
        f"{pm(lb_bracket['pp_throughput'])} | {pm(lb_bracket['ttfr'])} | {pm(lb_bracket['e2e_ttft'])} | "
        f"{sm.get('n', 0)} |",
        f"| llama-benchy 0.4.0 | {pm(pooled['tg_throughput'])} | – | {pm(pooled['pp_throughput'])} | "
        f"{pm(pooled['ttfr'])} | {pm(pooled['e2e_ttft'])} | {len(pooled['tg_throughput']['values']) if pooled['tg_throughput'] else 0} |",
        *truth,
        "",
        f"Per-request tg (mean ± SD): bracket {pm(lb_bracket['tg_req_throughput'])}, llama-benchy "
        f"{pm(pooled['tg_req_throughput'])}.",
        "",
        "Per block (tg mean ± SD): " + "; ".join(
            [f"llama-benchy round {i + 1}: {pm(c['tg_throughput'])}" for i, c in enumerate(cells)]
            + [f"bracket block {b}: {pm(arena_benchy.metric([r['llama_benchy_tg'] for r in cell['runs'] if r['block'] == b and r['valid']]))}"
               for b in sorted({r['block'] for r in cell['runs']})]),
        "",
        f"Prompt tokens per request as the server counted them (bracket): median {int(np.median(served)) if served else 'n/a'}, "
        f"range {min(served) if served else '-'}-{max(served) if served else '-'} (asked {a.depth + a.pp}).",
        "",
        f"llama-benchy kept {sum(len(c['tg_throughput']['values']) if c['tg_throughput'] else 0 for c in cells)} of "
        f"{a.runs * len(cells)} runs' tg and {sum(len(c['tg_req_throughput']['values']) if c['tg_req_throughput'] else 0 for c in cells)} "
        f"of {a.runs * a.users * len(cells)} requests' per-request tg (it drops a request whose tokens all carry one "
        f"timestamp, and a run whose window is zero).",
        "",
        "Why the two tools can differ on the same cell (the definitions are the same here: without speculative "
        "decoding each first event carries one token, so llama-benchy's tg and bracket's window rate coincide "
        "run by run): (1) the clocks: llama-benchy stamps a chunk when its single asyncio loop reads it "
        "(`iter_any`), so when the client falls behind, several events share one timestamp, requests lose their "
        "tg and runs their window, and the kept runs lean fast; bracket stamps each event as its thread parses it; "
        "(2) the prompts: llama-benchy cuts its own tokenizer's tokens and shrinks the depth by the template's "
        "tokens measured at warmup, bracket cuts words to the server's /tokenize counts (asked and served are "
        "printed above); (3) the summary: llama-benchy's mean ± SD over its kept runs, bracket's median with a "
        "bootstrap CI over all valid runs; (4) the time: blocks run one after the other on a shared 2-core "
        "machine, so drift between blocks (see the per-block values) is as large as any difference between tools.",
        "",
        f"bracket's cell exported as a llama-benchy report: `{res.with_suffix('.bracket.json').name}`; "
        f"llama-benchy's first report: `{res.with_suffix('.llama-benchy.json').name}`.",
    ]
    res.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(lines).replace(str(ROOT) + "/", "")
    res.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
