"""Harness accuracy on live servers: bracket and its peers beside the engine's own per-request timings.

bench/harness_accuracy.py judges the tools against a reference server whose schedule is known.
Here the truth is the engine's: each tool sends its own requests, one at a time, to a real server,
and every request the tool reports is paired with the server's account of the same request.

    llama-server   its log, per request: `prompt eval time = P ms` and `eval time = T ms / N tokens`
                   (the `timings` of the final event: prompt_ms, predicted_ms, predicted_n)
    vLLM           the /metrics request histograms, read every POLL_S while the tool runs: each
                   time vllm:e2e_request_latency_seconds_count grows by one, the growth of
                   request_decode_time (first -> last token), e2e_request_latency (arrival -> finish)
                   and request_generation_tokens is that request's own (requests finish one at a time;
                   a poll that sees two is left unpaired). vLLM puts the same numbers on the response
                   with --enable-per-request-metrics, but only the tool reads the response.

Two definitions are compared, each with its own server truth:

    tg rate      (n - 1) / (t_last_token - t_first_token)    server: (N - 1) / T   (vLLM: decode time)
    decode rate  n / request wall time                        server: N / (P + T)   (vLLM: e2e latency)

The tool's ratio to the server's own timing of the same request cannot see a tool whose request makes
the server work harder: it is 1 whatever the server did. A third column compares the work itself:

    server tg of a tool's requests / server tg of the plainest tool's requests (same server)
    ratio = exp(mean_r (mean ln a_r - mean ln b_r)), 95 % CI from t on the R rounds (with --rounds R >= 2),
            else exp(mean ln a - mean ln b), 95 % CI from Welch's t on the logs (requests as replicates)

The plainest tool is llama-benchy where it ran, else the bare client (bracket's client sending the
engine adapter's plain_body: model, prompt, max_tokens, temperature 0, stream with usage, ignore_eos).
With --rounds R every tool sends --repeats requests in each of R rounds, in a shuffled order per round,
and the ratio is paired by round (a t interval on the R rounds): drift between rounds cancels. In one
round the tools run one after the other, so a server that drifts in between moves this ratio too; and each
tool sends its own prompts, so on a speculating server (acceptance depends on the prompt) the column
mixes the prompt's effect with the request's: it answers the question on the servers without speculation.

Servers: llama-server CPU (the cached build, the embedded model as GGUF) with ngram-simple and
with the model as its own draft, and the vLLM CPU engine with ngram. A peer that is not installed,
or fails, gets a row saying why.

    .venv/bin/python bench/harness_live.py                      # all servers, ~15 min on 2 cores
    .venv/bin/python bench/harness_live.py --servers llamacpp_ngram --tools bracket,llama-benchy --repeats 2
    .venv/bin/python bench/harness_live.py --from-csv bench/results/harness_live.csv   # the table again, from a run's csv
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "workflow"))

import harness_accuracy  # noqa: E402
from bracket import embedded, engines  # noqa: E402
from bracket.engines import launch  # noqa: E402
from bracket.experiment import config  # noqa: E402
from live_tools import (  # noqa: E402
    LAST_OUTPUT,
    POLL_S,
    TOOLS,
    LlamaLog,
    VllmMetrics,
    _why,
    book_text,
    run_bracket,
    stream_shape,
    tokenizer_dir,
)

LLAMACPP = embedded.llamacpp_build_dir(ROOT)
ENGINE = Path(os.environ.get("BRACKET_TEST_ENGINE", ROOT / embedded.ENGINE_VENV))
MODEL = Path(os.environ.get("BRACKET_TEST_MODEL", ROOT / "resources/models/tiny-qwen3-s1-l4-h256-v4096-t300"))
PEERS_DIR = harness_accuracy.PEERS_DIR  # bench/.venv-peers, or BRACKET_PEERS_DIR
# Where the servers come from; main()'s options change them (the H200 run serves its own CUDA build and GGUF).
SETUP = {
    "llama_server": LLAMACPP / "bin/llama-server",
    "gguf": None,
    "tokenizer": MODEL / "tokenizer.json",
    "server_args": ["--ctx-size", "2048", "--threads", "2", "--slots"],
    "draft_args": [],
    "startup_timeout_s": 180,
}
SERVERS = {
    "llamacpp_plain": ("llamacpp", None, "llama-server, no speculation"),
    "llamacpp_ngram": (
        "llamacpp",
        {"method": "ngram", "draft_tokens": 4, "prompt_lookup_max": 3},
        "llama-server, ngram-simple, 4 tokens",
    ),
    "llamacpp_draft": (
        "llamacpp",
        {"method": "draft_model", "draft_tokens": 4, "model": "GGUF"},
        "llama-server, the model as its own draft, 4 tokens",
    ),
    "vllm_ngram": ("vllm", {"method": "ngram", "draft_tokens": 4}, "vLLM 0.32 CPU, ngram, 4 tokens"),
    "vllm_plain": ("vllm", None, "vLLM 0.32 CPU, no speculation"),
}
# The plainest tools, in order of preference: the column "server tg / plain" divides by the first that ran.
PLAIN_TOOLS = ("llama-benchy", "bare client")
DEFINITIONS = {
    "bare client": "as bracket (its client), with the engine adapter's plain_body instead of bracket's request_body",
    "bracket": "decode = usage tokens / (request sent -> [DONE]); tg = (n - 1) / first -> last token event",
    "llama-benchy": "tg = (n - 1) / (t_last - t_first), n from token_ids (vLLM), else usage",
    "aiperf": "e2e_output_token_throughput = OSL / latency; per_user = (OSL - 1) / (latency - TTFT); OSL from usage",
    "guidellm": "output_tokens_per_second = tokens / latency; 1 / inter_token_latency = (n - 1) / (latency - TTFT)",
}


# ---- one server -----------------------------------------------------------------------------------
def gguf(work: Path) -> Path:
    """The embedded model as GGUF, converted as the workflow's embedded_gguf rule does."""
    out = work / "embedded.gguf"
    if SETUP["gguf"]:
        return Path(SETUP["gguf"])
    if not out.exists():
        source = json.loads((LLAMACPP / "build.json").read_text())["source_dir"]
        subprocess.run(
            [
                str(ENGINE / "bin/python"),
                str(ROOT / "workflow/bracket/embedded/to_gguf.py"),
                source,
                str(MODEL),
                str(out),
            ],
            check=True,
            capture_output=True,
            timeout=600,
        )
    return out


CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def serve(name: str, work: Path, port: int):
    kind, spec, _ = SERVERS[name]
    if kind == "llamacpp":
        model = str(gguf(work))
        spec = {**spec, "model": model} if spec and spec.get("model") == "GGUF" else spec
        eng = {
            "kind": "llamacpp",
            "embedded": False,
            "model": "unused",
            "port": port,
            "executable": str(SETUP["llama_server"]),
            "startup_timeout_s": SETUP["startup_timeout_s"],
            "args": list(SETUP["server_args"]) + (list(SETUP["draft_args"]) if spec and spec.get("model") else []),
        }
    else:
        model = str(MODEL)
        # The tiny model's tokenizer has no chat template and llama-benchy only speaks chat: ChatML, as
        # llama-server falls back to.
        template = work / "chatml.jinja"
        template.write_text(CHATML)
        eng = {
            "kind": "vllm",
            "embedded": True,
            "port": port,
            "per_request_metrics": True,
            "startup_timeout_s": 900,
            "args": ["--chat-template", str(template)],
        }
    arms = {"spec": {"speculative": spec}} if spec else {"spec": {}}
    cfg = config.validate({"engine": eng, "arms": arms, "request": {"max_tokens": 128}})
    adapter = engines.get(kind)
    arm = cfg.arms["spec"]
    python = str(ENGINE / "bin/python")
    argv = launch.server_argv(cfg, adapter, arm, model, python, name="unused")
    log = work / f"{name}.log"
    server = launch.make_server(
        cfg,
        adapter,
        argv=argv,
        env=launch.launch_env(cfg, adapter, arm),
        log_path=log,
        base_url=launch.base_url(cfg),
        secret_names=[],
    )
    return cfg, adapter, arm, argv, server, log


def round_orders(tools: list[str], rounds: int, seed: int) -> list[list[str]]:
    """The tools' order in each round: as given in a single round, else shuffled per round (seeded), so that
    no tool always follows another and a server that drifts during the run falls on every tool alike."""
    if rounds <= 1:
        return [list(tools)]
    rng = random.Random(seed)
    return [rng.sample(tools, len(tools)) for _ in range(rounds)]


def measure_tool(ctx, truth, name: str, tool: str, n: int, repeats: int, rnd: int) -> list[dict]:
    """One tool's `repeats` requests on the running server, each paired with the server's account of it."""
    fn, venv = TOOLS[tool]
    if venv and not (PEERS_DIR / venv / "bin/python").exists():
        return [{"server": name, "tool": tool, "note": f"not installed: {PEERS_DIR / venv} is missing"}]
    mark = truth.start()
    try:
        values = fn(ctx, n, repeats)
        err = None
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        values, err = [], str(exc)
    accounts = truth.since(mark)
    if err:
        return [{"server": name, "tool": tool, "note": err[:300]}]
    if len(values) != repeats:  # a tool that leaves out a failed request cannot be paired by order
        return [
            {
                "server": name,
                "tool": tool,
                "note": f"{len(values)} of {repeats} requests reported "
                f"({len(accounts)} served): {_why(LAST_OUTPUT[0])}",
            }
        ]
    if len(accounts) < len(values):
        return [
            {
                "server": name,
                "tool": tool,
                "note": f"{len(values)} requests reported, {len(accounts)} in the server's account",
            }
        ]
    rows = []
    # Anything the tool sent first (a warm-up) is earlier in the account: pair from the end.
    for i, (v, t) in enumerate(zip(values, accounts[len(accounts) - len(values) :])):
        ok = t is not None and t["first_last_s"] > 0 and t["e2e_s"] > 0
        row = {
            "server": name,
            "tool": tool,
            "round": rnd,
            "request": i,
            "server_n": t and t["n"],
            "tool_n": v.get("n"),
            "server_tg": (t["n"] - 1) / t["first_last_s"] if ok else None,
            "server_decode": t["n"] / t["e2e_s"] if ok else None,
            "tool_tg": v.get("tg"),
            "tool_decode": v.get("decode"),
        }
        if t is not None and not ok:  # a torn read of the histograms: not attributable
            row["server_n"] = None
        rows.append(row)
    return rows


def measure_server(
    name: str, tools: list[str], n: int, repeats: int, work: Path, port: int, rounds: int = 1, seed: int = 0
) -> tuple[list, str]:
    """Every tool's requests on one fresh server: `rounds` rounds of `repeats` requests per tool (one round:
    all of a tool's requests, tool after tool). A tool that fails in a round is left out of later rounds."""
    cfg, adapter, arm, argv, server, log = serve(name, work, port)
    rows = []
    with server:
        server.wait_ready(cfg.engine.startup_timeout_s)
        base = launch.base_url(cfg)
        ctx = {
            "adapter": adapter,
            "arm": arm,
            "base": base,
            "work": work,
            "book": book_text(),
            "tokenizer": tokenizer_dir(work, SETUP["tokenizer"]),
        }
        truth = LlamaLog(log) if SERVERS[name][0] == "llamacpp" else VllmMetrics(base)
        ctx["gap_s"] = 0 if SERVERS[name][0] == "llamacpp" else 3 * POLL_S
        run_bracket(ctx, 16, 1)  # warm the server up
        shape = stream_shape(base, n, "[shape] " + ctx["book"][:200])
        rows.append(
            {
                "server": name,
                "tool": "stream shape (one raw request)",
                "note": (
                    f"{shape['events']} events for {n} tokens; first event "
                    f"{shape['first_event_tokens'] if shape['token_ids'] else '(no token_ids)'} token(s); "
                    f"{shape['within_1ms']:.0%} of events within 1 ms of the one before"
                ),
            }
        )
        failed: set[str] = set()
        for rnd, order in enumerate(round_orders(tools, rounds, seed)):
            for tool in order:
                if tool in failed:
                    continue
                got = measure_tool(ctx, truth, name, tool, n, repeats, rnd)
                if got and got[0].get("note"):
                    failed.add(tool)
                rows += got
                print(
                    f"{name} round {rnd + 1}/{max(rounds, 1)} {tool}: "
                    f"{got[0]['note'][:120] if got[0].get('note') else f'{len(got)} requests'}",
                    flush=True,
                )
    return rows, " ".join(shlex.quote(a) for a in argv)


# ---- the report -----------------------------------------------------------------------------------
def ratios(rows, key):
    return [r[f"tool_{key}"] / r[f"server_{key}"] for r in rows if r.get(f"tool_{key}") and r.get(f"server_{key}")]


def server_rates(rows, server, tool) -> list[float]:
    return [
        float(r["server_tg"])
        for r in rows
        if r["server"] == server and r["tool"] == tool and r.get("server_tg") and not r.get("note")
    ]


def plain_tool(rows, server) -> str | None:
    """The plainest tool whose requests the server timed on this server (PLAIN_TOOLS order)."""
    return next((t for t in PLAIN_TOOLS if len(server_rates(rows, server, t)) >= 2), None)


def vs_plain(a: list[float], b: list[float], confidence: float = 0.95) -> tuple[float, float, float] | None:
    """exp(mean ln a - mean ln b) with Welch's t interval on the logs; None with fewer than two of each."""
    from scipy import stats as st

    if len(a) < 2 or len(b) < 2:
        return None
    la, lb = [math.log(x) for x in a], [math.log(x) for x in b]
    va, vb = statistics.variance(la) / len(la), statistics.variance(lb) / len(lb)
    d = statistics.fmean(la) - statistics.fmean(lb)
    se = math.sqrt(va + vb)
    if se == 0:
        return math.exp(d), math.exp(d), math.exp(d)
    df = (va + vb) ** 2 / (va**2 / (len(la) - 1) + vb**2 / (len(lb) - 1))
    q = float(st.t.ppf((1 + confidence) / 2, df))
    return math.exp(d), math.exp(d - q * se), math.exp(d + q * se)


def by_round(rows, server, tool) -> dict[int, list[float]]:
    """The server-timed tg rates of a tool's requests, by round (rows from runs before rounds: none)."""
    out: dict[int, list[float]] = {}
    for r in rows:
        if (
            r["server"] == server
            and r["tool"] == tool
            and r.get("server_tg")
            and not r.get("note")
            and r.get("round") is not None
        ):
            out.setdefault(int(r["round"]), []).append(float(r["server_tg"]))
    return out


def vs_plain_paired(
    a: dict[int, list[float]], b: dict[int, list[float]], confidence: float = 0.95
) -> tuple[float, float, float, int] | None:
    """exp(mean over rounds of (mean ln a_r - mean ln b_r)) with a t interval on the rounds (R - 1 df), and R.

    The rounds are the replicates: both tools ran in each, close in time, so a server (or machine) that
    drifts from round to round moves both and cancels in the round's difference. None under two rounds."""
    from scipy import stats as st

    common = sorted(set(a) & set(b))
    if len(common) < 2:
        return None
    d = [statistics.fmean(math.log(x) for x in a[r]) - statistics.fmean(math.log(x) for x in b[r]) for r in common]
    m, se = statistics.fmean(d), statistics.stdev(d) / math.sqrt(len(d))
    q = float(st.t.ppf((1 + confidence) / 2, len(d) - 1))
    return math.exp(m), math.exp(m - q * se), math.exp(m + q * se), len(d)


def plain_cell(rows, server, tool) -> str:
    """ "0.795 (0.77-0.82)": the server-timed rate of the tool's requests over the plainest tool's, paired by
    round where the run had rounds ("..., 6 rounds"), else Welch's interval on the requests."""
    plain = plain_tool(rows, server)
    if plain is None:
        return "no plain tool ran"
    if tool == plain:
        return "1 (the plain tool)"
    p = vs_plain_paired(by_round(rows, server, tool), by_round(rows, server, plain))
    if p:
        return f"{p[0]:.3f} ({p[1]:.3f}-{p[2]:.3f}, {p[3]} rounds)"
    r = vs_plain(server_rates(rows, server, tool), server_rates(rows, server, plain))
    return f"{r[0]:.3f} ({r[1]:.3f}-{r[2]:.3f})" if r else "–"


def fmt(vals) -> str:
    if not vals:
        return "–"
    return f"{statistics.median(vals):.4f} ({min(vals):.3f}-{max(vals):.3f}, {len(vals)})"


def render(rows, argvs, made: str) -> str:
    L = [
        made,
        "",
        "Each cell: the tool's rate / the server's own rate for the same request, median (min-max, requests). "
        "tg: (n - 1) / first -> last token, server (N - 1) / T (llama-server's predicted_ms; vLLM's "
        "request_decode_time). decode: n / request wall time, server N / (P + T) (llama-server's prompt_ms + "
        "predicted_ms; vLLM's e2e_request_latency, arrival to finish). A perfect client reads 1 on tg and "
        "slightly under 1 on decode (its wall time adds HTTP and the server's tokenization). "
        "server tg: the server's own tg rate of the tool's requests, tok/s, median. server tg / plain: that rate "
        "over the plainest tool's on the same server (llama-benchy, else the bare client), with its 95% CI: in a run "
        "of rounds (every tool once per round, in a shuffled order), exp(mean over rounds of the difference of "
        "the tools' mean ln rates), t on the rounds, so drift between rounds cancels; in a run of one round, "
        "exp(mean ln a - mean ln b), Welch's t on the requests. Below 1, the tool's requests made the server "
        "slower. Each "
        "tool sends its own prompts: on a server that speculates, acceptance and so the server's rate depend on "
        "the prompt, and the column mixes the prompt's effect with the request's; read it on the servers without "
        "speculation.",
        "",
        "| server | tool | tg / server | decode / server | tool's n = server's N | no tg value | server tg | "
        "server tg / plain |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in dict.fromkeys(r["server"] for r in rows):
        for tool in dict.fromkeys(r["tool"] for r in rows if r["server"] == name):
            rs = [r for r in rows if r["server"] == name and r["tool"] == tool]
            if rs[0].get("note"):
                L.append(f"| {SERVERS[name][2]} | {tool} | {rs[0]['note']} | | | | | |")
                continue
            paired = [r for r in rs if r["server_n"] is not None and r["tool_n"] is not None]
            same, has_n = sum(1 for r in paired if r["tool_n"] == r["server_n"]), len(paired)
            L.append(
                f"| {SERVERS[name][2]} | {tool} | {fmt(ratios(rs, 'tg'))} | {fmt(ratios(rs, 'decode'))} | "
                f"{f'{same}/{has_n}' if has_n else '–'} | "
                f"{sum(1 for r in rs if r['server_n'] is not None and r['tool_tg'] is None)} | "
                f"{_median(server_rates(rows, name, tool))} | {plain_cell(rows, name, tool)} |"
            )
    L += ["", "Definitions:", ""] + [f"- {t}: {d}" for t, d in DEFINITIONS.items()]
    L += ["", "Server commands:", ""] + [f"- {name}: `{a}`" for name, a in argvs.items()]
    return "\n".join(L)


def _median(vals) -> str:
    return f"{statistics.median(vals):.1f}" if vals else "–"


def made_line(args, started, elapsed, load) -> str:
    cmd = " ".join([".venv/bin/python", "bench/harness_live.py"] + [shlex.quote(a) for a in sys.argv[1:]])
    return (
        f"Made by `{cmd}` on {started} ({elapsed / 60:.1f} min; load average {load[0]} before, {load[1]} after; "
        f"{args.rounds} round(s) of {args.repeats} requests of {args.tokens} tokens per tool and server, one at a "
        f"time, tools in a shuffled order per round (seed {args.seed}), on {args.machine}: "
        "one run's numbers)."
    )


def replace_table(out: Path, table: str) -> None:
    text = out.read_text() if out.exists() else ""
    begin, end = "<!-- harness_live.py: begin -->", "<!-- harness_live.py: end -->"
    if begin in text:
        text = text[: text.index(begin) + len(begin)] + "\n" + table + "\n" + text[text.index(end) :]
    else:
        text += f"\n## Side by side on live servers\n\n{begin}\n{table}\n{end}\n"
    out.write_text(text)


NUMERIC = ("round", "request", "server_n", "tool_n", "server_tg", "tool_tg", "server_decode", "tool_decode")


def read_csv(path: Path) -> tuple[list[dict], dict]:
    """A run's rows and server commands back from its csv (what `write` wrote)."""
    rows, argvs = [], {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["tool"] == "server command":
                argvs[r["server"]] = r["note"]
                continue
            for k in NUMERIC:
                r[k] = (
                    (int(float(r[k])) if k in ("round", "request", "server_n", "tool_n") else float(r[k]))
                    if r.get(k)
                    else None
                )
            r["note"] = r.get("note") or None
            rows.append(r)
    return rows, argvs


def rerender(csv_path: Path, out: Path) -> str:
    """The table again from a run's csv, with today's columns; the run's own "Made by" line is kept."""
    rows, argvs = read_csv(csv_path)
    text = out.read_text() if out.exists() else ""
    begin = "<!-- harness_live.py: begin -->"
    old = text[text.index(begin) + len(begin) :].strip().splitlines()[0] if begin in text else ""
    cmd = " ".join([".venv/bin/python", "bench/harness_live.py"] + [shlex.quote(a) for a in sys.argv[1:]])
    made = (
        f"Re-rendered by `{cmd}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} from the run's csv "
        f"({csv_path.name}), nothing measured again. The run: " + (old.split("The run: ", 1)[-1] or "?")
    )
    table = render(rows, argvs, made)
    replace_table(out, table)
    return table


def write(rows, argvs, args, started, t0, load0) -> str:
    load1 = " ".join(f"{x:.1f}" for x in os.getloadavg())
    fields = [
        "server",
        "tool",
        "round",
        "request",
        "server_n",
        "tool_n",
        "server_tg",
        "tool_tg",
        "server_decode",
        "tool_decode",
        "note",
    ]
    with open(args.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
        w.writerows({"server": name, "tool": "server command", "note": a} for name, a in argvs.items())
    table = render(rows, argvs, made_line(args, started, time.monotonic() - t0, (load0, load1)))
    replace_table(Path(args.out), table)
    return table


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", default="llamacpp_ngram,llamacpp_draft,vllm_ngram", help=f"of {', '.join(SERVERS)}")
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=6, help="requests per tool in each round")
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="rounds of every tool in a shuffled order: the server tg / plain column pairs by round",
    )
    ap.add_argument("--seed", type=int, default=0, help="the rounds' shuffle")
    ap.add_argument("--port", type=int, default=8071)
    ap.add_argument("--out", default=str(HERE / "results" / "harness_accuracy_live.md"))
    ap.add_argument("--csv", default=str(HERE / "results" / "harness_live.csv"))
    ap.add_argument("--llama-server", help="llama-server to serve (default: the cached CPU build)")
    ap.add_argument("--gguf", help="GGUF to serve (default: the embedded model, converted)")
    ap.add_argument("--tokenizer", help="tokenizer.json for the peers' prompts (default: the embedded model's)")
    ap.add_argument("--server-args", help="llama-server's own arguments, one string (default: CPU, 2 threads)")
    ap.add_argument("--draft-args", default="", help="added for the draft-model server (e.g. --spec-draft-ngl 999)")
    ap.add_argument("--startup-timeout", type=float, default=180)
    ap.add_argument("--machine", default="the shared 2-core CPU machine", help="where it ran, for the report")
    ap.add_argument("--from-csv", help="measure nothing: render --out's table again from this run's csv")
    args = ap.parse_args(argv)
    if args.from_csv:
        print(rerender(Path(args.from_csv), Path(args.out)))
        return
    SETUP.update(
        {
            key: v
            for key, v in (("llama_server", args.llama_server), ("gguf", args.gguf), ("tokenizer", args.tokenizer))
            if v
        }
    )
    if args.server_args:
        SETUP["server_args"] = shlex.split(args.server_args)
    SETUP["draft_args"], SETUP["startup_timeout_s"] = shlex.split(args.draft_args), args.startup_timeout
    os.chdir(ROOT)  # embedded paths (resources/...) are relative to the checkout
    started, t0 = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), time.monotonic()
    load0 = " ".join(f"{x:.1f}" for x in os.getloadavg())
    work = Path(tempfile.mkdtemp(prefix="bracket-live-"))
    rows, argvs = [], {}
    for name in args.servers.split(","):
        r, a = measure_server(
            name, args.tools.split(","), args.tokens, args.repeats, work, args.port, args.rounds, args.seed
        )
        rows += r
        argvs[name] = a
        table = write(rows, argvs, args, started, t0, load0)  # after each server: a run cut short keeps what it made
    print(table)


if __name__ == "__main__":
    main()
