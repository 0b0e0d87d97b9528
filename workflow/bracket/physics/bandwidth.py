"""Memory bandwidth: datasheet figures of known devices, and copy probes that measure it.

The ceiling needs the bandwidth the weights are read at. A datasheet figure is the usual
numerator (seed 000: GB10 273 GB/s, NVIDIA spec); a probe tells what this machine achieves
(seed 003 measured 217 GB/s of 273 during decoding). Probes count a copy of N bytes as 2N bytes
moved (read + write), as NVIDIA's bandwidthTest and STREAM's Copy do; the CUDA probe also times
a read-only reduction, the access pattern of decoding. GB/s means 1e9 bytes per second.
"""

from __future__ import annotations

import logging
import re
import statistics
import time
from dataclasses import asdict, dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Device:
    """One device's datasheet memory bandwidth and where the figure comes from."""

    name: str
    gbps: float
    memory: str
    citation: str
    pattern: str  # regex over the normalised device name (see normalise)


# First match wins, so specific variants come before their family.
KNOWN_DEVICES: tuple[Device, ...] = (
    Device(
        "GB10",
        273,
        "128 GB LPDDR5X unified",
        "NVIDIA DGX Spark hardware specifications, https://www.nvidia.com/en-us/products/workstations/dgx-spark/",
        r"^(GB10|DGX SPARK)\b",
    ),
    Device(
        "H200",
        4800,
        "141 GB HBM3e",
        "NVIDIA H200 Tensor Core GPU datasheet (SXM and NVL: 4.8 TB/s), https://www.nvidia.com/en-us/data-center/h200/",
        r"^H200\b",
    ),
    Device(
        "H100 PCIe",
        2000,
        "80 GB HBM2e",
        "NVIDIA H100 datasheet, PCIe: 2 TB/s, https://www.nvidia.com/en-us/data-center/h100/",
        r"^H100\b.*PCIE",
    ),
    Device(
        "H100 NVL",
        3900,
        "94 GB HBM3",
        "NVIDIA H100 datasheet, NVL: 3.9 TB/s, https://www.nvidia.com/en-us/data-center/h100/",
        r"^H100\b.*NVL",
    ),
    Device(
        "H100",
        3350,
        "80 GB HBM3",
        "NVIDIA H100 datasheet, SXM: 3.35 TB/s, https://www.nvidia.com/en-us/data-center/h100/",
        r"^H100\b",
    ),
    Device(
        "B200",
        8000,
        "180 GB HBM3e",
        "NVIDIA HGX B200 specifications (8 TB/s per GPU), https://www.nvidia.com/en-us/data-center/hgx/",
        r"^B200\b",
    ),
    Device(
        "A100 40GB",
        1555,
        "40 GB HBM2",
        "NVIDIA A100 datasheet, 40 GB: 1,555 GB/s, https://www.nvidia.com/en-us/data-center/a100/",
        r"^A100\b.*40 ?GB",
    ),
    Device(
        "A100 80GB PCIe",
        1935,
        "80 GB HBM2e",
        "NVIDIA A100 datasheet, 80 GB PCIe: 1,935 GB/s, https://www.nvidia.com/en-us/data-center/a100/",
        r"^A100\b.*PCIE",
    ),
    Device(
        "A100",
        2039,
        "80 GB HBM2e",
        "NVIDIA A100 datasheet, 80 GB SXM: 2,039 GB/s, https://www.nvidia.com/en-us/data-center/a100/",
        r"^A100\b",
    ),
    Device(
        "L40S", 864, "48 GB GDDR6", "NVIDIA L40S datasheet, https://www.nvidia.com/en-us/data-center/l40s/", r"^L40S\b"
    ),
    Device("L4", 300, "24 GB GDDR6", "NVIDIA L4 datasheet, https://www.nvidia.com/en-us/data-center/l4/", r"^L4$"),
    Device(
        "RTX 5090",
        1792,
        "32 GB GDDR7",
        "NVIDIA GeForce RTX 5090 specifications, https://www.nvidia.com/en-us/geforce/graphics-cards/50-series/rtx-5090/",
        r"^RTX 5090\b",
    ),
    Device(
        "RTX 4090",
        1008,
        "24 GB GDDR6X",
        "NVIDIA GeForce RTX 4090 specifications (21 Gbps x 384-bit), https://www.nvidia.com/en-us/geforce/graphics-cards/40-series/rtx-4090/",
        r"^RTX 4090\b",
    ),
    Device(
        "RTX 3090",
        936,
        "24 GB GDDR6X",
        "NVIDIA GeForce RTX 3090 specifications, https://www.nvidia.com/en-us/geforce/graphics-cards/30-series/rtx-3090-3090ti/",
        r"^RTX 3090$",
    ),
    Device(
        "MI300X",
        5300,
        "192 GB HBM3",
        "AMD Instinct MI300X datasheet, https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html",
        r"^(AMD )?(INSTINCT )?MI300X\b",
    ),
    Device(
        "Apple M4 Max",
        546,
        "unified LPDDR5X",
        "Apple newsroom, 30 Oct 2024 (M4 Max, 16-core CPU), https://www.apple.com/newsroom/2024/10/new-macbook-pro-features-m4-family-of-chips-and-apple-intelligence/",
        r"^(APPLE )?M4 MAX\b",
    ),
    Device(
        "Apple M3 Ultra",
        819,
        "unified LPDDR5",
        "Apple newsroom, 5 Mar 2025 (Mac Studio), https://www.apple.com/newsroom/2025/03/apple-unveils-new-mac-studio-the-most-powerful-mac-ever/",
        r"^(APPLE )?M3 ULTRA\b",
    ),
    Device(
        "Apple M2 Ultra",
        800,
        "unified LPDDR5",
        "Apple newsroom, 5 Jun 2023, https://www.apple.com/newsroom/2023/06/apple-introduces-m2-ultra/",
        r"^(APPLE )?M2 ULTRA\b",
    ),
    Device(
        "Jetson AGX Orin",
        204.8,
        "64 GB LPDDR5",
        "NVIDIA Jetson AGX Orin technical brief, https://www.nvidia.com/en-us/autonomous-machines/embedded-systems/jetson-orin/",
        r"^(JETSON )?AGX ORIN\b",
    ),
)


def normalise(name: str) -> str:
    """Upper case, vendor words and punctuation dropped: "NVIDIA GeForce RTX 4090" -> "RTX 4090"."""
    text = re.sub(r"[-_/]", " ", name.upper())
    text = re.sub(r"\b(NVIDIA|GEFORCE|TESLA)\b", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def lookup(name: str) -> Device | None:
    """The table entry for a device name as a user or NVML writes it, or None."""
    norm = normalise(name)
    for dev in KNOWN_DEVICES:
        if normalise(dev.name) == norm:
            return dev
    for dev in KNOWN_DEVICES:
        if re.search(dev.pattern, norm):
            return dev
    return None


def known_names() -> list[str]:
    return [d.name for d in KNOWN_DEVICES]


def detect_device_name() -> str | None:
    """Name of GPU 0 as NVML reports it, or None without NVML or a GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
            return name.decode() if isinstance(name, bytes) else name
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no library, no driver or no device all mean "none"
        return None


# The host probes' buffer (this one and bracket.physics.steadiness's): one size, so the rate the ceiling uses
# and the steadiness windows the article prints beside it are the same measurement. The size matters beyond
# the cache too: on the project's 2-core Intel Xeon (2026-12-02; glibc 2.36, 480 MiB of L3 reported) a copy of
# 64 or 128 MiB read 16.2 and 14.3 GB/s and one of 192, 256 or 512 MiB 25.6, 25.3 and 25.1. glibc's memmove
# switches to non-temporal stores above a threshold it sets from the cache size; below it each copy also reads
# its destination, uncounted. GLIBC_TUNABLES=glibc.cpu.x86_non_temporal_threshold moves the step: at 16 MiB
# every size read 26-28 GB/s, at 1 GiB every size 14-16. Where the threshold lies above this buffer (a larger
# cache), the rate reads about 1.7 times low.
CPU_PROBE_BYTES = 256 * 2**20


def probe_cpu(size_bytes: int = CPU_PROBE_BYTES, repeats: int = 5) -> dict:
    """Host memory bandwidth from timed numpy copies of ``size_bytes``.

    gbps = 2 * size / median(copy time) / 1e9 (read + write). One thread: on machines whose
    memory needs several cores to saturate this is a lower bound, and the result says so.
    """
    import numpy as np

    if size_bytes < 2**20 or repeats < 1:
        raise ValueError(f"probe needs at least 1 MiB and one repeat, got {size_bytes} bytes x {repeats}.")
    src = np.ones(size_bytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # fault the pages in before timing
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t0)
    nbytes = src.nbytes
    return {
        "gbps": 2 * nbytes / statistics.median(times) / 1e9,
        "best_gbps": 2 * nbytes / min(times) / 1e9,
        "method": f"CPU memory copy with numpy.copyto, one thread, {nbytes / 2**20:.0f} MiB, 2 x bytes per copy "
        f"(read + write), median of {repeats}; a lower bound where one core cannot saturate memory",
        "device": "cpu",
        "bytes": nbytes,
        "repeats": repeats,
        "seconds": times,
    }


def probe_cuda(size_bytes: int = 2 * 2**30, repeats: int = 20, device: int = 0) -> dict | None:
    """GPU memory bandwidth from device-to-device copies with torch, or None without CUDA.

    gbps = 2 * size / median(copy time) / 1e9 (read + write, as bandwidthTest counts D2D);
    read_gbps = size / median(sum time) / 1e9 from a reduction that only reads. Times come from
    CUDA events around each operation, after warm-up copies.
    """
    try:
        import torch
    except ImportError:
        return probe_cuda_driver(size_bytes=size_bytes, repeats=repeats, device=device)
    if not torch.cuda.is_available():
        return None
    dev = torch.device("cuda", device)
    n = size_bytes // 2
    src = torch.ones(n, dtype=torch.float16, device=dev)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
        src.sum()
    torch.cuda.synchronize(dev)

    def timed(fn) -> list[float]:
        out = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) / 1e3)
        return out

    copy_s = timed(lambda: dst.copy_(src))  # noqa: F821 - run before the del below
    read_s = timed(lambda: src.sum())  # noqa: F821 - run before the del below
    nbytes = src.numel() * src.element_size()
    name = torch.cuda.get_device_name(dev)
    del src, dst
    torch.cuda.empty_cache()
    return {
        "gbps": 2 * nbytes / statistics.median(copy_s) / 1e9,
        "best_gbps": 2 * nbytes / min(copy_s) / 1e9,
        "read_gbps": nbytes / statistics.median(read_s) / 1e9,
        "method": f"CUDA device-to-device copy with torch (Tensor.copy_), {nbytes / 2**30:.1f} GiB, 2 x bytes per copy "
        f"(read + write), median of {repeats} CUDA-event timings; read_gbps from a read-only sum",
        "device": name,
        "bytes": nbytes,
        "repeats": repeats,
        "seconds": copy_s,
        "read_seconds": read_s,
        "torch": torch.__version__,
    }


def probe_cuda_driver(size_bytes: int = 2 * 2**30, repeats: int = 20, device: int = 0) -> dict | None:
    """The device-to-device copy probe through the CUDA driver API (libcuda, ctypes), for hosts
    with a GPU driver but no torch; None when libcuda is absent or no device answers.

    gbps = 2 * size / median(cuMemcpyDtoD time) / 1e9, timed with CUDA events.
    """
    import ctypes

    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None

    def check(code, what):
        if code != 0:
            raise RuntimeError(f"CUDA driver call {what} failed with error {code}")

    if cu.cuInit(0) != 0:
        return None
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    check(cu.cuDeviceGet(ctypes.byref(dev), device), "cuDeviceGet")
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    name = ctypes.create_string_buffer(256)
    cu.cuDeviceGetName(name, 256, dev)
    src, dst = ctypes.c_uint64(), ctypes.c_uint64()
    check(cu.cuMemAlloc_v2(ctypes.byref(src), ctypes.c_size_t(size_bytes)), "cuMemAlloc")
    check(cu.cuMemAlloc_v2(ctypes.byref(dst), ctypes.c_size_t(size_bytes)), "cuMemAlloc")
    try:
        check(cu.cuMemsetD8_v2(src, 1, ctypes.c_size_t(size_bytes)), "cuMemsetD8")
        start, end = ctypes.c_void_p(), ctypes.c_void_p()
        check(cu.cuEventCreate(ctypes.byref(start), 0), "cuEventCreate")
        check(cu.cuEventCreate(ctypes.byref(end), 0), "cuEventCreate")
        for _ in range(3):
            check(cu.cuMemcpyDtoD_v2(dst, src, ctypes.c_size_t(size_bytes)), "cuMemcpyDtoD")
        check(cu.cuCtxSynchronize(), "cuCtxSynchronize")
        times = []
        ms = ctypes.c_float()
        for _ in range(repeats):
            cu.cuEventRecord(start, None)
            check(cu.cuMemcpyDtoD_v2(dst, src, ctypes.c_size_t(size_bytes)), "cuMemcpyDtoD")
            cu.cuEventRecord(end, None)
            check(cu.cuEventSynchronize(end), "cuEventSynchronize")
            check(cu.cuEventElapsedTime(ctypes.byref(ms), start, end), "cuEventElapsedTime")
            times.append(ms.value / 1e3)
        cu.cuEventDestroy_v2(start)
        cu.cuEventDestroy_v2(end)
    finally:
        cu.cuMemFree_v2(src)
        cu.cuMemFree_v2(dst)
        cu.cuDevicePrimaryCtxRelease_v2(dev)
    return {
        "gbps": 2 * size_bytes / statistics.median(times) / 1e9,
        "best_gbps": 2 * size_bytes / min(times) / 1e9,
        "method": f"CUDA device-to-device copy with the driver API (cuMemcpyDtoD), {size_bytes / 2**30:.1f} GiB, "
        f"2 x bytes per copy (read + write), median of {repeats} CUDA-event timings",
        "device": name.value.decode(),
        "bytes": size_bytes,
        "repeats": repeats,
        "seconds": times,
    }


def probe(**kwargs) -> dict:
    """The CUDA probe when a GPU is usable through torch, else the CPU probe."""
    return probe_cuda(**kwargs) or probe_cpu()


def _cited(dev: Device) -> dict:
    return {k: v for k, v in asdict(dev).items() if k != "pattern"}


def resolve(
    *, bandwidth_gbps: float | None = None, device: str = "", probe_bandwidth: bool = True
) -> tuple[float | None, dict]:
    """Bandwidth in GB/s and its source, from the keys of an experiment's ``hardware`` block
    (bracket.typed.experiment.Hardware; the schema's defaults are these arguments').

    Order: ``bandwidth_gbps`` (source "user"); ``device`` from the table (source "table", with
    the citation; an unknown name is an error that lists the known ones); the GPU NVML reports,
    when the table knows it; the probe when ``probe_bandwidth`` is true (source "probe", with
    its method); otherwise (None, source "none") and the ceiling is left empty.
    """
    if bandwidth_gbps:
        return float(bandwidth_gbps), {
            "kind": "user",
            "detail": "hardware.bandwidth_gbps in the experiment",
        }
    if device:
        dev = lookup(device)
        if dev is None:
            raise ValueError(
                f"hardware.device {device!r} is not in the bandwidth table ({', '.join(known_names())}); "
                "set hardware.bandwidth_gbps to its datasheet figure instead."
            )
        return dev.gbps, {"kind": "table", **_cited(dev)}
    detected = detect_device_name()
    if detected and lookup(detected):
        dev = lookup(detected)
        return dev.gbps, {"kind": "table", "detected": detected, **_cited(dev)}
    if probe_bandwidth:
        result = probe()
        log.info("bandwidth probe: %.1f GB/s (%s)", result["gbps"], result["method"])
        return result["gbps"], {
            "kind": "probe",
            **{k: v for k, v in result.items() if k not in ("seconds", "read_seconds")},
        }
    return None, {
        "kind": "none",
        "detail": "no bandwidth: set hardware.device or hardware.bandwidth_gbps, or enable probe_bandwidth",
    }
