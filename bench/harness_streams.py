"""The load driver's own cost: CPU time per token of bracket's client over many streams at about 1,000 tok/s.

harness_accuracy.py measures one stream; a load level runs many at once in one client process, every content event
timed by its read (bracket.measure.load, no coalescing of reads), so its cost per token is measured here, against
the reference server in batching mode (bracket.engines.reference_batching, its own process): N streams at a step of
N ms each give 1,000 tok/s in all (step = a + b N with a = N / 1000 s, b = 0), whatever N. Each row is one closed
loop level of the driver (bracket.measure.load.run_level): its client CPU (time.process_time over the level, every
thread of the driver) over the tokens it received, the send lag, and whether the level counted as valid. The
issue's target: within 10 us of CPU per token at 1,000 tok/s.

    .venv/bin/python bench/harness_streams.py                 # 8 and 16 streams, 3 levels each, ~2 min
    .venv/bin/python bench/harness_accuracy.py --streams      # the same, from the harness's own command
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "workflow"))

from bracket.engines.reference_server import MODEL, ReferenceProcess  # noqa: E402
from bracket.experiment import config, design  # noqa: E402
from bracket.experiment.load_workload import LoadSpec  # noqa: E402
from bracket.measure import load  # noqa: E402
from bracket.measure.context import BlockContext  # noqa: E402

TARGET_US = 10.0


def body(prompt: str, n: int) -> dict:
    return {
        "model": MODEL,
        "prompt": prompt,
        "max_tokens": n,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
    }


def one_level(streams: int, tokens: int, seconds: float, aggregate: float, every_event: bool) -> dict:
    """One closed-loop level of `streams` users at `aggregate` tok/s in all; the driver's summary."""
    step = streams / aggregate
    exp = config.validate({"engine": {"kind": "reference"}, "arms": {"a": {}}})
    ctx = BlockContext(exp, "harness_streams", design.Block(position=0, arm="a", round=0, seed=1), 1, "bench")
    spec = LoadSpec(
        name="streams",
        level_kind="users",
        levels=(float(streams),),
        warmup_s=1.0,
        steady_s=seconds,
        drain_s=30.0,
        output_tokens=(tokens, tokens),
    )
    with ReferenceProcess(ttft=0.0, step_base_s=step, step_per_stream_s=0.0) as srv:
        target = load.Target(srv.url + "/v1/completions", body, 60.0, every_event=every_event)
        prompts = [{"id": "p", "prompt": "the quick brown fox"}]
        return load.run_level(target, spec, ctx, float(streams), 0, prompts, lambda rec: None)


def render(rows: list[dict], args, started: str, elapsed: float, load_before, load_after) -> str:
    lines = [
        "# The load driver's client cost over many streams",
        "",
        f"Command: `{' '.join(['.venv/bin/python', 'bench/harness_streams.py', *sys.argv[1:]])}`",
        "",
        f"Run {started} on {platform.node()} ({os.cpu_count()} CPUs, Python {platform.python_version()}), "
        f"{elapsed:.0f} s; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after (other work on the "
        f"machine inflates CPU per token: the numbers are an upper bound for an idle one).",
        "",
        f"Reference server in batching mode, its own process: N streams, steps of N / {args.aggregate:g} s, one token "
        f"per stream per step ({args.aggregate:g} tok/s in all); {args.tokens} tokens per request; closed loop, "
        f"{args.seconds:g} s steady window after 1 s of warm-up; {args.repeats} levels per row. CPU per token is the "
        f"driver's process time over the level / the tokens it received (every event timed by its read).",
        "",
        "| streams | event times | levels | aggregate tok/s (median) | tokens per level | client CPU us/token: median "
        "(min-max) | of it user / system us | CPU per wall s | send lag p99 ms (max) | valid | within 10 us |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in args.streams:
        for every in (True, False):
            mine = [r for r in rows if r["level"] == n and r["every_event"] is every]
            us = [r["client_cpu_per_token_us"] for r in mine]
            agg = [r["tokens_received"] / r["wall_s"] for r in mine]
            lag = [r["send_lag_p99_s"] or 0.0 for r in mine]
            user = statistics.median(r["client_cpu_user_s"] / r["tokens_received"] * 1e6 for r in mine)
            system = statistics.median(r["client_cpu_system_s"] / r["tokens_received"] * 1e6 for r in mine)
            med = statistics.median(us)
            lines.append(
                f"| {n} | {'every event' if every else 'per read (coalesced)'} | {len(mine)} "
                f"| {statistics.median(agg):.0f} | {statistics.median(r['tokens_received'] for r in mine):.0f} "
                f"| {med:.1f} ({min(us):.1f}-{max(us):.1f}) | {user:.1f} / {system:.1f} "
                f"| {statistics.median(r['client_cpu_per_wall_s'] for r in mine):.3f} "
                f"| {statistics.median(lag) * 1000:.1f} ({max(lag) * 1000:.1f}) "
                f"| {sum(r['valid'] for r in mine)}/{len(mine)} | {'yes' if med <= TARGET_US else 'no'} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=lambda s: [int(x) for x in s.split(",")], default=[8, 16])
    ap.add_argument("--tokens", type=int, default=256, help="tokens per request (default 256)")
    ap.add_argument("--seconds", type=float, default=8.0, help="steady window per level (default 8)")
    ap.add_argument("--aggregate", type=float, default=1000.0, help="tok/s in all (default 1000)")
    ap.add_argument("--repeats", type=int, default=3, help="levels per stream count (default 3)")
    ap.add_argument("--out", default=str(HERE / "results" / "harness_streams.md"))
    args = ap.parse_args(argv)
    started, t0, before = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), time.monotonic(), os.getloadavg()
    rows = []
    for _ in range(args.repeats):
        for n in args.streams:
            for every in (True, False):
                r = one_level(n, args.tokens, args.seconds, args.aggregate, every)
                rows.append(r)
            print(load._line(r), flush=True)
    text = render(rows, args, started, time.monotonic() - t0, before, os.getloadavg())
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
