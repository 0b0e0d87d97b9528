"""SLURM job names (bracket.cluster.slurm_names) and the profile's site settings from $BRACKET_SLURM.

Unit tests against the installed executor plugin's own submit and query builders (no cluster);
tests/test_slurm.py reads the names back from a real controller."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from bracket.cluster import slurm_names
from configargparse import ConfigFileParserException
from conftest import ROOT
from snakemake.profiles import ProfileConfigFileParser

PROFILE = ROOT / "workflow" / "profiles" / "slurm" / "config.yaml"


def test_labels_say_experiment_and_block():
    assert slurm_names.label([("block", {"exp": "smoke", "k": "3"})]) == "smoke.block3"
    # a host's blocks in one allocation (cluster.allocation: per_host): first and last position
    assert slurm_names.label([("block", {"exp": "smoke", "k": k}) for k in ("4", "0", "2")]) == "smoke.blocks0-4"
    assert slurm_names.label([("analyze", {"exp": "smoke"})]) == "smoke.analyze"
    assert slurm_names.label([("embedded_model", {})]) == "embedded_model"


def test_the_status_query_asks_for_every_name_the_run_gave():
    import snakemake_executor_plugin_slurm as plugin

    assert slurm_names.install() and slurm_names.install()  # twice: the Snakefile is read in every job
    job = SimpleNamespace(
        is_group=lambda: False,
        rule=SimpleNamespace(name="block"),
        name="block",
        wildcards={"exp": "smoke", "k": "3"},
        resources=SimpleNamespace(get=lambda k, d=None: d),
        threads=1,
    )
    params = {
        "run_uuid": "RID-1",
        "slurm_logfile": "x.log",
        "comment_str": "rule_block_wildcards_smoke_3",
        "account": "-A acc",
        "partition": "",
        "workdir": "/w",
    }
    call = plugin.get_submit_command(job, params)
    assert "--job-name smoke.block3.RID-1 " in call and "RID-1 " not in call.replace("smoke.block3.RID-1 ", "")
    for query in (plugin.query_job_status_sacct("RID-1"), plugin.query_job_status_squeue("RID-1")):
        assert "--name RID-1,smoke.block3.RID-1" in query, query
    # another run's names are not asked for
    assert "--name RID-2" in plugin.query_job_status_sacct("RID-2")


def parse(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("BRACKET_SLURM", raising=False)
    else:
        monkeypatch.setenv("BRACKET_SLURM", value)
    with open(PROFILE) as f:
        return ProfileConfigFileParser().parse(f)


def test_site_settings_from_the_environment_join_the_profiles_defaults(monkeypatch):
    assert parse(monkeypatch, None)["default-resources"] == ["runtime=30", "mem_mb=4000"]
    got = parse(monkeypatch, "slurm_account=lab slurm_partition=gpu mem_mb=8000")["default-resources"]
    assert got == ["runtime=30", "mem_mb=8000", "slurm_account=lab", "slurm_partition=gpu"]
    assert parse(monkeypatch, "")["group-components"] == ["blocks=10000"]


def test_a_malformed_site_setting_is_named_with_the_fix(monkeypatch):
    with pytest.raises(ConfigFileParserException, match=r"BRACKET_SLURM holds 'lab': give KEY=VALUE pairs"):
        parse(monkeypatch, "lab")
