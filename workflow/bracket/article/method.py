"""Method and provenance: launch, versions, schedule, telemetry."""

from __future__ import annotations

import datetime as _dt
import json
import shlex

import pandas as pd

from bracket.article.advice import arm_flags
from bracket.article.elements import Heading, Para, Pre, Section, Table
from bracket.article.inputs import Data
from bracket.article.text import _missing, _n, pct, spec_words


def _utc(t) -> str:
    if _missing(t) or t is None:
        return ""
    return _dt.datetime.fromtimestamp(float(t), _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def schedule_table(d: Data) -> pd.DataFrame:
    rows = []
    seq = d.stats.get("sequential") or {}
    ran = max((x["blocks"] for x in seq.get("looks") or []), default=None)
    for b in d.schedule.itertuples(index=False):
        if ran is not None and int(b.position) >= ran:
            continue  # an adaptive design's planned round that its looks did not ask for
        m = d.metas.get(int(b.position), {})
        n = int((d.runs["position"] == b.position).sum()) if "position" in d.runs else 0
        rows.append({"position": int(b.position), "arm": b.arm, "round": int(b.round), "seed": int(b.seed),
                     "status": m.get("status", "not run"), "ready (s)": m.get("ready_s", ""),
                     "started (UTC)": _utc(m.get("started_at")), "server": m.get("server_id", ""), "requests": n})
    return pd.DataFrame(rows)


def _versions(d: Data) -> list[str]:
    vs = []
    for m in d.metas.values():
        v = m.get("version")
        try:
            v = json.loads(v).get("version", v) if isinstance(v, str) and v.startswith("{") else v
        except (ValueError, AttributeError):
            pass
        if v and str(v) not in vs:
            vs.append(str(v))
    return vs


def cache_sentence(d: Data) -> str:
    """How the prefix cache was checked, run by run (records.cache_check, counted in stats.json guards)."""
    from bracket import records

    g = d.stats.get("guards") or records.guards(d.runs)
    checks = g.get("cache_checks") or {}
    found = next((m["engine_identified"] for m in d.metas.values() if m.get("engine_identified")), None)
    from bracket.engines.identify import NAMES

    who = (NAMES.get(found.get("kind"), found.get("kind")) + (f" {found['version']}" if found.get("version") else "")
           if found else "the server")
    ways = []
    if checks.get("reported"):
        ways.append(f"{_n(checks['reported'], 'timed run')} by the cached tokens {who} reported in its response")
    if checks.get("metrics"):
        ways.append(f"{_n(checks['metrics'], 'timed run')} by {who}'s prefix-cache hit counters on /metrics "
                    f"(vllm:prefix_cache_hits), read just before and after each single-stream request")
    if checks.get("unique prefix"):
        ways.append(f"{_n(checks['unique prefix'], 'timed run')} not directly: {who} reported no cached tokens (cache "
                    f"not reported), so they rest on their prefixes, each unique in the experiment")
    if not ways:
        return ""
    hits = g.get("cache_hits") or 0
    return ("Cache check: " + "; ".join(ways) + "."
            + (f" {_n(hits, 'run')} showed a cache hit and {'is' if hits == 1 else 'are'} invalid." if hits else ""))


def launch_sentence(d: Data) -> str:
    """How the server was started, from the blocks' provenance (attach mode changes what a block means)."""
    launches = {m.get("launch") for m in d.metas.values()} or {d.cfg.get("engine", {}).get("launch")}
    if launches == {"attach"}:
        return ("The server was started by hand and only attached to: it was not restarted between blocks, so "
                "every arm ran with the same server flags, and each block flushed the prefix cache where the "
                "engine allows it" + ("" if not any(m.get("warnings") for m in d.metas.values())
                                      else " (see the warnings below: a flush failed)") + ".")
    if launches == {"docker"}:
        return "A fresh container was started for each block and removed after it."
    return ("A fresh server process was launched for each block and stopped after it." + layout_sentence(d)
            + pinning_sentence(d) + priority_sentence(d))


def priority_sentence(d: Data) -> str:
    """The server's and the client's nice value (engine.nice), from provenance."""
    prios = {json.dumps(m.get("priority"), sort_keys=True) for m in d.metas.values()}
    if not d.metas or prios == {"null"}:
        return ""
    if len(prios) > 1:
        return " The server's priority differed between blocks: see each block's provenance (priority)."
    pr = json.loads(prios.pop())
    how = [f"{who} {pr[who]}" for who in ("server", "client") if pr.get(who, "set") != "set"]
    return (f" The server and bracket's client ran at nice {pr['nice']}, their sessions' autogroups too "
            f"(engine.nice)" + (f"; not everywhere: {'; '.join(how)}" if how else "") + ".")


def layout_sentence(d: Data) -> str:
    """Where the embedded vLLM engine ran its model (bracket.pinning.worker), from provenance."""
    lays = {json.dumps(m.get("engine_layout"), sort_keys=True) for m in d.metas.values()}
    if not d.metas or lays == {"null"}:
        return ""
    if len(lays) > 1:
        return " The engine's process layout differed between blocks: see each block's provenance (engine_layout)."
    w = json.loads(lays.pop())
    n = w["compute_threads"]
    return (f" The engine ran its model inside the engine core's process on {n} compute thread{'s' if n != 1 else ''} "
            f"(engine.inproc_worker: auto; {', '.join(f'{k}={v}' for k, v in sorted(w['env'].items()))}), so no "
            f"scheduler process busy-waited on a core beside the API server and bracket's client.")


def pinning_sentence(d: Data) -> str:
    """Where the engine's compute, its other processes and the client ran (bracket.pinning), from provenance."""
    pins = {json.dumps(m.get("pinning"), sort_keys=True) for m in d.metas.values()}
    if not d.metas or pins == {"null"}:
        return ""
    if len(pins) > 1:
        return " CPU pinning differed between blocks: see each block's provenance (pinning)."
    p = json.loads(pins.pop())
    return (f" Its compute thread(s) ran on core(s) {p['compute']} alone; the server's other processes and "
            f"bracket's client on core(s) {p['server']} (engine.pin_cpus: auto).")


def _span3(x: dict | None, digits: int = 0) -> str:
    if not x:
        return ""
    lo, med, hi = (x.get(k) for k in ("min", "median", "max"))
    if lo == hi:
        return f"{lo:.{digits}f}"
    return f"{lo:.{digits}f}–{med:.{digits}f}–{hi:.{digits}f}"


def telemetry_table(d: Data) -> pd.DataFrame:
    """Per block: what the accelerator did while it was measured (NVML samples in each block's meta)."""
    rows = []
    for pos in sorted(d.metas):
        m = d.metas[pos]
        tel = m.get("telemetry")
        if not isinstance(tel, dict) or not tel.get("n"):
            continue
        power = tel.get("power_w") or {}
        rows.append({"block": pos, "arm": m.get("arm"), "round": m.get("round"), "device": tel.get("name"),
                     "samples": tel.get("n"), "SM clock MHz (min–median–max)": _span3(tel.get("sm_clock_mhz")),
                     "memory clock MHz": _span3(tel.get("mem_clock_mhz")),
                     "temperature °C (min–median–max)": _span3(tel.get("temp_c")),
                     "power W, median (max)": f"{power['median']:.0f} ({power['max']:.0f})" if power else "",
                     "GPU busy %, median": (tel.get("util_gpu_pct") or {}).get("median"),
                     "throttle reasons": ", ".join(tel.get("throttle_reasons_seen") or []) or "none",
                     "sm_min": (tel.get("sm_clock_mhz") or {}).get("min"),
                     "sm_max": (tel.get("sm_clock_mhz") or {}).get("max")})
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
        s.add(Para(f"The SM clock held at {lo:.0f} MHz in every block, with no throttle reason other than idle: the "
                   "differences between blocks are not the clock's."))
    else:
        s.add(Para(f"The SM clock ranged {lo:.0f}–{hi:.0f} MHz across blocks"
                   + (f", and the GPU reported throttling ({', '.join(sorted(set(busy)))})" if busy else "")
                   + ": blocks ran at different speeds of the machine itself; read the drift section with this in "
                   "mind.", "warn"))
    s.add(Table(t.drop(columns=["sm_min", "sm_max"]), "NVML samples per block, taken while the block ran",
                "telemetry.csv"))
    return s


def section_method(d: Data) -> Section:
    cfg, des = d.cfg, d.cfg.get("design", {})
    s = Section([Heading("How these numbers were taken")])
    n_blocks = len(schedule_table(d))
    seq = d.stats.get("sequential")
    rounds = (f"adaptive: {_n(seq['rounds_run'], 'round')} run of {des.get('min_rounds')} to {des.get('max_rounds')} "
              f"(see the looks)" if seq else _n(des.get('rounds'), 'round'))
    s.add(Para(f"Design: {des.get('kind')}, {rounds}, {n_blocks} blocks in the order below, drawn "
               f"once with seed {des.get('seed')} and recorded. Each block served one arm and ran, per workload, "
               f"{_n(des.get('warmup_runs'), 'warmup run')} and {_n(des.get('runs_per_block'), 'timed run')}; "
               f"{des.get('cooldown_s')} s of cooldown between blocks. " + launch_sentence(d)))
    req = cfg.get("request", {})
    s.add(Para(f"Requests: max_tokens {req.get('max_tokens')}, temperature {req.get('temperature')}, seed "
               f"{req.get('seed')}; " + ("each prompt carried a unique prefix, so the prefix cache could not engage. "
                                         if req.get("unique_prefix") else
                                         "prompts were sent without a unique prefix, so the prefix cache could engage. ")
               + "Decode rate = completion_tokens / wall time of the request, never stream events."))
    cache = cache_sentence(d)
    if cache:
        s.add(Para(cache))
    s.add(Table(schedule_table(d), "The schedule as it ran", "schedule.csv"))
    tel = section_telemetry(d)
    if tel is not None:
        s.add(*tel.items)
    eng = cfg.get("engine", {})
    vs = _versions(d)
    plat = sorted({str(m.get("platform")) for m in d.metas.values() if m.get("platform")})
    s.add(Para(f"Engine: {eng.get('kind')}" + (" (embedded: vLLM's CPU build serving a tiny model built locally)"
                                                 if eng.get("embedded") else "")
               + (f", version {', '.join(vs)}" if vs else "") + (f", on {', '.join(plat)}" if plat else "") + "."))
    arm_rows = []
    for arm in d.arms:
        a = cfg.get("arms", {}).get(arm) or {}
        sp = a.get("speculative")
        arm_rows.append({"arm": arm, "label": a.get("label", ""), "speculative": spec_words(sp, eng.get("kind")),
                         "extra args": shlex.join(a.get("args") or []), "flags as launched": arm_flags(d, arm)})
    s.add(Table(pd.DataFrame(arm_rows), "Arms", "arms.csv"))
    first = {}
    for pos in sorted(d.metas):
        first.setdefault(d.metas[pos].get("arm"), d.metas[pos])
    for arm, m in first.items():
        if m.get("argv"):
            env = " ".join(f"{k}={v}" for k, v in (m.get("env") or {}).items())
            s.add(Para(f"Launch command of {arm} (block {m.get('block')}):", "note"),
                  Pre((env + " \\\n  " if env else "") + shlex.join(m["argv"])))
    failed = [m for m in d.metas.values() if m.get("status") not in (None, "complete")]
    for m in failed:
        s.add(Para(f"Block {m.get('block')} ended with status {m.get('status')}; the last lines of its log:", "warn"),
              Pre(str(m.get("log_tail") or "")))
    if d.failed_attempts:
        s.add(Para(f"{len(d.failed_attempts)} block attempt(s) failed and were run again in a fresh server; "
                   "their records are kept beside the raw values but left out of every statistic:", "warn"))
        rows = [{"block": m.get("block"), "arm": m.get("arm"), "records kept": m.get("records_kept"),
                 "file": m.get("file"), "error": str(m.get("error") or m.get("status"))[:300]}
                for m in d.failed_attempts]
        s.add(Table(pd.DataFrame(rows), "Failed block attempts", "failed_attempts.csv"))
    if d.model_dir or d.model_build:
        s.add(Heading("The model", 3))
        s.add(Para(f"Served from {d.model_dir}." if d.model_dir else "The model's directory was not named to "
                   "the report; its build record was kept beside the raw values."))
        if d.model_build:
            b = d.model_build
            s.add(Para(f"Built locally (build.json): {b.get('layers')} layers, hidden {b.get('hidden')}, vocabulary "
                       f"{b.get('vocab')}, {b.get('steps')} training steps of batch {b.get('batch')} x "
                       f"{b.get('seq_len')} tokens at lr {b.get('lr')} on {b.get('corpus', 'its corpus')}, final loss "
                       f"{b.get('final_loss', float('nan')):.2f}, seed {b.get('seed')}, {b.get('build_seconds')} s "
                       f"with torch {b.get('torch')}."
                       if "layers" in b else "Build record (build.json):"))
            if "layers" not in b:
                s.add(Pre(json.dumps(b, indent=1)))
    a = cfg.get("analysis", {})
    s.add(Para(f"Analysis: medians with {d.stats.get('resamples', a.get('bootstrap_resamples'))} bootstrap resamples "
               f"at {pct(d.stats.get('confidence', 0.95), 0)} confidence, analysis seed {d.stats.get('seed')} (each "
               f"statistic derives its own stream from it), noise threshold {pct(d.stats.get('noise_threshold'), 0)}, "
               f"spread warning above {pct(d.stats.get('spread_warning'), 0)}."))
    return s
