"""Measure memory bandwidth here and compare it with the datasheet figure, with GPU telemetry.

    python bench/bandwidth_probe.py [--size-gib 4] [--repeats 30] [--json OUT]

Runs the CUDA device-to-device probe when torch sees a GPU (else the CPU copy probe), samples
NVML telemetry while it runs, and prints probe vs table. The numbers belong in the issue note
that validates bracket.physics.bandwidth and bracket.measure.telemetry on real hardware.
"""

from __future__ import annotations

import argparse
import json
import sys

from bracket.measure.telemetry import Telemetry, summarize
from bracket.physics import bandwidth


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gib", type=float, default=4.0, help="bytes per copy, GiB (GPU); CPU uses 256 MiB")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--interval", type=float, default=0.1, help="telemetry sampling interval, s")
    ap.add_argument("--json", help="write probe, table entry and telemetry here")
    args = ap.parse_args(argv)

    with Telemetry(interval_s=args.interval) as tel:
        result = (
            bandwidth.probe_cuda(size_bytes=int(args.size_gib * 2**30), repeats=args.repeats) or bandwidth.probe_cpu()
        )
    samples = tel.samples
    name = result["device"] if result["device"] != "cpu" else (bandwidth.detect_device_name() or "cpu")
    dev = bandwidth.lookup(name)
    print(f"device      {name}")
    print(f"method      {result['method']}")
    print(
        f"probe       {result['gbps']:.0f} GB/s copy (best {result['best_gbps']:.0f})"
        + (f", {result['read_gbps']:.0f} GB/s read" if "read_gbps" in result else "")
    )
    if dev:
        print(f"table       {dev.gbps:.0f} GB/s  ({dev.citation})")
        print(
            f"ratio       copy {result['gbps'] / dev.gbps:.1%}"
            + (f", read {result['read_gbps'] / dev.gbps:.1%}" if "read_gbps" in result else "")
        )
    else:
        print("table       no entry for this device")
    summary = summarize(samples)
    if summary:
        print(f"telemetry   {summary['n']} samples over {summary['duration_s']:.1f} s")
        for field in ("sm_clock_mhz", "mem_clock_mhz", "temp_c", "power_w", "mem_used_bytes", "util_gpu_pct"):
            s = summary[field]
            if s:
                print(f"  {field:<16} median {s['median']:.6g}  min {s['min']:.6g}  max {s['max']:.6g}")
        print(f"  throttle reasons seen: {', '.join(summary['throttle_reasons_seen']) or 'none'}")
        print(f"  sample: {json.dumps(samples[len(samples) // 2])}")
    else:
        print(f"telemetry   skipped ({tel.skipped_reason})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "probe": result,
                    "table": dev.__dict__ if dev else None,
                    "telemetry_summary": summary,
                    "telemetry": samples,
                },
                fh,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
