"""bracket.cluster.slurm_partitions: the plugin's --slurm-partition-config places a block that asks for no CPU count.

The partitions come from a partition file read by the plugin's own reader, and the plugin's own
get_best_partition scores them; the block's resources are the ones workflow/rules/run.smk gives it
(bracket.cluster.placement: cpus_per_task -1 for cluster.cpus 0).
"""

from types import SimpleNamespace

import pytest
from bracket.cluster import placement, slurm_partitions

plugin = pytest.importorskip("snakemake_executor_plugin_slurm")
from snakemake_executor_plugin_slurm import partitions  # noqa: E402
from snakemake_interface_common.exceptions import WorkflowError  # noqa: E402

PARTITIONS = """\
partitions:
  cpu: {max_runtime: 1440, max_mem_mb: 256000, max_gpu: 0}
  gpu: {max_runtime: 1440, max_mem_mb: 512000, max_gpu: 8}
  short: {max_runtime: 10, max_mem_mb: 512000, max_gpu: 8}
"""


class _Resources(dict):
    def __getattr__(self, name):
        return self[name]


def _block(cpus=0, gpus=1):
    cluster = SimpleNamespace(cpus=cpus, gpus=gpus, exclusive=True)
    resources = _Resources(
        gpu=gpus, cpus_per_task=placement.cpus_per_task(cluster), mem_mb=3000, runtime=15, slurm_extra="--exclusive"
    )
    return SimpleNamespace(name="block", threads=1, resources=resources)


class _Log:
    def __init__(self):
        self.lines = []

    def info(self, msg):
        self.lines.append(msg)

    debug = warning = info


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "partitions.yaml"
    path.write_text(PARTITIONS)
    return partitions.read_partition_file(path)


def test_without_the_wrapper_the_plugin_refuses_the_default_block(table, monkeypatch):
    """The bug itself, in the plugin as pinned: if this fails, the plugin fixed it and the wrapper can go."""
    original = getattr(partitions.get_job_cpu_requirement, "__wrapped__", partitions.get_job_cpu_requirement)
    monkeypatch.setattr(partitions, "get_job_cpu_requirement", original)
    assert _block().resources["cpus_per_task"] == -1  # the default: no CPU count
    with pytest.raises(WorkflowError, match="cpus_per_task cannot be negative"):
        partitions.get_best_partition(table, _block(), _Log())


@pytest.mark.parametrize("gpus, best", [(1, "gpu"), (0, "cpu")])
def test_a_block_asking_no_cpu_count_gets_the_partition_its_gpus_and_runtime_fit(table, gpus, best):
    assert slurm_partitions.install() and slurm_partitions.install()  # twice: the Snakefile is read in every job
    log = _Log()
    # 15 minutes rule out `short` (10), one GPU rules out `cpu`; with no GPU the tighter memory limit wins
    assert partitions.get_best_partition(table, _block(gpus=gpus), log) == best
    assert any(f"Auto-selected partition '{best}'" in line for line in log.lines)


def test_a_block_asking_cpus_is_still_scored_on_them(table):
    slurm_partitions.install()
    assert partitions.get_job_cpu_requirement(_block(cpus=8)) == (8, "task")
    assert partitions.get_job_cpu_requirement(_block()) == (0, "none")
    assert slurm_partitions.no_cpu_count(_block()) and not slurm_partitions.no_cpu_count(_block(cpus=4))
