"""Method and provenance: launch, versions, schedule, telemetry, as stats.json's `provenance` states them."""

from __future__ import annotations

import datetime as _dt
import json
import shlex

import pandas as pd

from bracket import embedded, version
from bracket.article.advice import arm_flags
from bracket.article.elements import Heading, Para, Pre, Section, Table
from bracket.article.inputs import Data
from bracket.article.neutrality import section_items as neutrality_items
from bracket.article.phases import arm_state
from bracket.article.text import _missing, _n, pct, spec_words
from bracket.engines.identify import NAMES
from bracket.stats.provenance import WeightsReading


def _utc(t) -> str:
    if _missing(t) or t is None:
        return ""
    return _dt.datetime.fromtimestamp(float(t), _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _blocks(d: Data) -> dict:
    """Each block as stats.json's provenance states it, by its number."""
    return {int(b["block"]): b for b in d.provenance.get("blocks") or [] if b.get("block") is not None}


def schedule_table(d: Data) -> pd.DataFrame:
    rows = []
    seq = d.stats.get("sequential") or {}
    ran = max((x["blocks"] for x in seq.get("looks") or []), default=None)
    blocks = _blocks(d)
    for b in d.schedule.itertuples(index=False):
        if ran is not None and int(b.position) >= ran:
            continue  # an adaptive design's planned round that its looks did not ask for
        m = blocks.get(int(b.position))
        n = int((d.runs["position"] == b.position).sum()) if "position" in d.runs else 0
        rows.append(
            {
                "position": int(b.position),
                "arm": b.arm,
                "round": int(b.round),
                "seed": int(b.seed),
                "status": (m.get("status") or "not run") if m else "not run",
                "ready (s)": m.get("ready_s", "") if m else "",
                "started (UTC)": _utc(m.get("started_at")) if m else "",
                "server": m.get("server_id", "") if m else "",
                "requests": n,
            }
        )
    return pd.DataFrame(rows)


ENGINE_NAMES = NAMES  # one table of engine names: the identifier's


def _served(d: Data) -> dict:
    return d.provenance.get("served") or {}


def served_sentence(d: Data) -> str:
    """What served the experiment, from stats.json's provenance: the engine as identified on the server
    (on attach) or as launched (the block's engine kind), its versions, how bracket reached it, and the model
    as the server named it and where its files were."""
    eng = d.experiment.get("engine", {})
    sv = _served(d)
    found = sv.get("identified")
    launch = sv.get("launch") or eng.get("launch")
    vs = sv.get("versions") or []
    if isinstance(found, dict) and found.get("kind"):
        who = ENGINE_NAMES.get(found["kind"], str(found["kind"]))
        who += f" {found['version']}" if found.get("version") else (f" {', '.join(vs)}" if vs else "")
        if found.get("evidence"):
            who += f" (identified from what it serves: {found['evidence']})"
    else:
        kind = sv.get("kind") or eng.get("kind")
        if kind in (None, "auto", "openai"):
            who = (
                "an OpenAI-compatible server"
                + (f" reporting version {', '.join(vs)}" if vs else "")
                + f" (engine.kind: {kind or 'not recorded'}; its engine was not identified)"
            )
        else:
            who = ENGINE_NAMES.get(kind, str(kind)) + (f" {', '.join(vs)}" if vs else "")
    if eng.get("embedded"):
        who += (
            " (embedded: vLLM's CPU build serving a tiny model trained locally)"
            if eng.get("kind") == "vllm"
            else " (embedded: llama-server built by the workflow serving a tiny model trained locally, as GGUF)"
            if eng.get("kind") == "llamacpp"
            else " (embedded: the tiny model trained locally)"
        )
    base = sv.get("base_url") or eng.get("base_url")
    how = {
        "attach": f", attached at {base} (started by hand; bracket started and stopped nothing)"
        if base
        else ", attached (started by hand)",
        "docker": ", in a fresh container per block",
        "native": ", a fresh process per block",
        "slurm": ", a fresh process per block",
    }.get(launch, f", launch {launch}" if launch else "")
    served = sv.get("served_model")
    # the model as the workflow resolved it, else as the blocks recorded it, else as the experiment named it
    where = sv.get("model_dir") or sv.get("model") or eng.get("model")
    if where == "embedded":
        where = None
    model = ""
    if served and where and served != where:
        model = f" Model: {served} as the server names it; its files: {where}."
    elif served or where:
        model = f" Model: {served or where}."
    return f"Served by {who}{how}." + model


def _block_list(blocks: list) -> str:
    nums = [str(b) for b in blocks if b is not None]
    return ("block " if len(nums) == 1 else "blocks ") + ", ".join(nums)


def instrument_sentence(d: Data) -> str:
    """Which bracket measured each block and which wrote the analysis, as stats.json's provenance states them
    (bracket.version records); blocks measured before bracket recorded itself are said to be unknown."""
    rec = d.provenance.get("bracket")
    if not isinstance(rec, dict):
        return (
            "Which bracket measured and analysed these numbers is not recorded: this stats.json was written "
            "before bracket recorded its own version and commit."
        )
    measured, unrecorded = rec.get("measured") or [], rec.get("unrecorded") or []
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


def _gpu_words(g: dict) -> str:
    name, mem, driver, n = g.get("name"), g.get("memory_mib"), g.get("driver"), g.get("count")
    if not (mem or driver):
        return f"{n} x {name}"
    return f"{n} x {name}" + (f" ({mem} MiB" if mem else " (") + (f", driver {driver})" if driver else ")")


def hardware_sentence(d: Data) -> str:
    """The machine each block ran on, as stats.json's provenance groups it: CPU model, cores, memory, GPUs."""
    groups = d.provenance.get("hardware") or []
    if not groups:
        return ""
    lines = []
    for g in groups:
        parts = []
        if g.get("cpu"):
            parts.append(str(g["cpu"]))
        if g.get("cpus"):
            parts.append(f"{g['cpus']} logical CPUs")
        if g.get("memory_gib"):
            parts.append(f"{g['memory_gib']} GiB memory")
        parts += [_gpu_words(x) for x in g.get("gpus") or []]
        if not g.get("gpus"):
            parts.append("no NVIDIA GPU reported")
        if g.get("kernel"):
            parts.append(f"Linux {g['kernel']}")
        hosts = g.get("hosts") or []
        lines.append((f"{', '.join(hosts)}: " if len(groups) > 1 else "") + ", ".join(parts))
    note = (
        " This is the host bracket's client ran on; an attached server elsewhere ran on its own machine."
        if _served(d).get("launch") == "attach"
        else ""
    )
    return "Hardware: " + "; ".join(lines) + "." + note


def cache_sentence(d: Data) -> str:
    """How the prefix cache was checked, run by run (records.cache_check, counted in stats.json guards)."""
    g = d.stats.get("guards") or {}
    checks = g.get("cache_checks") or {}
    found = _served(d).get("identified")
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
    hits = g.get("cache_hits") or 0
    return (
        "Cache check: "
        + "; ".join(ways)
        + "."
        + (f" {_n(hits, 'run')} showed a cache hit and {'is' if hits == 1 else 'are'} invalid." if hits else "")
    )


def launch_sentence(d: Data) -> str:
    """How the server was started, from stats.json's provenance (attach mode changes what a block means)."""
    launches = set(_served(d).get("launches") or []) or {d.experiment.get("engine", {}).get("launch")}
    if launches == {"attach"}:
        return (
            "The server was started by hand and only attached to: it was not restarted between blocks, so "
            "every arm ran with the same server flags, and each block flushed the prefix cache where the "
            "engine allows it"
            + ("" if not d.provenance.get("flush_warnings") else " (see the warnings below: a flush failed)")
            + "."
        )
    if launches == {"docker"}:
        return "A fresh container was started for each block and removed after it."
    return (
        "A fresh server process was launched for each block and stopped after it."
        + layout_sentence(d)
        + pinning_sentence(d)
        + priority_sentence(d)
    )


def _shared(d: Data, key: str) -> tuple[bool, object]:
    """(whether the blocks differed in `key`, the one value they shared: None where none was set)."""
    rec = d.provenance.get(key) or {}
    return bool(rec.get("differs")), rec.get("value")


def priority_sentence(d: Data) -> str:
    """The server's and the client's nice value (engine.nice), from stats.json's provenance."""
    differs, pr = _shared(d, "priority")
    if differs:
        return " The server's priority differed between blocks: see each block's provenance (priority)."
    if pr is None:
        return ""
    how = [f"{who} {pr[who]}" for who in ("server", "client") if pr.get(who, "set") != "set"]
    return (
        f" The server and bracket's client ran at nice {pr['nice']}, their sessions' autogroups too "
        f"(engine.nice)" + (f"; not everywhere: {'; '.join(how)}" if how else "") + "."
    )


def layout_sentence(d: Data) -> str:
    """Where the embedded vLLM engine ran its model (bracket.measure.pinning.worker), from stats.json's provenance."""
    differs, w = _shared(d, "layout")
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


def pinning_sentence(d: Data) -> str:
    """Where the engine's compute, its other processes and the client ran (bracket.measure.pinning), from
    stats.json's provenance."""
    differs, p = _shared(d, "pinning")
    if differs:
        return " CPU pinning differed between blocks: see each block's provenance (pinning)."
    if p is None:
        return ""
    return (
        f" Its compute thread(s) ran on core(s) {p['compute']} alone; the server's other processes and "
        f"bracket's client on core(s) {p['server']} (engine.pin_cpus: auto)."
    )


def command(launch: dict) -> str:
    """A block's launch command as a shell takes it (its environment, then argv; secrets were masked when
    the block recorded them)."""
    env = " ".join(f"{k}={v}" for k, v in (launch.get("env") or {}).items())
    return (env + " \\\n  " if env else "") + shlex.join(launch.get("argv") or [])


def _span3(x: dict | None, digits: int = 0) -> str:
    if not x:
        return ""
    lo, med, hi = (x.get(k) for k in ("min", "median", "max"))
    if lo == hi:
        return f"{lo:.{digits}f}"
    return f"{lo:.{digits}f}–{med:.{digits}f}–{hi:.{digits}f}"


def telemetry_table(d: Data) -> pd.DataFrame:
    """Per block: what the accelerator did while it was measured (each block's NVML summary in stats.json's
    provenance)."""
    rows = []
    blocks = _blocks(d)
    for pos in sorted(blocks):
        m = blocks[pos]
        tel = m.get("telemetry")
        if not isinstance(tel, dict) or not tel.get("n"):
            continue
        power = tel.get("power_w") or {}
        rows.append(
            {
                "block": pos,
                "arm": m.get("arm"),
                "round": m.get("round"),
                "device": tel.get("name"),
                "samples": tel.get("n"),
                "SM clock MHz (min–median–max)": _span3(tel.get("sm_clock_mhz")),
                "memory clock MHz": _span3(tel.get("mem_clock_mhz")),
                "temperature °C (min–median–max)": _span3(tel.get("temp_c")),
                "power W, median (max)": f"{power['median']:.0f} ({power['max']:.0f})" if power else "",
                "GPU busy %, median": (tel.get("util_gpu_pct") or {}).get("median"),
                "throttle reasons": ", ".join(tel.get("throttle_reasons_seen") or []) or "none",
                "sm_min": (tel.get("sm_clock_mhz") or {}).get("min"),
                "sm_max": (tel.get("sm_clock_mhz") or {}).get("max"),
            }
        )
    return pd.DataFrame(rows)


def section_telemetry(d: Data) -> Section | None:
    """The accelerator's clocks, temperature and power in every block: drift that is the machine's."""
    t = telemetry_table(d)
    if t.empty:
        return None
    s = Section([Heading("The accelerator during each block", 3)])
    lo, hi = t["sm_min"].min(), t["sm_max"].max()
    busy = [r for r in t["throttle reasons"] if r not in ("none", "gpu_idle")]
    if lo == hi and not busy:
        s.add(
            Para(
                f"The SM clock held at {lo:.0f} MHz in every block, with no throttle reason other than idle: the "
                "differences between blocks are not the clock's."
            )
        )
    else:
        s.add(
            Para(
                f"The SM clock ranged {lo:.0f}–{hi:.0f} MHz across blocks"
                + (f", and the GPU reported throttling ({', '.join(sorted(set(busy)))})" if busy else "")
                + ": blocks ran at different speeds of the machine itself; read the drift section with this in "
                "mind.",
                "warn",
            )
        )
    s.add(
        Table(
            t.drop(columns=["sm_min", "sm_max"]), "NVML samples per block, taken while the block ran", "telemetry.csv"
        )
    )
    return s


def model_hash_sentence(served: dict | None) -> tuple[str, str] | None:
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


def _x(span: list | None, digits: int = 2) -> str:
    """A factor or its range: x1.12, or x1.05-1.43."""
    lo, hi = span
    return f"x{lo:.{digits}f}" if round(lo, digits) == round(hi, digits) else f"x{lo:.{digits}f}-{hi:.{digits}f}"


def conservatism_sentence(d: Data) -> str | None:
    """Where the comparisons' intervals get their width, against an oracle's that knew the noise (stats.json
    `conservatism`, bracket.stats.conservatism): every factor as it ran; None for a file without it."""
    c = d.stats.get("conservatism")
    if not c:
        return None
    conf = d.stats.get("confidence", 0.95)
    df = c["df"]
    dfs = f"{df[0]:g}" if df[0] == df[1] else f"{df[0]:g}-{df[1]:g}"
    parts = [
        f"the t quantile on {dfs} degrees of freedom ({_x(c['df_factor'])}: the noise is estimated "
        f"from the blocks and requests that ran, not known)"
    ]
    if c["level_factor"][1] > 1.005:
        why = (
            "the adaptive design's repeated-CI boundary at its looks"
            if d.stats.get("sequential")
            else f"the multiplicity of {_n(d.stats.get('multiplicity', {}).get('comparisons'), 'comparison')} (Holm)"
        )
        parts.append(
            f"the level each interval is drawn at, up to {pct(c['level'][1], 2)} for {why} ({_x(c['level_factor'])})"
        )
    if c["drift_fits"]:
        parts.append(
            f"the drift term in {c['drift_fits']} of {c['comparisons']} fits ({_x(c['drift_factor'])}: time "
            "takes a degree of freedom and shares the arm's variance)"
        )
    pooled = c["pooled"] + c["floored"]
    if pooled and c.get("median_factor"):
        rpb = c["runs_per_block"]
        runs = f"{rpb[0]:.0f}" if round(rpb[0]) == round(rpb[1]) else f"{rpb[0]:.0f}-{rpb[1]:.0f}"
        how = " and ".join(
            x
            for x in (
                f"{c['pooled']} pooled block and request noise (blocks agreed within it)" if c["pooled"] else "",
                f"{c['floored']} took request noise as the floor of a one-df block variance" if c["floored"] else "",
            )
            if x
        )
        parts.append(
            f"request noise's part of the variance where {how}: it is taken as (pi/2) sigma^2 / n, a "
            f"median's large-sample variance, which at {runs} runs per block is "
            f"{_x(c['median_factor'])} a block median's variance under normal noise (at most "
            f"{_x([v**0.5 for v in c['median_factor']])} on the width)"
        )
    head = (
        f"Where the comparisons' intervals get their width, against the {pct(conf, 0)} interval of an oracle "
        f"that knew how much servers and requests vary: "
        + "; ".join(parts)
        + f". Degrees of freedom, level and drift term together make the intervals {_x(c['total'])} as wide "
        "as an oracle's."
    )
    if c["band_raised"]:
        head += (
            f" Besides, a verdict's interval must clear the noise band, which the fitted drift raised above the "
            f"{pct(c['threshold'], 0)} threshold in {c['band_raised']} of {c['comparisons']} comparisons "
            f"(to {pct(c['band_max'])} at most)."
        )
    if c["pooled"]:
        head += (
            " Each guards against a false verdict when blocks disagree more than they appear to; where they "
            "agree closely, as in the pooled fits here, the intervals cover the truth more often than they state "
            "(the H200 regime of bench/results/design_efficiency.md, section 2)."
        )
    return head


def gap_sentence(d: Data) -> str | None:
    """How far apart the blocks followed each other (stats.json `gaps`), against the design's cooldown."""
    g = d.stats.get("gaps")
    if not g:
        return None
    return (
        f"Blocks followed each other after a median gap of {g['median_s']:.1f} s (max {g['max_s']:.1f} s), "
        f"from one block's end to the next one's server start on its host; the design's cooldown is "
        f"{g['cooldown_s']:g} s"
        + (
            f", and {g['over']} of {g['n']} gaps exceeded it by more than {g['excess_s']:g} s."
            if g.get("over")
            else "."
        )
    )


def _per_block(ran: dict, key: str, noun: str) -> str:
    """ "3 timed runs", or "2 to 3 timed runs" where a block ran short (stats.json's design_ran)."""
    lo, hi = ran.get(f"{key}_min"), ran.get(f"{key}_max")
    return _n(hi, noun) if lo == hi else f"{lo} to {_n(hi, noun)}"


def section_method(d: Data) -> Section:
    exp, des = d.experiment, d.experiment.get("design", {})
    s = Section([Heading("How these numbers were taken")])
    n_blocks = len(schedule_table(d))
    seq = d.stats.get("sequential")
    # what ran, counted in the runs (bracket.stats.design_ran); the plan only for a table without blocks
    ran = d.stats.get("design_ran") or {
        "rounds": des.get("rounds"),
        **{f"{k}_{e}": des.get(k) for k in ("runs_per_block", "warmup_runs") for e in ("min", "max")},
    }
    first = seq.get("first_look", des.get("min_rounds")) if seq else None
    rounds = (
        f"adaptive: {_n(seq['rounds_run'], 'round')} run of {first} to {des.get('max_rounds')}, the first look "
        f"after round {first} (see the looks)"
        if seq
        else _n(ran["rounds"], "round")
    )
    s.add(
        Para(
            f"Design: {des.get('kind')}, {rounds}, {n_blocks} blocks in the order below, drawn "
            f"once with seed {des.get('seed')} and recorded. Each block served one arm and ran, per workload, "
            f"{_per_block(ran, 'warmup_runs', 'warmup run')} and {_per_block(ran, 'runs_per_block', 'timed run')}; "
            f"{des.get('cooldown_s')} s of cooldown between blocks. " + launch_sentence(d)
        )
    )
    gaps = gap_sentence(d)
    if gaps:
        s.add(Para(gaps))
    req = exp.get("request", {})
    s.add(
        Para(
            f"Requests: max_tokens {req.get('max_tokens')}, temperature {req.get('temperature')}, seed "
            f"{req.get('seed')}; "
            + (
                "each prompt carried a unique prefix, so the prefix cache could not engage. "
                if req.get("unique_prefix")
                else "prompts were sent without a unique prefix, so the prefix cache could engage. "
            )
            + "Decode rate = completion_tokens / wall time of the request, never stream events."
        )
    )
    s.add(*neutrality_items(d))
    cache = cache_sentence(d)
    if cache:
        s.add(Para(cache))
    s.add(Table(schedule_table(d), "The schedule as it ran", "schedule.csv"))
    tel = section_telemetry(d)
    if tel is not None:
        s.add(*tel.items)
    eng = exp.get("engine", {})
    prov = d.provenance
    plat = _served(d).get("platforms") or []
    s.add(Para(served_sentence(d) + (f" Platform: {', '.join(plat)}." if plat else "")))
    s.add(Para(instrument_sentence(d)))
    hw = hardware_sentence(d)
    if hw:
        s.add(Para(hw))
    served = model_hash_sentence(prov.get("weights_served"))
    if served:
        s.add(Para(served[0], served[1]))
    arm_rows = []
    for arm in d.arms:
        a = d.arm_config(arm)
        sp = a.get("speculative")
        arm_rows.append(
            {
                "arm": arm,
                "label": a.get("label", ""),
                "speculative": spec_words(sp, eng.get("kind")),
                "extra args": shlex.join(a.get("args") or []),
                "flags as launched": arm_flags(d, arm),
                "server state": arm_state(d, arm),
            }
        )
    s.add(
        Table(
            pd.DataFrame(arm_rows),
            "Arms, and the state each one's server kept between requests (as launched)",
            "arms.csv",
        )
    )
    if prov.get("arm_states_differ"):
        s.add(
            Para(
                "The arms ran with different server state (the arms table's last column): their TTFT, and with it "
                "the decode rate, differ for that reason as well as for the arm's own.",
                "warn",
            )
        )
    launches = sorted(
        (a for a in prov.get("arms") or [] if a.get("launch") and a["launch"].get("argv")),
        key=lambda a: a["launch"].get("block") or 0,
    )
    for a in launches:
        s.add(Para(f"Launch command of {a['arm']} (block {a['launch']['block']}):", "note"), Pre(command(a["launch"])))
    for b in prov.get("blocks") or []:
        if b.get("status") not in (None, "complete"):
            s.add(
                Para(f"Block {b.get('block')} ended with status {b.get('status')}; the last lines of its log:", "warn"),
                Pre(str(b.get("log_tail") or "")),
            )
    attempts = prov.get("failed_attempts") or []
    if attempts:
        s.add(
            Para(
                f"{len(attempts)} block attempt(s) failed and were run again in a fresh server; "
                "their records are kept beside the raw values but left out of every statistic:",
                "warn",
            )
        )
        rows = [
            {
                "block": m.get("block"),
                "arm": m.get("arm"),
                "records kept": m.get("records_kept"),
                "file": m.get("file"),
                "error": str(m.get("error") or m.get("status"))[:300],
            }
            for m in attempts
        ]
        s.add(Table(pd.DataFrame(rows), "Failed block attempts", "failed_attempts.csv"))
    model_dir = _served(d).get("model_dir")
    b = prov.get("model_build")
    if model_dir or b:
        s.add(Heading("The model", 3))
        if model_dir:
            s.add(Para(f"Its files: {model_dir}."))
        if b:
            s.add(
                Para(
                    f"Built locally (build.json): {b.get('layers')} layers, hidden {b.get('hidden')}, vocabulary "
                    f"{b.get('vocab')}, {b.get('steps')} training steps of batch {b.get('batch')} x "
                    f"{b.get('seq_len')} tokens at lr {b.get('lr')} on {b.get('corpus', 'its corpus')}, "
                    + (
                        f"final loss {b['final_loss']:.2f}"
                        if isinstance(b.get("final_loss"), (int, float))
                        else "untrained (no final loss)"
                    )
                    + f", seed {b.get('seed')}, {b.get('build_seconds')} s "
                    f"with torch {b.get('torch')}."
                    if "layers" in b
                    else "Build record (build.json):"
                )
            )
            if "layers" not in b:
                s.add(Pre(json.dumps(b, indent=1)))
    s.add(
        Para(
            f"Analysis: medians with {d.stats.get('resamples')} bootstrap resamples "
            f"at {pct(d.stats.get('confidence', 0.95), 0)} confidence, analysis seed {d.stats.get('seed')} (each "
            f"statistic derives its own stream from it), noise threshold {pct(d.stats.get('noise_threshold'), 0)}, "
            f"spread warning above {pct(d.stats.get('spread_warning'), 0)}."
        )
    )
    width = conservatism_sentence(d)
    if width:
        s.add(Para(width))
    return s
