"""How much CPU a background build at the lowest priority takes from the tests beside it (tests/prebuild.py).

A fixed CPU-bound workload (two processes, as make test's two workers) is timed alone, then beside a stand-in
build (two busy processes, as ninja's two compilers) started the way tests/prebuild.py starts the real one: in a
new session at nice 19, first without and then with the session's own nice set to 19 (the kernel's autogroup:
where /proc/sys/kernel/sched_autogroup_enabled is 1, a nice value counts only inside its session).

    .venv/bin/python bench/background_share.py [--repeats 3]

Prints a Markdown table: median (min-max) wall time of the workload and its ratio to the time alone, measured
side by side in one run. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import prebuild  # noqa: E402

WORK = "s = 0\nfor i in range(12_000_000):\n    s += i * i\n"
HOG = "while True:\n    pass\n"


def workload() -> float:
    """Two CPU-bound processes at normal priority, in this session: seconds until both end."""
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", WORK]) for _ in range(2)]
    for p in procs:
        p.wait()
    return time.perf_counter() - t0


def beside(session_nice: bool) -> float:
    """The workload beside a two-process stand-in build in a new session at nice 19."""
    hog = subprocess.Popen(
        ["nice", "-n", "19", "bash", "-c", f"{sys.executable} -c '{HOG}' & {sys.executable} -c '{HOG}' & wait"],
        start_new_session=True,
    )
    if session_nice:
        prebuild.lowest_priority(hog.pid)
    time.sleep(0.5)
    try:
        return workload()
    finally:
        os.killpg(hog.pid, 9)
        hog.wait()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    autogroup = Path("/proc/sys/kernel/sched_autogroup_enabled")
    enabled = autogroup.read_text().strip() if autogroup.exists() else "absent"
    print(f"{os.cpu_count()} cores; sched_autogroup_enabled: {enabled}; load before {os.getloadavg()[0]:.2f}\n")
    rows = {"alone": [], "beside the build, nice 19": [], "beside the build, nice 19 and its session's nice 19": []}
    workload()  # warm-up
    for _ in range(a.repeats):  # interleaved, so drift spreads over every row
        rows["alone"].append(workload())
        rows["beside the build, nice 19"].append(beside(False))
        rows["beside the build, nice 19 and its session's nice 19"].append(beside(True))
    base = statistics.median(rows["alone"])
    print("| the workload (2 processes) | wall time | ratio to alone |")
    print("|---|---|---|")
    for name, v in rows.items():
        m = statistics.median(v)
        print(f"| {name} | {m:.2f} s ({min(v):.2f}-{max(v):.2f}) | {m / base:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
