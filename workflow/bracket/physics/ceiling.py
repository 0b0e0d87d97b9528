"""Decode ceilings: bandwidth / bytes read per token, under each precision hypothesis.

Single-stream decoding is bandwidth-bound: each step reads the weights once, so

    ceiling_tok_s = bandwidth_bytes_per_s / bytes_per_token
    efficiency    = measured_tok_s / ceiling_tok_s

(seed 000: 273 GB/s / 18.77 GB = 14.54 tok/s; 12.32 measured is 85%). To check that an engine
really reads quantized weights at their packed width, compare the measured rate with the
ceiling under each hypothesis of what is read (seed 000's "bandwidth, not logs"):

- ``as stored``: the bytes in the headers.
- ``dequantised to FP8``: every weight stored narrower than 8 bits is read as 8 bits
  (n logical weights cost n bytes; its scales are gone); wider weights are read as stored.
- ``dequantised to BF16``: the same at 16 bits.

A hypothesis whose ceiling lies below the measured rate is physically impossible
(``possible = measured <= ceiling``): the engine cannot be doing that.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from bracket.physics import bandwidth, steadiness

# `exp` is the validated experiment (bracket.typed.experiment.Experiment), read by attribute; not imported
# here: experiment/ stands above this layer (ARCHITECTURE.md, the floor plan).

HYPOTHESES = (("as stored", None), ("dequantised to FP8", 8), ("dequantised to BF16", 16))


def ceiling_tok_s(bandwidth_gbps: float, bytes_per_token: float) -> float:
    """bandwidth / bytes per token, with bandwidth in GB/s (1e9 bytes/s)."""
    if bandwidth_gbps <= 0:
        raise ValueError(f"bandwidth must be positive, got {bandwidth_gbps} GB/s.")
    if bytes_per_token <= 0:
        raise ValueError(f"bytes per token must be positive, got {bytes_per_token}; is the weights account empty?")
    return bandwidth_gbps * 1e9 / bytes_per_token


def read_groups(acct: dict) -> list[tuple[float, float, float | None]]:
    """(bytes, logical weights, element bits) of each storage format a token reads.

    From a full account: its ``read_formats``. From a minimal one, ``{"bytes_per_token": B,
    "bits_per_weight": {"backbone": b}}``: a single group of B bytes holding 8B/b weights of b
    bits, which is how seed 000 reasoned ("the 18.77 GB are read as 4-bit values").
    """
    formats = acct.get("read_formats")
    if formats is None:
        b = (acct.get("bits_per_weight") or {}).get("backbone") or 16
        B = float(acct["bytes_per_token"])
        return [(B, 8 * B / b, b)]
    return [(row["bytes"], row["weights"], row["element_bits"]) for row in formats.values()]


def hypothesis_bytes(acct: dict, bits: int | None) -> float:
    """Bytes per token if every weight narrower than ``bits`` were read at ``bits`` (None: as stored).

    bytes_H = sum over read formats of (n * H / 8 if element_bits < H else stored bytes).
    """
    if bits is None:
        return float(acct["bytes_per_token"])
    total = 0.0
    for nbytes, weights, element_bits in read_groups(acct):
        widen = element_bits is not None and weights and element_bits < bits
        total += weights * bits / 8 if widen else nbytes
    return total


def hypotheses(weights_account: dict, bandwidth_gbps: float, measured_tok_s: float | None = None) -> list[dict]:
    """The ceiling under each hypothesis, and, given a measured rate, efficiency and possibility.

    Each entry: ``name``, ``bits`` (None for as stored), ``bytes_per_token``, ``ceiling_tok_s``,
    ``ms_per_token`` (bytes / bandwidth), ``efficiency`` (measured / ceiling), ``possible``
    (measured <= ceiling) and ``implied_gbps`` (measured * bytes: the bandwidth the measured
    rate needs under this hypothesis; seed 003's 11.4 tok/s x 19.10 GB = 217 GB/s).
    """
    rows = []
    for name, bits in HYPOTHESES:
        b = hypothesis_bytes(weights_account, bits)
        rows.append(
            {
                "name": name,
                "bits": bits,
                "bytes_per_token": b,
                "ceiling_tok_s": ceiling_tok_s(bandwidth_gbps, b),
                "ms_per_token": 1e3 * b / (bandwidth_gbps * 1e9),
            }
        )
    return evaluate(rows, measured_tok_s)


def evaluate(rows: list[dict], measured_tok_s: float | None) -> list[dict]:
    """Hypothesis rows with ``efficiency``, ``possible`` and ``implied_gbps`` for a measured rate.

    The report calls this with the median decode rate once it is known; without one the three
    fields are None.
    """
    out = []
    for row in rows:
        row = dict(row)
        if measured_tok_s is None:
            row.update(efficiency=None, possible=None, implied_gbps=None)
        else:
            if measured_tok_s <= 0:
                raise ValueError(f"measured rate must be positive, got {measured_tok_s} tok/s.")
            row["efficiency"] = measured_tok_s / row["ceiling_tok_s"]
            row["possible"] = bool(row["efficiency"] <= 1.0)
            row["implied_gbps"] = measured_tok_s * row["bytes_per_token"] / 1e9
        out.append(row)
    return out


def with_measured(ceiling: dict, measured_tok_s: float | None) -> dict:
    """A ceiling.json dict with ``measured_tok_s`` filled and its hypotheses re-evaluated."""
    return {**ceiling, "measured_tok_s": measured_tok_s, "hypotheses": evaluate(ceiling["hypotheses"], measured_tok_s)}


def build(acct: dict, bandwidth_gbps: float | None, source: dict, measured_tok_s: float | None = None) -> dict:
    """The ceiling.json content for an account and a resolved bandwidth.

    ``status``: ``computed``; ``unknown`` when the account has no bytes (its ``reason`` and ``key``
    are carried over, so the article can say why); ``no_bandwidth`` when no bandwidth was found.
    """
    if acct.get("status") == "unknown" or not acct.get("bytes_per_token"):
        return {
            "status": "unknown",
            "model": acct.get("model"),
            "bandwidth_gbps": bandwidth_gbps,
            "bandwidth_source": source,
            "bytes_per_token": None,
            "ceiling_tok_s": None,
            "measured_tok_s": measured_tok_s,
            "hypotheses": [],
            "arms": {},
            "reason": acct.get("reason") or "the byte account is empty",
            "key": acct.get("key") or "engine.model",
        }
    result = {
        "status": "computed" if bandwidth_gbps is not None else "no_bandwidth",
        "model": acct.get("model"),
        "bandwidth_gbps": bandwidth_gbps,
        "bandwidth_source": source,
        "bytes_per_token": acct["bytes_per_token"],
        "ceiling_tok_s": None,
        "measured_tok_s": measured_tok_s,
        "hypotheses": [],
        "arms": {},
    }
    if bandwidth_gbps is None:
        return result
    result["ceiling_tok_s"] = ceiling_tok_s(bandwidth_gbps, acct["bytes_per_token"])
    result["hypotheses"] = hypotheses(acct, bandwidth_gbps, measured_tok_s)
    for arm, note in (acct.get("arms") or {}).items():
        step = note.get("bytes_per_step")
        result["arms"][arm] = {
            "bytes_per_step": step,
            "steps_per_s_ceiling": ceiling_tok_s(bandwidth_gbps, step) if step else None,
        }
    return result


def write_json(weights_json_path, exp, out_path) -> dict:
    """Write ceiling.json from weights.json and the experiment's ``hardware`` block.

    Bandwidth: ``hardware.bandwidth_gbps`` if given; else ``hardware.device`` from the known
    table (or the GPU NVML reports, when it is in the table); else, with ``probe_bandwidth``,
    a measured copy probe (CUDA if present, else CPU memory). See ``bracket.physics.bandwidth.resolve``.
    When the server runs on this host (no attach, no named hosts) and it has no NVIDIA GPU, also
    ``machine_steadiness``: the memory copy rate over ``hardware.steadiness_s`` seconds, no server
    running (``bracket.physics.steadiness``).
    """
    hardware = exp.hardware
    acct = json.loads(Path(weights_json_path).read_text())
    gbps, source = bandwidth.resolve(
        bandwidth_gbps=hardware.bandwidth_gbps, device=hardware.device, probe_bandwidth=hardware.probe_bandwidth
    )
    result = build(acct, gbps, source)
    # A host without an NVIDIA GPU decodes from its caches and memory: how steady they are, before any
    # block. Not for an attached server (it runs elsewhere) nor for named hosts (one probe here cannot
    # speak for several machines).
    local = exp.engine.launch in ("native", "docker") and not exp.hosts
    seconds = float(hardware.steadiness_s)
    if 0 < seconds < 1:
        raise ValueError(
            f"hardware.steadiness_s is {seconds:g}: give 0 (no steadiness probe) or at least 1 s "
            "(the probe reads the copy rate in half-second windows)."
        )
    if local and seconds > 0 and bandwidth.detect_device_name() is None:  # looked up here: tests replace it
        result["machine_steadiness"] = steadiness.probe(seconds, window_s=min(0.5, seconds / 4))
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    return result


def measured(ceiling: dict | None, cells: list[dict], reference: str, plain_arms: list[str]) -> dict:
    """The measurement against the ceiling: stats.json's `physics` (the analysis decides; the article shows).

    `cells` are stats.json cells (arm, workload, median). Only arms without speculation are held
    against the plain ceiling: with it, one weight read yields several tokens. Returns
    {"efficiency": [{workload, arm, median, ceiling_tok_s, efficiency, implied_gbps}],
    "reference_median": median of the reference's workload medians, "hypotheses": seed 000's
    precision hypotheses evaluated at it (efficiency, possible, implied_gbps)}.
    """
    c = ceiling or {}
    out: dict = {"efficiency": [], "reference_median": None, "hypotheses": []}
    ref = [x["median"] for x in cells if x["arm"] == reference and x.get("median")]
    if ref:
        out["reference_median"] = float(statistics.median(ref))
    if c.get("hypotheses") and out["reference_median"]:
        out["hypotheses"] = evaluate(c["hypotheses"], out["reference_median"])
    if not c.get("ceiling_tok_s"):
        return out
    one = [{"bytes_per_token": c["bytes_per_token"], "ceiling_tok_s": c["ceiling_tok_s"]}]
    for x in cells:
        if x["arm"] in plain_arms and x.get("median"):
            ev = evaluate(one, x["median"])[0]
            out["efficiency"].append(
                {
                    "workload": x["workload"],
                    "arm": x["arm"],
                    "median": x["median"],
                    "ceiling_tok_s": c["ceiling_tok_s"],
                    "efficiency": ev["efficiency"],
                    "implied_gbps": ev["implied_gbps"],
                }
            )
    return out
