"""Harness accuracy under bursty delivery: how each tool's number moves when events arrive B at a time.

On a contended CPU, llama-server's events reach the client in bursts (bench/results/
harness_accuracy_live.md). The reference server reproduces that with `burst=B`: tokens are made on
the same schedule, but events are held and released B at a time, in one write, when the last of
the group is due (bracket/engines/reference_server.py). The made schedule is unchanged, so every tool is
judged against the same truth as in harness_accuracy.md; what bursts change is only what the
client can see, and that is exact too (reference_server.truth):

    decode rate   n / wall: the last event leaves when it did without bursts: unmoved
    tg rate       (n - 1) / (first -> last event as delivered) = (n - 1) / ((E - B) k / rate): high

Writes the section between its markers in bench/results/harness_accuracy.md.

    .venv/bin/python bench/harness_bursts.py               # ~6 min
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bracket.engines.reference_server import ReferenceProcess, truth  # noqa: E402
from bracket.wire.client import stream_completion  # noqa: E402  # noqa: E402
from bracket.wire.transport import timed_client  # noqa: E402
from harness_accuracy import (  # noqa: E402
    TTFT,
    AIPerf,
    Cell,
    GuideLLM,
    LlamaBenchy,
    body,
    client_at,
    fmt_errs,
    measure_bracket,
    write_offline_assets,
)

BEGIN, END = "<!-- harness_bursts.py: begin -->", "<!-- harness_bursts.py: end -->"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--points",
        default="200:1:201,1000:4:1001,1000:4:1001:p",
        help="rate:k:n[:p], comma separated; p: the first event carries the prefill's one token",
    )
    ap.add_argument("--bursts", default="1,8")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--peers", default="llama-benchy,aiperf,guidellm")
    ap.add_argument("--nice", type=int, default=0, help="raise the priority by N (root), as harness_accuracy.py")
    ap.add_argument(
        "--before",
        default="",
        help="a git revision: bracket's client as committed there, measured beside this checkout's",
    )
    ap.add_argument("--out", default=str(HERE / "results" / "harness_accuracy.md"))
    args = ap.parse_args(argv)
    if args.nice:
        os.nice(-args.nice)  # root only, as harness_accuracy.py --nice: the server and peers inherit it
    before = client_at(args.before) if args.before else None
    old_label = f"bracket before ({args.before})"

    work = Path(tempfile.mkdtemp(prefix="bracket-bursts-"))
    wanted = args.peers.split(",")
    peers = (
        ([LlamaBenchy(work, token_ids=True), LlamaBenchy(work, token_ids=False)] if "llama-benchy" in wanted else [])
        + ([AIPerf(work)] if "aiperf" in wanted else [])
        + ([GuideLLM(work)] if "guidellm" in wanted else [])
    )
    ran = [p for p in peers if p.unavailable is None]
    if ran:
        assets = write_offline_assets(work, ran[0].python)
        for p in ran:
            p.prepare(*assets)
    started, t0 = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), time.monotonic()
    rows = []
    with ReferenceProcess(ttft=TTFT) as srv, timed_client() as http, httpx.Client() as plain:
        stream_completion(http, srv.url + "/v1/completions", body(8), timeout_s=30)
        if before is not None:
            before(plain, srv.url + "/v1/completions", body(8), timeout_s=30)  # an older client: httpx's
        for point in args.points.split(","):
            parts = point.split(":")
            rate, k, n = (int(x) for x in parts[:3])
            prefill = parts[3:] == ["p"]
            for b in (int(x) for x in args.bursts.split(",")):
                srv.configure(rate=rate, tokens_per_event=k, burst=b, prefill_token=prefill)
                t = truth(n, rate, k, TTFT, b, prefill)
                row = {
                    "rate": rate,
                    "k": k,
                    "n": n,
                    "burst": b,
                    "truth": t,
                    "first": "1" if prefill else str(k),
                    "bracket": measure_bracket(srv, http, n, args.repeats),
                    "peers": {},
                }
                if before is not None:
                    row["before"] = measure_bracket(srv, plain, n, args.repeats, client=before)
                for p in ran:
                    row["peers"][p.label] = p.run(srv, n, args.repeats)
                rows.append(row)
                print(f"rate {rate} k {k} B {b}: bracket tg {fmt_errs(row['bracket']['tg'])}", flush=True)
        srv.configure(burst=1, prefill_token=False)
    cmd = " ".join([".venv/bin/python", "bench/harness_bursts.py"] + [shlex.quote(a) for a in sys.argv[1:]])
    L = [
        "## Under bursty delivery",
        "",
        f"Made by `{cmd}` on {started} ({(time.monotonic() - t0) / 60:.1f} min, the shared 2-core machine, load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end; "
        f"{args.repeats} requests per tool and point).",
        "",
        "The reference server makes tokens on the same schedule but releases events B at a time, in one write, "
        "when the last of each group is due (`burst=B`; B = 1 is the table above). This is what a contended "
        "llama-server does to its stream (harness_accuracy_live.md). Errors are against what was made, as above. "
        "'expected' is the exact error of a client that reads every event the moment it is delivered: 0 for the "
        "decode rate (the last event is not moved), delivered tg / rate - 1 for the tg rate. 'first event': tokens "
        "in the first event; 1 is the real engines' shape (`prefill_token`: the prefill makes one token, every "
        "verify step after it k), k the shape of the table above.",
        "",
        "### Decode rate (n / wall): expected 0 at every B",
        "",
    ]
    dec = [p for p in ran if p.measures == "both"]
    head = ["rate", "k", "n", "first event", "B", "bracket"] + ([old_label] if before else []) + [p.label for p in dec]
    L += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [
            f"{r['rate']:,}",
            str(r["k"]),
            str(r["n"]),
            r["first"],
            str(r["burst"]),
            fmt_errs(r["bracket"]["decode"]),
        ] + ([fmt_errs(r["before"]["decode"])] if before else [])
        cells += [
            (r["peers"].get(p.label) or Cell(note="not run")).note or fmt_errs(r["peers"][p.label].decode_err)
            for p in dec
        ]
        L.append("| " + " | ".join(cells) + " |")
    head = (
        ["rate", "k", "n", "first event", "B", "expected", "bracket"]
        + ([old_label] if before else [])
        + [p.label for p in ran]
    )
    L += [
        "",
        "### tg rate ((n - 1) / first -> last): expected delivered tg / rate - 1",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for r in rows:
        t = r["truth"]
        cells = [
            f"{r['rate']:,}",
            str(r["k"]),
            str(r["n"]),
            r["first"],
            str(r["burst"]),
            f"{t.delivered_tg_tok_s / t.tg_tok_s - 1:+.2%}",
            fmt_errs(r["bracket"]["tg"]),
        ]
        cells += [fmt_errs(r["before"]["tg"])] if before else []
        cells += [
            (r["peers"].get(p.label) or Cell(note="not run")).note or fmt_errs(r["peers"][p.label].tg_err) for p in ran
        ]
        L.append("| " + " | ".join(cells) + " |")
    L += [
        "",
        f"TTFT as delivered (bracket, median ms; the made TTFT is {TTFT * 1e3:.0f} ms): "
        + "; ".join(
            f"rate {r['rate']} k {r['k']} B {r['burst']}: {statistics.median(r['bracket']['ttft_ms']) + TTFT * 1e3:.1f} "
            f"(expected {r['truth'].delivered_ttft_s * 1e3:.1f})"
            for r in rows
        )
        + ".",
    ]
    section = "\n".join(L)
    out = Path(args.out)
    text = out.read_text()
    if BEGIN in text:
        text = text[: text.index(BEGIN) + len(BEGIN)] + "\n" + section + "\n" + text[text.index(END) :]
    else:
        text = text.rstrip("\n") + f"\n\n{BEGIN}\n{section}\n{END}\n"
    out.write_text(text)
    print(section)


if __name__ == "__main__":
    main()
