"""bracket.cluster.slurm_status: every terminal SLURM state ends the executor plugin's wait for the job.

The states are the ones sacct wrote on the one-node test cluster (tools/slurm_cluster.py): an
`scancel` as root read `CANCELLED by 0`, which snakemake-executor-plugin-slurm 2.8.0 does not match,
so Snakemake waited for ever. The wrapper is checked here against the plugin's own code: its status
query is replaced by one that returns sacct's real text, and the plugin's check_active_jobs must
report the job as failed with the message a user needs.
"""

import asyncio
from types import SimpleNamespace

import pytest
from bracket.cluster import slurm_status

plugin = pytest.importorskip("snakemake_executor_plugin_slurm")


@pytest.mark.parametrize(
    "raw, base",
    [
        ("CANCELLED by 0", "CANCELLED"),
        ("CANCELLED by 1000", "CANCELLED"),
        ("CANCELLED+", "CANCELLED"),
        ("TIMEOUT", "TIMEOUT"),
        ("COMPLETED", "COMPLETED"),
        (" running ", "RUNNING"),
        ("", ""),
    ],
)
def test_base_state_is_the_first_word(raw, base):
    assert slurm_status.base_state(raw) == base


def test_every_terminal_failure_reaches_a_state_the_plugin_fails_on():
    for state in slurm_status.FAILED:
        assert slurm_status.plugin_state(state) in slurm_status.PLUGIN_FAILED, state
        assert slurm_status.plugin_state(f"{state} by 0") in slurm_status.PLUGIN_FAILED, state
    # states that are not the end of a job pass through unchanged, so the plugin keeps waiting
    for state in ("PENDING", "RUNNING", "REQUEUED", "SUSPENDED", "COMPLETING", "COMPLETED"):
        assert slurm_status.plugin_state(state) == state
    # with the plugin's requeue on, SLURM brings a pre-empted or node-failed job back: keep waiting
    assert slurm_status.plugin_state("PREEMPTED", requeue=True) == "PREEMPTED"
    assert slurm_status.plugin_state("NODE_FAIL", requeue=True) == "NODE_FAIL"
    assert slurm_status.plugin_state("PREEMPTED") == "CANCELLED"


def test_the_plugins_fail_list_is_the_one_the_wrapper_assumes():
    """An upgrade of the plugin that changes its list (or fixes the bug) must be looked at again."""
    import inspect

    src = inspect.getsource(plugin.Executor.check_active_jobs)
    for state in slurm_status.PLUGIN_FAILED:
        assert f'"{state}"' in src, state
    assert '"PREEMPTED"' in src  # the plugin waits on PREEMPTED by design; the wrapper turns it into a failure


def test_failure_message_names_job_state_meaning_and_rerun():
    msg = slurm_status.failure_message(
        "812", "CANCELLED by 0", "rule block smoke_3", "snakemake --profile workflow/profiles/slurm smoke"
    )
    assert "SLURM job 812 (rule block smoke_3) ended CANCELLED by 0" in msg
    assert "cancelled" in msg and "`snakemake --profile workflow/profiles/slurm smoke`" in msg
    assert "raise cluster.runtime_min" in slurm_status.failure_message("1", "TIMEOUT", "rule block", "x")
    assert (
        slurm_status.rerun_command(["/venv/bin/snakemake", "--profile", "a b", "smoke"])
        == "snakemake --profile 'a b' smoke"
    )


class _Executor:
    """Just enough of the plugin's executor for its own check_active_jobs to run (no cluster)."""

    def __init__(self, states):
        self.states = states
        self.reported = []
        self.workflow = SimpleNamespace(
            executor_settings=SimpleNamespace(
                init_seconds_before_status_checks=40, status_attempts=1, keep_successful_logs=True, requeue=False
            )
        )
        self.status_rate_limiter = _NoLimit()
        self.run_uuid = "uuid"
        self.logger = SimpleNamespace(
            debug=lambda *a, **k: None, info=lambda *a, **k: None, warning=lambda *a, **k: None
        )
        for name in (
            "_status_query_calls",
            "_status_query_failures",
            "_status_query_total_seconds",
            "_status_query_max_seconds",
        ):
            setattr(self, name, 0)
        self._status_query_min_seconds = None
        self._status_query_cycle_rows = []
        self._preemption_warning = False
        self._failed_nodes = set()
        self.next_seconds_between_status_checks = 40

    def get_status_command(self):
        return "squeue"  # no sacct here: the plugin then reports the state without asking sacct for reasons

    def report_job_success(self, job):
        self.reported.append(("success", job.external_jobid, None))


class _NoLimit:
    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False


def _check(monkeypatch, raw_state):
    async def fake_query(command, logger):  # sacct's output for one job, as the plugin parses it
        return {"812": raw_state}, 0.01

    monkeypatch.setattr(plugin, "query_job_status", fake_query)
    monkeypatch.setattr(plugin, "get_min_job_age", lambda: 3600)
    monkeypatch.setattr(plugin, "is_query_tool_available", lambda tool: tool == "squeue")
    # the wrapper's report calls the plugin's report, whose base asks the scheduler: keep the message instead
    monkeypatch.setattr(
        plugin.Executor,
        "report_job_error",
        lambda self, j, msg=None, **kw: self.reported.append(("error", j.external_jobid, msg)),
    )
    assert slurm_status.install(SimpleNamespace(executor_settings=None))
    ex = _Executor(raw_state)
    ex.report_job_error = plugin.Executor.report_job_error.__get__(ex)
    job = SimpleNamespace(
        name="block",
        wildcards={"exp": "smoke", "k": "3"},
        wildcards_dict={},
        jobid=3,
        format_wildcards=lambda s: "",
        is_group=lambda: False,
    )
    monkeypatch.setattr(plugin, "get_job_wildcards", lambda job: "smoke_3")
    info = SimpleNamespace(external_jobid="812", job=job, aux={})

    async def run():
        return [j async for j in plugin.Executor.check_active_jobs(ex, [info])]

    still = asyncio.run(run())
    return still, ex.reported


@pytest.mark.parametrize("raw", ["CANCELLED by 0", "PREEMPTED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"])
def test_the_plugin_stops_waiting_for_a_job_that_ended(monkeypatch, raw):
    still, reported = _check(monkeypatch, raw)
    assert still == []
    ((kind, jobid, msg),) = reported
    assert kind == "error" and jobid == "812"
    assert f"SLURM job 812 (rule block smoke_3) ended {raw}" in msg and "resume with `snakemake" in msg
    assert "results/smoke/raw/failed/" in msg and "EXPERIMENT" not in msg  # the experiment, by its name


@pytest.mark.parametrize("grown, after", [(40, 20), (180, 20), (20, 20), (13, 13), (3, 3)])
def test_the_wait_between_status_checks_stops_growing_at_the_cap(monkeypatch, grown, after):
    """The plugin grows its interval by 10 s per check in which no job ended (up to 180 s); the wrapper
    holds it at STATUS_EVERY_MAX_S (20 s), so a cancel is seen within 20 s however long the block runs."""
    assert slurm_status.STATUS_EVERY_MAX_S == 20

    async def plugins_checks(self, active_jobs):
        for job in active_jobs:
            yield job
        self.next_seconds_between_status_checks = grown

    ex = SimpleNamespace(next_seconds_between_status_checks=None)

    async def run():
        return [j async for j in slurm_status.capped_checks(plugins_checks)(ex, ["a", "b"])]

    assert asyncio.run(run()) == ["a", "b"]
    assert ex.next_seconds_between_status_checks == after


class _Group:
    """A group job as the plugin's report sees it: a groupid and its member jobs."""

    groupid = "blocks-smoke-node1"

    def __init__(self, *ks):
        self.jobs = [
            SimpleNamespace(rule=SimpleNamespace(name="block"), wildcards={"exp": "smoke", "k": str(k)}) for k in ks
        ]

    def is_group(self):
        return True


def test_a_group_jobs_failure_is_printed_with_its_blocks_experiment_and_rerun(monkeypatch):
    """Snakemake's GroupJob.log_error drops the message: the wrapper logs it itself, naming the time limit."""
    said = []
    monkeypatch.setattr(plugin.Executor, "report_job_error", lambda self, j, msg=None, **kw: None)
    monkeypatch.setattr("snakemake.logging.logger.error", lambda msg, *a, **k: said.append(msg))
    assert slurm_status.install(SimpleNamespace(executor_settings=None))
    group = _Group(1, 0)
    assert slurm_status.job_experiments(group) == ["smoke"]
    assert slurm_status.job_name(group, "") == "group blocks-smoke-node1 (block smoke_0, block smoke_1)"
    msg = slurm_status.failure_message("9", "TIMEOUT", slurm_status.job_name(group, ""), "snakemake x", ["smoke"])
    assert "ended TIMEOUT: it ran past its time limit: raise cluster.runtime_min" in msg and "`snakemake x`" in msg
    plugin.Executor.report_job_error(SimpleNamespace(), SimpleNamespace(external_jobid="9", job=group), msg="why")
    assert said == ["why"]


def test_the_plugin_keeps_waiting_for_a_running_job(monkeypatch):
    still, reported = _check(monkeypatch, "RUNNING")
    assert [j.external_jobid for j in still] == ["812"] and reported == []


def test_without_the_wrapper_the_plugin_waits_for_a_cancelled_job(monkeypatch):
    """The bug itself, in the plugin as pinned: if this fails, the plugin fixed it and the wrapper can go."""

    async def fake_query(command, logger):
        return {"812": "CANCELLED by 0"}, 0.01

    monkeypatch.setattr(plugin, "query_job_status", fake_query)
    monkeypatch.setattr(plugin, "get_min_job_age", lambda: 3600)
    monkeypatch.setattr(plugin, "is_query_tool_available", lambda tool: tool == "squeue")
    ex = _Executor("CANCELLED by 0")
    ex.report_job_error = lambda j, msg=None, **kw: ex.reported.append(("error", j.external_jobid, msg))
    info = SimpleNamespace(external_jobid="812", job=SimpleNamespace(name="block"), aux={})

    async def run():
        return [j async for j in plugin.Executor.check_active_jobs(ex, [info])]

    assert [j.external_jobid for j in asyncio.run(run())] == ["812"] and ex.reported == []
