"""CPU pinning of the embedded engine (bracket.pinning): who runs where, and when it stays out of the way."""

import os
import shutil

import pytest

from bracket import pinning, session
from bracket.config import validate

needs_two = pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2
                               or not shutil.which("taskset"), reason="needs two cores and taskset")


def _cfg(**engine):
    return validate({"engine": {"kind": "vllm", "launch": "native", "embedded": True, **engine}, "arms": {"a": {}}})


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
    assert pinning.plan(validate({"engine": {"kind": "vllm", "launch": "native", "embedded": True},
                                  "arms": {"a": {"env": {"VLLM_CPU_OMP_THREADS_BIND": "0"}}}}),
                        {"env": {"VLLM_CPU_OMP_THREADS_BIND": "0"}}) is None
    assert pinning.plan(validate({"engine": {"kind": "vllm", "launch": "attach", "embedded": False,
                                             "base_url": "http://127.0.0.1:1"}, "arms": {"a": {}}})) is None
    assert pinning.server_argv(None, ["x"]) == ["x"] and pinning.server_env(None) == {}
    # a server started some other way (argv given) is not pinned
    assert session.plan(_cfg(pin_cpus="auto"), "a", model="/m", python="p", name="x", argv=["srv"]).pinning is None
