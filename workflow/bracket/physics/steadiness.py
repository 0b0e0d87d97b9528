"""How steady the machine itself is: its memory copy rate over several seconds, with no server running.

A host without a GPU serves from its caches and main memory, which it may share with other tenants
(a cloud VM) or other work (a laptop). On the 2-core VM this project was built on, fixed work with
no server at all was steady while it stayed in the caches (spread 2-6 % within twelve units) and
moved in steps of up to 40 % within seconds once it reached memory (studies/quiet_engine/results/cpu_steadiness.md),
the shape, and about the size, of the embedded engine's own spread. The probe copies a buffer back
to back for a few seconds, one thread, and reports the rate in consecutive windows; the spread
between windows says how much a server's runs and blocks can differ on this machine for the
machine's sake alone. It is measured once, before the blocks (rule `ceiling`), because a probe
beside a running server would compete with it, and probes just before and after each block did not
predict the block's speed there (the steps come and go within a block).
"""

from __future__ import annotations

import statistics
import time

from bracket.physics.bandwidth import CPU_PROBE_BYTES

MIN_SECONDS = 0.2


def probe(seconds: float = 10.0, size_bytes: int = CPU_PROBE_BYTES, window_s: float = 0.5) -> dict:
    """Back-to-back numpy copies of `size_bytes` for `seconds`; the copy rate per `window_s` window.

    Rate of a window = 2 x bytes copied in it / its duration (read + write, as bracket.physics.bandwidth's
    probes count). spread = (fastest window - slowest window) / median window. The default buffer is the
    bandwidth probe's (CPU_PROBE_BYTES, 256 MiB), beyond the last-level cache of the machines bracket serves
    (a 32 MiB one read 38-44 GB/s where the 256 MiB probe read 28 GB/s: partly cache), so the windows' rates
    and the ceiling's bandwidth are one measurement: with 128 MiB they read 14.6-16.3 GB/s beside a probe of
    26.5 on one machine (the copy's store path changes with its size: bandwidth.CPU_PROBE_BYTES).
    """
    import numpy as np

    if seconds < MIN_SECONDS or window_s <= 0 or window_s * 2 > seconds or size_bytes < 2**20:
        raise ValueError(
            f"the steadiness probe needs at least two windows of at least {MIN_SECONDS} s in all "
            f"and a buffer of at least 1 MiB; got {seconds} s, windows of {window_s} s, "
            f"{size_bytes} bytes."
        )
    src = np.ones(size_bytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # fault the pages in before timing
    windows: list[float] = []
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        w0, copies = time.perf_counter(), 0
        while time.perf_counter() - w0 < window_s:
            np.copyto(dst, src)
            copies += 1
        windows.append(2 * src.nbytes * copies / (time.perf_counter() - w0) / 1e9)
    return summary(windows, seconds=seconds, window_s=window_s, nbytes=src.nbytes)


def summary(windows: list[float], *, seconds: float, window_s: float, nbytes: int) -> dict:
    """The probe's record from its windows' rates (GB/s)."""
    med = statistics.median(windows)
    return {
        "windows_gbps": [round(w, 3) for w in windows],
        "median_gbps": med,
        "low_gbps": min(windows),
        "high_gbps": max(windows),
        "spread": (max(windows) - min(windows)) / med,
        "seconds": seconds,
        "window_s": window_s,
        "method": f"numpy.copyto of {nbytes / 2**20:.0f} MiB back to back for {seconds:g} s, one thread, "
        f"rate per {window_s:g} s window (2 x bytes copied: read + write); no server running",
    }
