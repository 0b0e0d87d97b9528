"""The draft sweep run again under another engine setting, against an earlier run: ratios, CIs, acceptance.

    .venv/bin/python studies/quiet_engine/quiet_sweep_compare.py NAME=results/EXP/stats.json ... [--out studies/quiet_engine/results/quiet_sweep.md]

One row per comparison (candidate arm against the reference, per workload): each run's ratio, its
Holm-adjusted verdict interval and that interval's width (high / low), and the verdict; then the
acceptance length per arm and workload, and each cell's median and spread. The first run named is
the one the others are compared with.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bracket.stats.contract import upgrade


def load(path: Path) -> dict:
    s = upgrade(json.loads(path.read_text()))  # typed, whatever its version (bracket.stats.results.Stats)
    return {
        "comp": {(c.candidate, c.workload): c for c in s.comparisons},
        "cells": {(c.arm, c.workload): c for c in s.cells},
        "al": {(x.arm, x.workload): x.acceptance_length for x in s.speculative},
        "level": next((c.ci_level for c in s.comparisons if c.ci_level), None),
    }


def table(runs: dict[str, dict]) -> list[str]:
    names = list(runs)
    first = runs[names[0]]
    out = [
        "| comparison | " + " | ".join(f"{n}: ratio [Holm CI], width" for n in names) + f" | width vs {names[0]} |",
        "|---|" + "---:|" * (len(names) + 1),
    ]
    for key in sorted(first["comp"]):
        cols, widths = [], []
        for n in names:
            c = runs[n]["comp"].get(key)
            if not c:
                cols.append("")
                continue
            w = c.ci_high / c.ci_low
            widths.append(w)
            cols.append(f"{c.ratio:.2f}x [{c.ci_low:.2f}-{c.ci_high:.2f}], {w:.2f} ({c.verdict})")
        rel = ", ".join(f"{w / widths[0]:.2f}x" for w in widths[1:]) if len(widths) > 1 else ""
        out.append(f"| {key[0]} / {key[1]} | " + " | ".join(cols) + f" | {rel} |")
    out += [
        "",
        "| arm / workload | "
        + " | ".join(f"{n}: acceptance length" for n in names)
        + " | "
        + " | ".join(f"{n}: median tok/s, spread" for n in names)
        + " |",
        "|---|" + "---:|" * (2 * len(names)),
    ]
    for key in sorted(first["cells"]):
        al = [runs[n]["al"].get(key) for n in names]
        cells = [runs[n]["cells"].get(key) for n in names]
        out.append(
            f"| {key[0]} / {key[1]} | "
            + " | ".join(f"{a:.2f}" if a else "" for a in al)
            + " | "
            + " | ".join(f"{c.median:.0f}, {c.spread:.1%}" if c else "" for c in cells)
            + " |"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="NAME=path/to/stats.json, the reference run first")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    runs = {}
    for spec in a.runs:
        name, sep, path = spec.partition("=")
        if not sep:
            raise SystemExit(f"{spec!r}: give each run as NAME=path/to/stats.json")
        runs[name] = load(Path(path))
    lines = table(runs)
    if a.out:
        a.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
