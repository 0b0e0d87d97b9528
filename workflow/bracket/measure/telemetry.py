"""GPU telemetry during a block: clocks, temperature, power and memory sampled with NVML.

Drift between blocks often has a physical cause that the decode rates alone cannot show: seed
003's full recipe ran 4% faster than the published figure because the GPU clock averaged
about 2,490 MHz where the publisher capped it at 2,000. Sampling the clocks beside every block
lets the report explain a drift instead of only measuring it.

    with Telemetry(interval_s=0.5) as tel:
        run_block()
    tel.samples        # list of dicts, or None when there is no GPU / NVML
    summarize(tel.samples)

Without NVML (no nvidia-ml-py, no driver, no GPU) ``start`` logs one line saying telemetry is
skipped and ``stop`` returns None. A field NVML cannot report on this device (memory on a
unified-memory GB10, power on some boards) is None in every sample, never guessed.
"""

from __future__ import annotations

import logging
import statistics
import threading
import time

log = logging.getLogger(__name__)

# NVML clocks-event (throttle) reason bits, from nvml.h (nvmlClocksEventReason*).
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
NUMERIC_FIELDS = (
    "sm_clock_mhz",
    "mem_clock_mhz",
    "graphics_clock_mhz",
    "temp_c",
    "power_w",
    "mem_used_bytes",
    "util_gpu_pct",
    "util_mem_pct",
)
_skip_logged = False


def throttle_names(mask: int | None) -> list[str] | None:
    """Names of the set bits of an NVML clocks-event reason mask."""
    if mask is None:
        return None
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]


def _query(fn, *args, scale=1.0):
    """fn(*args) scaled, or None when NVML says the device cannot report it."""
    try:
        value = fn(*args)
    except Exception:  # noqa: BLE001 - pynvml raises NVMLError_NotSupported and friends
        return None
    return value * scale if scale != 1.0 else value


def read_sample(nvml, handle, index: int = 0) -> dict:
    """One sample of device ``handle``: every field NVML can report now, None for the rest."""
    mem = _query(nvml.nvmlDeviceGetMemoryInfo, handle)
    util = _query(nvml.nvmlDeviceGetUtilizationRates, handle)
    reasons_fn = (
        getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    mask = _query(reasons_fn, handle)
    return {
        "t": time.time(),
        "gpu": index,
        "sm_clock_mhz": _query(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM),
        "mem_clock_mhz": _query(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_MEM),
        "graphics_clock_mhz": _query(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_GRAPHICS),
        "temp_c": _query(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU),
        "power_w": _query(nvml.nvmlDeviceGetPowerUsage, handle, scale=1e-3),
        "power_limit_w": _query(nvml.nvmlDeviceGetEnforcedPowerLimit, handle, scale=1e-3),
        "mem_used_bytes": getattr(mem, "used", None),
        "mem_total_bytes": getattr(mem, "total", None),
        "util_gpu_pct": getattr(util, "gpu", None),
        "util_mem_pct": getattr(util, "memory", None),
        "pstate": _query(nvml.nvmlDeviceGetPerformanceState, handle),
        "throttle_mask": mask,
        "throttle_reasons": throttle_names(mask),
    }


class Telemetry:
    """Samples one GPU every ``interval_s`` seconds on a background thread between start and stop."""

    def __init__(self, interval_s: float = 0.5, device_index: int = 0):
        if interval_s <= 0:
            raise ValueError(f"telemetry interval must be positive, got {interval_s} s.")
        self.interval_s = interval_s
        self.device_index = device_index
        self.samples: list[dict] | None = None
        self.device_name: str | None = None
        self.skipped_reason: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml = None

    def start(self) -> bool:
        """Begin sampling; False (and one log line) when NVML or the GPU is not available."""
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(self.device_index)
            name = pynvml.nvmlDeviceGetName(handle)
        except Exception as exc:  # noqa: BLE001 - ImportError, NVMLError_LibraryNotFound, no device
            self.skipped_reason = f"{type(exc).__name__}: {exc}".strip()
            _log_skip(self.skipped_reason)
            return False
        self._nvml = pynvml
        self.device_name = name.decode() if isinstance(name, bytes) else name
        self.samples = []
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(handle,), name="bracket-telemetry", daemon=True)
        self._thread.start()
        return True

    def _run(self, handle) -> None:
        while True:
            sample = read_sample(self._nvml, handle, self.device_index)
            sample["name"] = self.device_name
            self.samples.append(sample)
            if self._stop.wait(self.interval_s):
                return

    def stop(self) -> list[dict] | None:
        """Stop sampling and return the samples (None when telemetry was skipped)."""
        if self._thread is None:
            return None
        self._stop.set()
        self._thread.join(timeout=5 + self.interval_s)
        self._thread = None
        try:
            self._nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
        return self.samples

    def __enter__(self) -> Telemetry:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _log_skip(reason: str) -> None:
    global _skip_logged
    if not _skip_logged:
        log.warning("GPU telemetry skipped: NVML is not available here (%s)", reason)
        _skip_logged = True


def summarize(samples: list[dict] | None) -> dict | None:
    """Per numeric field: median, min and max over the samples; throttle reasons seen; duration.

    This is what goes into a block's record; the raw samples are kept beside it.
    """
    if not samples:
        return None
    out: dict = {"n": len(samples), "duration_s": samples[-1]["t"] - samples[0]["t"], "name": samples[0].get("name")}
    for field in NUMERIC_FIELDS:
        values = [s[field] for s in samples if s.get(field) is not None]
        out[field] = {"median": statistics.median(values), "min": min(values), "max": max(values)} if values else None
    seen = sorted({r for s in samples for r in (s.get("throttle_reasons") or [])})
    out["throttle_reasons_seen"] = seen
    return out
