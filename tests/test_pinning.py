"""CPU pinning of the embedded engine (bracket.measure.pinning): who runs where, and when it stays out of the way."""

import contextlib
import json
import os
import shutil
from pathlib import Path

import pytest
from bracket import records
from bracket.block import runner
from bracket.experiment import design
from bracket.experiment.config import validate
from bracket.measure import pinning, priority, session

ROOT = Path(__file__).resolve().parents[1]
needs_two = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2 or not shutil.which("taskset"),
    reason="needs two cores and taskset",
)


def _cfg(**engine):
    return validate({"engine": {"kind": "vllm", "launch": "native", "embedded": True, **engine}, "arms": {"a": {}}})


def _arm(**arm):
    """An arm as validated (an entry of experiment.arms)."""
    return validate({"engine": {"kind": "vllm", "launch": "native", "embedded": True}, "arms": {"a": arm}}).arms["a"]


@needs_two
def test_the_embedded_engine_computes_on_its_own_cores_and_everything_else_runs_on_the_last():
    cpus = sorted(os.sched_getaffinity(0))
    assert pinning.plan(_cfg()) is None  # opt-in: engine.pin_cpus defaults to off
    p = pinning.plan(_cfg(pin_cpus="auto"))
    assert p == pinning.Pinning(compute=",".join(map(str, cpus[:-1])), reserved=str(cpus[-1]))
    assert pinning.server_argv(p, ["python", "-m", "vllm"]) == ["taskset", "-c", str(cpus[-1]), "python", "-m", "vllm"]
    assert pinning.server_env(p) == {"VLLM_CPU_OMP_THREADS_BIND": p.compute}
    before = os.sched_getaffinity(0)
    with pinning.client(p):
        assert os.sched_getaffinity(0) == {cpus[-1]}
    assert os.sched_getaffinity(0) == before
    # through the one server session: the command, its environment and the record
    plan = session.plan(_cfg(pin_cpus="auto"), "a", model="/m", python="/venv/bin/python", name="x")
    assert plan.argv[:3] == ["taskset", "-c", str(cpus[-1])] and plan.env["VLLM_CPU_OMP_THREADS_BIND"] == p.compute
    assert plan.pinning.record() == {"compute": p.compute, "server": p.reserved, "client": p.reserved}


def test_pinning_stays_out_of_the_way():
    assert pinning.plan(_cfg(pin_cpus="off")) is None
    assert pinning.plan(_cfg(env={"VLLM_CPU_OMP_THREADS_BIND": "0-1"})) is None  # the user's own binding
    assert (
        pinning.plan(
            validate(
                {
                    "engine": {"kind": "vllm", "launch": "native", "embedded": True},
                    "arms": {"a": {"env": {"VLLM_CPU_OMP_THREADS_BIND": "0"}}},
                }
            ),
            _arm(env={"VLLM_CPU_OMP_THREADS_BIND": "0"}),
        )
        is None
    )
    assert (
        pinning.plan(
            validate(
                {
                    "engine": {"kind": "vllm", "launch": "attach", "embedded": False, "base_url": "http://127.0.0.1:1"},
                    "arms": {"a": {}},
                }
            )
        )
        is None
    )
    assert pinning.server_argv(None, ["x"]) == ["x"] and pinning.server_env(None) == {}
    # a server started some other way (argv given) is not pinned
    assert session.plan(_cfg(pin_cpus="auto"), "a", model="/m", python="p", name="x", argv=["srv"]).pinning is None


def test_the_embedded_engine_runs_its_worker_in_the_engine_core_process_when_asked():
    n = (
        max(len(os.sched_getaffinity(0)) - 1, 1)
        if hasattr(os, "sched_getaffinity")
        else max((os.cpu_count() or 1) - 1, 1)
    )
    assert pinning.worker(_cfg()) is None  # opt-in: engine.inproc_worker defaults to off
    w = pinning.worker(_cfg(inproc_worker="auto"))
    assert w == pinning.Worker(threads=n)
    assert w.env() == {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": str(n)}
    plan = session.plan(_cfg(inproc_worker="auto"), "a", model="/m", python="/venv/bin/python", name="x")
    assert (
        plan.worker == w and plan.env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0" and plan.env["OMP_NUM_THREADS"] == str(n)
    )
    assert plan.worker.record() == {"worker": "in the engine core's process", "compute_threads": n, "env": w.env()}
    # off (the default): vLLM's own layout, nothing added to the environment
    off = session.plan(_cfg(), "a", model="/m", python="p", name="x")
    assert off.worker is None and "VLLM_ENABLE_V1_MULTIPROCESSING" not in off.env and "OMP_NUM_THREADS" not in off.env


def test_the_in_process_worker_stays_out_of_the_way():
    # the user's own process or thread layout, in the engine's env or the arm's
    for key in ("VLLM_ENABLE_V1_MULTIPROCESSING", "OMP_NUM_THREADS", "VLLM_CPU_OMP_THREADS_BIND"):
        assert pinning.worker(_cfg(inproc_worker="auto", env={key: "1"})) is None
        assert pinning.worker(_cfg(inproc_worker="auto"), _arm(env={key: "1"})) is None
    plan = session.plan(_cfg(inproc_worker="auto", env={"OMP_NUM_THREADS": "7"}), "a", model="/m", python="p", name="x")
    assert plan.worker is None and plan.env["OMP_NUM_THREADS"] == "7"
    # pinned: the compute thread's binding needs vLLM's worker process
    assert pinning.worker(_cfg(inproc_worker="auto"), None, pinning.Pinning("0", "1")) is None
    # not the embedded vLLM engine launched natively
    assert (
        pinning.worker(
            validate(
                {
                    "engine": {"kind": "vllm", "launch": "native", "embedded": False, "inproc_worker": "auto"},
                    "arms": {"a": {}},
                }
            )
        )
        is None
    )
    assert (
        pinning.worker(
            validate(
                {
                    "engine": {"kind": "llamacpp", "launch": "native", "embedded": True, "inproc_worker": "auto"},
                    "arms": {"a": {}},
                }
            )
        )
        is None
    )
    # a server started some other way (argv given)
    assert session.plan(_cfg(inproc_worker="auto"), "a", model="/m", python="p", name="x", argv=["srv"]).worker is None


def test_the_method_section_states_the_engine_layout():
    from types import SimpleNamespace

    from bracket.article.served import layout_sentence as said
    from bracket.stats.provenance import shared
    from bracket.stats.results import Provenance

    def layout_sentence(d):  # as stats.json's provenance states the blocks' layout, and the article words it
        return said(Provenance.model_construct(layout=shared(list(d.metas.values()), "engine_layout")))

    rec = pinning.Worker(threads=1).record()
    one = layout_sentence(SimpleNamespace(metas={"b0": {"engine_layout": rec}, "b1": {"engine_layout": rec}}))
    assert one == (
        " The engine ran its model inside the engine core's process on 1 compute thread "
        "(engine.inproc_worker: auto; OMP_NUM_THREADS=1, VLLM_ENABLE_V1_MULTIPROCESSING=0), so no "
        "scheduler process busy-waited on a core beside the API server and bracket's client."
    )
    assert layout_sentence(SimpleNamespace(metas={"b0": {"engine_layout": None}})) == ""
    assert layout_sentence(SimpleNamespace(metas={"b0": {}})) == ""  # blocks recorded before the key existed
    assert "differed between blocks" in layout_sentence(
        SimpleNamespace(metas={"b0": {"engine_layout": rec}, "b1": {"engine_layout": None}})
    )


def _descendants(pid: int) -> list[int]:
    out = []
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            kids = [int(c) for c in open(f"/proc/{pid}/task/{t}/children").read().split()]
        except OSError:
            continue
        for k in kids:
            out += [k, *_descendants(k)]
    return out


def _comm(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/comm").read().strip()
    except OSError:
        return ""


@pytest.mark.engine
@pytest.mark.parametrize("setting", ["auto", "off"])
def test_the_real_engine_has_no_worker_process_under_inproc_worker(setting, embedded_engine, tmp_path, monkeypatch):
    """The real embedded vLLM CPU engine: under auto no VLLM::Worker process exists (off has one), and a
    speculative request still decodes and reports its acceptance."""
    engine, model = embedded_engine
    cfg = validate(
        {
            "engine": {
                "kind": "vllm",
                "launch": "native",
                "embedded": True,
                "port": 8193,
                "inproc_worker": setting,
                "startup_timeout_s": 600,
                "nice": 3 if setting == "auto" else None,
            },
            "arms": {"ngram_4": {"speculative": {"method": "ngram", "draft_tokens": 4}}},
            "workloads": {"code": {"prompts": "experiments/prompts/code.jsonl"}},
            "design": {"kind": "abab", "rounds": 1, "runs_per_block": 2, "warmup_runs": 0, "cooldown_s": 0},
            "request": {"max_tokens": 48, "temperature": 0, "timeout_s": 120},
        }
    )
    seen: dict = {}
    real = session.serve

    @contextlib.contextmanager
    def watching(*a, **kw):
        with real(*a, **kw) as s:
            pids = [s.server.proc.pid, *_descendants(s.server.proc.pid)]
            seen["procs"] = [_comm(p) for p in pids[1:]]
            seen["nice"] = {os.getpriority(os.PRIO_PROCESS, p) for p in pids}
            seen["group"], seen["client"] = priority.autogroup_nice(pids[0]), os.getpriority(os.PRIO_PROCESS, 0)
            yield s

    monkeypatch.setattr(session, "serve", watching)
    client_group = priority.autogroup_nice("self")
    runner.run_block(
        cfg,
        "layout",
        design.Block(0, "ngram_4", 1, 1),
        1,
        raw_path=tmp_path / "r.jsonl",
        meta_path=tmp_path / "m.json",
        log_path=tmp_path / "s.log",
        model=str(model),
        python=str(engine / "bin" / "python"),
        root=ROOT,
        lock_dir=tmp_path / "locks",
    )
    meta = json.loads((tmp_path / "m.json").read_text())
    workers = [c for c in seen["procs"] if c.startswith("VLLM::Worker")]
    if setting == "auto":
        assert meta["engine_layout"]["worker"] == "in the engine core's process"
        assert meta["env"]["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
        assert workers == [], seen["procs"]
        # engine.nice: 3 (no privilege needed to lower a priority): the server's processes, its autogroup, the client
        assert seen["nice"] == {3} and seen["client"] == 3 and seen["group"] in (3, None)
        assert meta["priority"]["nice"] == 3
        if client_group is None:  # the client in no autogroup of its own (CI's runner never called setsid)
            assert meta["priority"]["client"].startswith("process nice set; autogroup not: no autogroup")
        else:
            assert meta["priority"]["client"] == "set"
    else:
        assert meta["engine_layout"] is None and len(workers) == 1, seen["procs"]
        assert meta["priority"] is None
    assert any(c.startswith("VLLM::EngineCor") for c in seen["procs"]), seen["procs"]
    recs = [r for r in records.read([tmp_path / "r.jsonl"]) if not r.get("control")]  # the arm's own
    assert len(recs) == 2 and all(r["completion_tokens"] == 48 and r["acceptance_length"] for r in recs)


def test_engine_nice_prefixes_the_server_and_is_recorded(monkeypatch):
    plan = session.plan(_cfg(nice=-5), "a", model="/m", python="/venv/bin/python", name="x")
    if shutil.which("nice"):  # the increment takes the launcher's own nice value into account
        own = os.getpriority(os.PRIO_PROCESS, 0)
        assert plan.argv[:3] == ["nice", "-n", str(-5 - own)] and plan.argv[3] == "/venv/bin/python"
        monkeypatch.setattr(os, "getpriority", lambda *a: 5)  # a workflow started under `nice -n 5`
        assert priority.nice_argv(3, ["srv"]) == ["nice", "-n", "-2", "srv"]
    assert plan.nice == -5 and plan.priority == {"nice": -5}
    assert session.plan(_cfg(), "a", model="/m", python="p", name="x").nice is None  # default: nothing changes
    assert session.plan(_cfg(nice=-5), "a", model="/m", python="p", name="x", argv=["srv"]).nice is None
    with pytest.raises(Exception, match="nice"):
        _cfg(nice=-30)


@pytest.mark.skipif(priority.autogroup_nice() is None or os.geteuid() != 0, reason="needs autogroups and root")
def test_the_client_runs_at_engine_nice_while_it_measures_and_gets_its_old_values_back():
    before, group = os.getpriority(os.PRIO_PROCESS, 0), priority.autogroup_nice()
    notes: dict = {}
    with priority.client_nice(before - 1, notes):
        assert os.getpriority(os.PRIO_PROCESS, 0) == before - 1 and priority.autogroup_nice() == before - 1
    assert notes == {"client": "set"}
    assert os.getpriority(os.PRIO_PROCESS, 0) == before and priority.autogroup_nice() == group


def test_autogroup_nice_says_why_not(tmp_path, monkeypatch):
    assert priority.set_autogroup_nice(2**22 + 12345, 0) == f"no autogroup (no process {2**22 + 12345})"
    # a process in the root group (its session never called setsid) reads an empty /proc/PID/autogroup
    empty = tmp_path / "autogroup"
    empty.write_text("")
    monkeypatch.setattr(priority, "_autogroup", lambda pid: empty)
    assert priority.autogroup_nice() is None
    flag = Path("/proc/sys/kernel/sched_autogroup_enabled")
    if flag.exists() and flag.read_text().strip() == "1":
        assert "never called setsid" in priority.set_autogroup_nice("self", 0)


def test_the_method_section_states_the_priority():
    from types import SimpleNamespace

    from bracket.article.served import priority_sentence as said
    from bracket.stats.provenance import shared
    from bracket.stats.results import Provenance

    def priority_sentence(d):  # as stats.json's provenance states the blocks' priority, and the article words it
        return said(Provenance.model_construct(priority=shared(list(d.metas.values()), "priority")))

    pr = {"nice": -10, "server": "set", "client": "set"}
    assert priority_sentence(SimpleNamespace(metas={"b0": {"priority": pr}})) == (
        " The server and bracket's client ran at nice -10, their sessions' autogroups too (engine.nice)."
    )
    denied = {"nice": -10, "server": "process nice set; autogroup not: Permission denied", "client": "set"}
    assert "not everywhere: server process nice set; autogroup not: Permission denied" in priority_sentence(
        SimpleNamespace(metas={"b0": {"priority": denied}})
    )
    assert priority_sentence(SimpleNamespace(metas={"b0": {"priority": None}, "b1": {}})) == ""
    assert "priority differed between blocks" in priority_sentence(
        SimpleNamespace(metas={"b0": {"priority": pr}, "b1": {"priority": denied}})
    )
