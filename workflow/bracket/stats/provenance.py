"""What ran, as stats.json states it: the blocks' provenance, the failed attempts and the model's build record.

Each block's runner writes its provenance beside its records (raw/block-K.meta.json: the launch command and
environment with secrets masked, the host, the server's versions and state, telemetry); the collect rule
gathers the attempts set aside in raw/failed/ (failed_attempts.json); the embedded model's trainer writes
build.json. `provenance` turns these into the facts and judgements the article's method section words, so
the article reads stats.json alone (stats.json version 4, issue 28): per block its status, start and server;
the engine as identified or launched, its versions and how it was reached; the hardware grouped by host;
whether the blocks shared one priority, process layout and CPU pinning; the weights' hashes against the
pin; per arm the flags and server state it ran with and its first launch command; the failed attempts; the
model. Values are kept as the blocks recorded them (server text included: the article escapes it); no
sentence is made here.
"""

from __future__ import annotations

import json
from enum import StrEnum

from bracket.typed.experiment import Arm, Experiment


#: What the blocks' weight hashes say against the package's pin (bracket.embedded.MODEL_SHA256).
class WeightsReading(StrEnum):
    DIFFER = "differ"  # the blocks served different weights
    UNPINNED = "unpinned"  # no hash is pinned for this model
    PINNED = "pinned"  # every block served the pinned weights
    OTHER = "other"  # a hash is pinned, and these are other weights


#: A block's keys stated per block (telemetry is its NVML summary; log_tail only for a block that did not complete).
BLOCK_KEYS = ("block", "arm", "round", "status", "ready_s", "started_at", "ended_at", "server_id", "host")
#: A failed attempt's keys (records.failed_attempts: its provenance, records_kept and file).
ATTEMPT_KEYS = ("block", "arm", "status", "error", "records_kept", "file")


def _ordered(metas: list[dict]) -> list[dict]:
    return sorted(metas, key=lambda m: int(m.get("block") or 0))


def _first(metas: list[dict], key: str):
    """The first block's value of `key` that is set (blocks in order)."""
    return next((m[key] for m in metas if m.get(key)), None)


def block_record(m: dict) -> dict:
    """One block as it ran: BLOCK_KEYS, its telemetry summary (None without samples), and the last lines of the
    log of a block that did not complete."""
    tel = m.get("telemetry")
    out = {k: m.get(k) for k in BLOCK_KEYS}
    out["telemetry"] = tel if isinstance(tel, dict) and tel.get("n") else None
    if m.get("status") not in (None, "complete"):
        out["log_tail"] = m.get("log_tail")
    return out


def versions(metas: list[dict]) -> list[str]:
    """The server versions the blocks recorded, in order, once each (a JSON body {"version": ...} read as its value)."""
    out: list[str] = []
    for m in metas:
        v = m.get("version")
        try:
            v = json.loads(v).get("version", v) if isinstance(v, str) and v.startswith("{") else v
        except (ValueError, AttributeError):
            pass
        if v and str(v) not in out:
            out.append(str(v))
    return out


def served(metas: list[dict], model_dir: str | None) -> dict:
    """What served: the engine as identified on the server (attach), else the kind launched; its versions; how it
    was reached (launch, every block's launch, base_url); the model as the server named it (served_model), as the
    blocks recorded it (model) and as the workflow resolved it (model_dir, None for the schema's "embedded");
    the platforms the client ran on."""
    return {
        "identified": _first(metas, "engine_identified"),
        "kind": _first(metas, "engine"),
        "versions": versions(metas),
        "launch": _first(metas, "launch"),
        "launches": list(dict.fromkeys(m.get("launch") for m in metas)),
        "base_url": _first(metas, "base_url"),
        "served_model": _first(metas, "served_model"),
        "model": _first(metas, "model"),
        "model_dir": model_dir if model_dir not in (None, "", "embedded") else None,
        "platforms": sorted({str(m["platform"]) for m in metas if m.get("platform")}),
    }


def hardware(metas: list[dict]) -> list[dict]:
    """The machines the blocks ran on, one group per distinct machine (in the order first met): cpu, cpus,
    memory_gib, kernel (host_info), the GPUs counted by (name, memory_mib, driver), and the hosts of the group."""
    groups: dict[str, dict] = {}
    for m in metas:
        hi, gpus = m.get("host_info") or {}, m.get("gpus") or []
        if not hi and not gpus:
            continue
        counted: dict[tuple, int] = {}
        for g in gpus:
            key = (g.get("name"), g.get("memory_mib"), g.get("driver"))
            counted[key] = counted.get(key, 0) + 1
        machine = {
            **{k: hi.get(k) for k in ("cpu", "cpus", "memory_gib", "kernel")},
            "gpus": [{"name": n, "memory_mib": mem, "driver": drv, "count": c} for (n, mem, drv), c in counted.items()],
        }
        group = groups.setdefault(json.dumps(machine, sort_keys=True, default=str), {**machine, "hosts": []})
        if m.get("host") and str(m["host"]) not in group["hosts"]:
            group["hosts"].append(str(m["host"]))
    return [{**g, "hosts": sorted(g["hosts"])} for g in groups.values()]


def shared(metas: list[dict], key: str) -> dict:
    """Whether every block had the same `key` (priority, engine_layout, pinning): {"differs": False, "value": it}
    (None where no block set it, or no block ran), or {"differs": True, "value": None}."""
    seen = {json.dumps(m.get(key), sort_keys=True) for m in metas}
    if len(seen) > 1:
        return {"differs": True, "value": None}
    return {"differs": False, "value": json.loads(seen.pop()) if seen else None}


def weights_served(metas: list[dict]) -> dict | None:
    """The weights the blocks served (model_sha256: file, sha256, the pinned hash, whether it matches, and the
    CPU vendor of the pinned build it is) and
    their reading (WeightsReading); None where no block recorded a hash (a model too large to hash whole)."""
    hashes = [m["model_sha256"] for m in metas if isinstance(m.get("model_sha256"), dict)]
    if not hashes:
        return None
    digests = sorted({h.get("sha256") for h in hashes if h.get("sha256")})
    pins = {h.get("pinned") for h in hashes}
    if len(digests) > 1:
        reading = WeightsReading.DIFFER
    elif pins == {None}:
        reading = WeightsReading.UNPINNED
    elif all(h.get("matches") for h in hashes):
        reading = WeightsReading.PINNED
    else:
        reading = WeightsReading.OTHER
    return {
        "files": sorted({str(h.get("file")) for h in hashes if h.get("file")}),
        "sha256": digests,
        "pinned": sorted(p for p in pins if p),
        # the CPU vendors whose pinned builds the blocks served (bracket.embedded.MODEL_SHA256)
        "builds": sorted({h["build"] for h in hashes if h.get("build")}),
        "blocks": len(hashes),
        "of": len(metas),
        "reading": reading.value,
    }


def _flag_groups(argv: list[str]) -> list[tuple[str, ...]]:
    """argv as flags with their values: ("--port", "8000"), ("--metrics",); a lone value stands alone."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("-") and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            out.append((a, argv[i + 1]))
            i += 2
        else:
            out.append((a,))
            i += 1
    return out


def launched_flags(argv: list[str], args: list[str]) -> list[str]:
    """The launch flags that distinguish an arm, as they ran: every adapter's speculative flags begin with --spec
    (vLLM's --speculative-config, SGLang's --speculative-*, llama.cpp's --spec-*), then the arm's own `args`
    not already among them."""
    spec = [g for g in _flag_groups(list(argv)) if g[0].startswith("--spec")]
    extra = [g for g in _flag_groups(list(args)) if g not in spec]
    return [a for g in spec + extra for a in g]


def server_state(m: dict) -> dict | None:
    """The state a block's server kept between requests, as its meta records it (`server_state`: the block runner
    records it as launched, and bracket.engines.provenance.read_block_metas reads it for a block measured before
    that). None where no adapter could say."""
    return m.get("server_state")


def arm_record(name: str, metas: list[dict], arm: Arm | None) -> dict:
    """One arm as it ran: `flags` as launched (None where no block has a launch command), `states` (each distinct
    server state its blocks ran with, in order; [] where no block ran), `launch` (its first block's block, argv and
    env as recorded, secrets already masked; None where no block ran)."""
    own = [m for m in metas if m.get("arm") == name]
    launched = next((m for m in own if m.get("argv")), None)
    flags = launched_flags(launched["argv"], list(arm.args) if arm else []) if launched else None
    states: list = []
    for m in own:
        st = server_state(m)
        if st not in states:
            states.append(st)
    first = own[0] if own else None
    return {
        "arm": name,
        "flags": flags,
        "states": states,
        "launch": {"block": first.get("block"), "argv": first.get("argv"), "env": first.get("env")} if first else None,
    }


def arms_differ(arms: list[dict]) -> bool:
    """Whether the arms ran with different server states."""
    return len({json.dumps(a["states"], sort_keys=True) for a in arms}) > 1


def attempt_record(m: dict) -> dict:
    """A failed attempt (records.failed_attempts): ATTEMPT_KEYS as recorded."""
    return {k: m.get(k) for k in ATTEMPT_KEYS}


def instrument(metas: list[dict], analysed: dict | None) -> dict:
    """Which bracket measured and which analysed (bracket.version records: version, commit, dirty, source, and
    `why` where the commit is unknown): `measured` each distinct record the blocks carry, in block order, with
    the blocks that carried it; `unrecorded` the blocks that carry none (measured before bracket recorded
    itself in each block's meta); `analysed` the record of the bracket that wrote this stats.json (None where
    the caller names none: an older file brought up to date by bracket.stats.contract)."""
    measured: list[dict] = []
    for m in metas:
        rec = m.get("bracket")
        if not isinstance(rec, dict):
            continue
        same = next((x for x in measured if x["record"] == rec), None)
        if same is None:
            measured.append({"record": rec, "blocks": [m.get("block")]})
        else:
            same["blocks"].append(m.get("block"))
    unrecorded = [m.get("block") for m in metas if not isinstance(m.get("bracket"), dict)]
    return {"measured": measured, "unrecorded": unrecorded, "analysed": analysed}


def provenance(
    metas: list[dict],
    failed_attempts: list[dict] | None,
    model_dir: str | None,
    model_build: dict | None,
    experiment: Experiment,
    analysed: dict | None = None,
) -> dict:
    """stats.json's `provenance`: what ran, from the blocks' meta, the failed attempts and the model's build record.

    Keys: blocks (block_record, in block order), served (served), hardware (hardware), flush_warnings (whether
    any block recorded a warning, on attach a failed flush), priority, layout, pinning (shared: engine.nice, the
    embedded engine's process layout, engine.pin_cpus), weights_served (weights_served), arms (arm_record, in the
    experiment's order, then any other arm the blocks name), arm_states_differ, failed_attempts (attempt_record),
    model_build (build.json as the trainer wrote it; None without one), bracket (instrument: which bracket measured
    each block and which wrote the analysis, `analysed`).
    """
    ms = _ordered(metas)
    names = list(experiment.arms) + sorted({str(m["arm"]) for m in ms if m.get("arm")} - set(experiment.arms))
    arms = [arm_record(a, ms, experiment.arms.get(a)) for a in names]
    return {
        "blocks": [block_record(m) for m in ms],
        "served": served(ms, model_dir),
        "hardware": hardware(ms),
        "flush_warnings": any(bool(m.get("warnings")) for m in ms),
        "priority": shared(ms, "priority"),
        "layout": shared(ms, "engine_layout"),
        "pinning": shared(ms, "pinning"),
        "weights_served": weights_served(ms),
        "arms": arms,
        "arm_states_differ": arms_differ(arms),
        "failed_attempts": [attempt_record(m) for m in failed_attempts or []],
        "model_build": model_build,
        "bracket": instrument(ms, analysed),
    }
