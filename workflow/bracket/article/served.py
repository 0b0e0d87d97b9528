"""What served the experiment and where, as stats.json states it (`provenance`, `experiment.engine`, `guards`):
the engine and its versions, the bracket that measured, the hardware, how the server was launched (process
layout, CPU pinning, priority), how the prefix cache was checked, the weights served, a block's launch command.

The records inside `provenance` (served, hardware, the blocks' shared settings, the weights' hashes, the bracket
version records) are `Json`: their shapes are bracket.stats.provenance's and bracket.version's, read by key here.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from bracket import embedded, version
from bracket.article.inputs import Data
from bracket.article.text import _n
from bracket.engines.identify import NAMES
from bracket.stats.provenance import WeightsReading
from bracket.stats.results import Gpu, Json, Provenance, Served, StatedEngine

ENGINE_NAMES = NAMES  # one table of engine names: the identifier's


def _served(d: Data) -> Served:
    """provenance.served: the engine and its versions as served (all unknown where no block recorded it)."""
    return d.results.provenance.served or Served()


def _engine(d: Data) -> StatedEngine:
    """The engine as the experiment sets it."""
    return d.results.experiment.engine


def served_sentence(d: Data) -> str:
    """What served the experiment, from stats.json's provenance: the engine as identified on the server
    (on attach) or as launched (the block's engine kind), its versions, how bracket reached it, and the model
    as the server named it and where its files were."""
    eng = _engine(d)
    sv = _served(d)
    found = sv.identified
    launch = sv.launch or eng.launch
    vs = sv.versions
    if isinstance(found, Mapping) and found.get("kind"):
        who = ENGINE_NAMES.get(found["kind"], str(found["kind"]))
        who += f" {found['version']}" if found.get("version") else (f" {', '.join(vs)}" if vs else "")
        if found.get("evidence"):
            who += f" (identified from what it serves: {found['evidence']})"
    else:
        kind = sv.kind or eng.kind
        if kind in (None, "auto", "openai"):
            who = (
                "an OpenAI-compatible server"
                + (f" reporting version {', '.join(vs)}" if vs else "")
                + f" (engine.kind: {kind or 'not recorded'}; its engine was not identified)"
            )
        else:
            who = ENGINE_NAMES.get(kind, str(kind)) + (f" {', '.join(vs)}" if vs else "")
    if eng.embedded:
        who += (
            " (embedded: vLLM's CPU build serving a tiny model trained locally)"
            if eng.kind == "vllm"
            else " (embedded: llama-server built by the workflow serving a tiny model trained locally, as GGUF)"
            if eng.kind == "llamacpp"
            else " (embedded: the tiny model trained locally)"
        )
    base = sv.base_url or eng.base_url
    how = {
        "attach": f", attached at {base} (started by hand; bracket started and stopped nothing)"
        if base
        else ", attached (started by hand)",
        "docker": ", in a fresh container per block",
        "native": ", a fresh process per block",
        "slurm": ", a fresh process per block",
    }.get(launch, f", launch {launch}" if launch else "")
    served = sv.served_model
    # the model as the workflow resolved it, else as the blocks recorded it, else as the experiment named it
    where = sv.model_dir or sv.model or eng.model
    if where == "embedded":
        where = None
    model = ""
    if served and where and served != where:
        model = f" Model: {served} as the server names it; its files: {where}."
    elif served or where:
        model = f" Model: {served or where}."
    return f"Served by {who}{how}." + model


def _block_list(blocks) -> str:
    nums = [str(b) for b in blocks if b is not None]
    return ("block " if len(nums) == 1 else "blocks ") + ", ".join(nums)


def instrument_sentence(d: Data) -> str:
    """Which bracket measured each block and which wrote the analysis, as stats.json's provenance states them
    (bracket.version records); blocks measured before bracket recorded itself are said to be unknown."""
    rec = d.results.provenance.bracket
    if not isinstance(rec, Mapping):
        return (
            "Which bracket measured and analysed these numbers is not recorded: this stats.json was written "
            "before bracket recorded its own version and commit."
        )
    measured, unrecorded = rec.get("measured") or (), rec.get("unrecorded") or ()
    parts = []
    if len(measured) == 1 and not unrecorded and measured[0]["record"] == rec.get("analysed"):
        return f"Measured and analysed by {version.describe(measured[0]['record'])}."
    if len(measured) == 1 and not unrecorded:
        parts.append(f"Measured by {version.describe(measured[0]['record'])}.")
    elif measured:
        parts.append(
            "Measured by "
            + "; ".join(f"{version.describe(m['record'])} ({_block_list(m['blocks'])})" for m in measured)
            + "."
        )
    if unrecorded:
        parts.append(
            f"{'Every block' if not measured else _block_list(unrecorded).capitalize()} was measured before "
            "bracket recorded its own version and commit in each block: which bracket measured "
            f"{'them' if not measured or len(unrecorded) > 1 else 'it'} is not known."
        )
    parts.append(
        f"Analysed by {version.describe(rec['analysed'])}."
        if rec.get("analysed")
        else "Which bracket wrote the analysis is not recorded."
    )
    return " ".join(parts)


def _gpu_words(g: Gpu) -> str:
    name, mem, driver, n = g.name, g.memory_mib, g.driver, g.count
    if not (mem or driver):
        return f"{n} x {name}"
    return f"{n} x {name}" + (f" ({mem} MiB" if mem else " (") + (f", driver {driver})" if driver else ")")


def hardware_sentence(d: Data) -> str:
    """The machine each block ran on, as stats.json's provenance groups it: CPU model, cores, memory, GPUs."""
    groups = d.results.provenance.hardware
    if not groups:
        return ""
    lines = []
    for g in groups:
        parts = []
        if g.cpu:
            parts.append(str(g.cpu))
        if g.cpus:
            parts.append(f"{g.cpus} logical CPUs")
        if g.memory_gib:
            parts.append(f"{g.memory_gib} GiB memory")
        parts += [_gpu_words(x) for x in g.gpus]
        if not g.gpus:
            parts.append("no NVIDIA GPU reported")
        if g.kernel:
            parts.append(f"Linux {g.kernel}")
        hosts = g.hosts
        lines.append((f"{', '.join(hosts)}: " if len(groups) > 1 else "") + ", ".join(parts))
    note = (
        " This is the host bracket's client ran on; an attached server elsewhere ran on its own machine."
        if _served(d).launch == "attach"
        else ""
    )
    return "Hardware: " + "; ".join(lines) + "." + note


def cache_sentence(d: Data) -> str:
    """How the prefix cache was checked, run by run (records.cache_check, counted in stats.json guards)."""
    g = d.results.guards
    checks = (g.cache_checks if g else None) or {}
    found = _served(d).identified
    who = (
        ENGINE_NAMES.get(found.get("kind"), found.get("kind"))
        + (f" {found['version']}" if found.get("version") else "")
        if found
        else "the server"
    )
    ways = []
    if checks.get("reported"):
        ways.append(f"{_n(checks['reported'], 'timed run')} by the cached tokens {who} reported in its response")
    if checks.get("metrics"):
        ways.append(
            f"{_n(checks['metrics'], 'timed run')} by {who}'s prefix-cache hit counters on /metrics "
            f"(vllm:prefix_cache_hits), read just before and after each single-stream request"
        )
    if checks.get("unique prefix"):
        ways.append(
            f"{_n(checks['unique prefix'], 'timed run')} not directly: {who} reported no cached tokens (cache "
            f"not reported), so they rest on their prefixes, each unique in the experiment"
        )
    if not ways:
        return ""
    hits = g.cache_hits or 0
    return (
        "Cache check: "
        + "; ".join(ways)
        + "."
        + (f" {_n(hits, 'run')} showed a cache hit and {'is' if hits == 1 else 'are'} invalid." if hits else "")
    )


def launch_sentence(d: Data) -> str:
    """How the server was started, from stats.json's provenance (attach mode changes what a block means)."""
    prov = d.results.provenance
    launches = set(_served(d).launches) or {_engine(d).launch}
    if launches == {"attach"}:
        return (
            "The server was started by hand and only attached to: it was not restarted between blocks, so "
            "every arm ran with the same server flags, and each block flushed the prefix cache where the "
            "engine allows it" + ("" if not prov.flush_warnings else " (see the warnings below: a flush failed)") + "."
        )
    if launches == {"docker"}:
        return "A fresh container was started for each block and removed after it."
    return (
        "A fresh server process was launched for each block and stopped after it."
        + layout_sentence(prov)
        + pinning_sentence(prov)
        + priority_sentence(prov)
    )


def _shared(rec: Json) -> tuple[bool, Json]:
    """A setting the blocks share, as bracket.stats.provenance.shared records it: (whether the blocks differed
    in it, the one value they shared: None where none was set)."""
    rec = rec or {}
    return bool(rec.get("differs")), rec.get("value")


def priority_sentence(prov: Provenance) -> str:
    """The server's and the client's nice value (engine.nice), from stats.json's provenance."""
    differs, pr = _shared(prov.priority)
    if differs:
        return " The server's priority differed between blocks: see each block's provenance (priority)."
    if pr is None:
        return ""
    how = [f"{who} {pr[who]}" for who in ("server", "client") if pr.get(who, "set") != "set"]
    return (
        f" The server and bracket's client ran at nice {pr['nice']}, their sessions' autogroups too "
        f"(engine.nice)" + (f"; not everywhere: {'; '.join(how)}" if how else "") + "."
    )


def layout_sentence(prov: Provenance) -> str:
    """Where the embedded vLLM engine ran its model (bracket.measure.pinning.worker), from stats.json's provenance."""
    differs, w = _shared(prov.layout)
    if differs:
        return " The engine's process layout differed between blocks: see each block's provenance (engine_layout)."
    if w is None:
        return ""
    n = w["compute_threads"]
    return (
        f" The engine ran its model inside the engine core's process on {n} compute thread{'s' if n != 1 else ''} "
        f"(engine.inproc_worker: auto; {', '.join(f'{k}={v}' for k, v in sorted(w['env'].items()))}), so no "
        f"scheduler process busy-waited on a core beside the API server and bracket's client."
    )


def pinning_sentence(prov: Provenance) -> str:
    """Where the engine's compute, its other processes and the client ran (bracket.measure.pinning), from
    stats.json's provenance."""
    differs, p = _shared(prov.pinning)
    if differs:
        return " CPU pinning differed between blocks: see each block's provenance (pinning)."
    if p is None:
        return ""
    return (
        f" Its compute thread(s) ran on core(s) {p['compute']} alone; the server's other processes and "
        f"bracket's client on core(s) {p['server']} (engine.pin_cpus: auto)."
    )


def command(launch: Json) -> str:
    """A block's launch command as a shell takes it (its environment, then argv; secrets were masked when
    the block recorded them)."""
    env = " ".join(f"{k}={v}" for k, v in (launch.get("env") or {}).items())
    return (env + " \\\n  " if env else "") + shlex.join(launch.get("argv") or [])


def model_hash_sentence(served: Json) -> tuple[str, str] | None:
    """What the blocks' provenance says of the weights served (stats.json's provenance.weights_served, with its
    reading against the pinned hash: bracket.stats.provenance.WeightsReading).

    Returns (sentence, style) or None where no block recorded a hash (a model too large to hash whole)."""
    if not served:
        return None
    text = (
        f"Model weights served ({', '.join(served['files'])}): sha256 {', '.join(served['sha256'])}"
        + (f" in {served['blocks']} of {served['of']} blocks" if served["blocks"] < served["of"] else ", every block")
        + ". "
    )
    reading = served.get("reading")
    if reading == WeightsReading.DIFFER:
        return text + "The blocks served different weights: their arms are not comparable.", "warn"
    if reading == WeightsReading.UNPINNED:
        return text + (
            "No hash is pinned for this model in the package for this machine's CPU vendor (the embedded model's "
            "builds are pinned per CPU vendor: bracket.embedded.MODEL_SHA256)."
        ), ""
    if reading == WeightsReading.PINNED:
        builds = served.get("builds") or []
        on = f" trained on {' and '.join(embedded.vendor_name(v) for v in builds)} CPUs" if builds else ""
        return text + (
            f"It is the hash this package pins for the model{on} (bracket.embedded.MODEL_SHA256): the model "
            "a rebuild from the same seed on a CPU of that vendor must reproduce (CPUs of other vendors train "
            "other weights, each pinned in turn)."
        ), ""
    return text + (
        f"The package pins {', '.join(served['pinned'])} for this model trained on this CPU's vendor "
        "(bracket.embedded.MODEL_SHA256): these are other weights, so the figures here are not those of "
        "the published model, and a reproduction against them refuses to compare."
    ), "warn"
