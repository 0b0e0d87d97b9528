"""bracket.cluster.placement: what a block asks of SLURM, from the experiment's cluster: key.

Expected strings are what SLURM 22.05 needs for each intent (measured on the one-node test cluster,
tools/slurm_cluster.py with task/affinity): --exclusive holds every CPU and GPU of the node, so its
job step must ask no CPU count to run on them all; --exclusive=user holds only what was asked.
"""

import pytest
from bracket.cluster import placement
from bracket.experiment import config


def test_the_whole_node_by_default_and_no_nice():
    cluster = config.validate({"arms": {"A": {}}}).cluster
    assert placement.exclusive_mode(cluster) == "node"
    assert placement.slurm_extra(cluster, "node7") == "--exclusive --nodelist=node7"
    assert placement.slurm_extra(cluster, "") == "--exclusive"
    assert placement.cpus_per_task(cluster) == -1  # the plugins then pass no -c: the step sees the whole node


@pytest.mark.parametrize(
    "exclusive, mode, extra", [(True, "node", "--exclusive"), ("user", "user", "--exclusive=user"), (False, "none", "")]
)
def test_exclusive_modes(exclusive, mode, extra):
    cluster = config.validate({"arms": {"A": {}}, "cluster": {"exclusive": exclusive, "cpus": 8}}).cluster
    assert placement.exclusive_mode(cluster) == mode
    assert placement.slurm_extra(cluster, "") == extra
    assert placement.cpus_per_task(cluster) == 8  # a named count reaches sbatch and the step alike


def test_a_bad_exclusive_value_names_the_choices():
    with pytest.raises(config.ExperimentError, match="exclusive"):
        config.validate({"arms": {"A": {}}, "cluster": {"exclusive": "yes"}})
    with pytest.raises(config.ExperimentError, match="cpus"):
        config.validate({"arms": {"A": {}}, "cluster": {"cpus": -2}})
    with pytest.raises(ValueError, match="use true .* 'user' .* false"):
        # a value validation would refuse, reaching placement another way (model_copy does not validate)
        cluster = config.validate({"arms": {"A": {}}}).cluster
        placement.exclusive_mode(cluster.model_copy(update={"exclusive": "yes"}))


@pytest.mark.parametrize("exclusive", ["user", False])
def test_a_block_that_does_not_hold_its_node_must_name_its_cpus(exclusive):
    """exclusive user or false without cpus gets the site's default CPU count (often one): refused, naming the fix."""
    with pytest.raises(config.ExperimentError) as e:
        config.validate({"arms": {"A": {}}, "cluster": {"exclusive": exclusive}})
    said = str(e.value)
    assert f"cluster.exclusive is {'user' if exclusive else 'false'} and cluster.cpus is 0" in said
    assert "Set cluster.cpus" in said and "cluster.exclusive: true" in said
    for fine in ({"exclusive": exclusive, "cpus": 4}, {"exclusive": True}, {}):
        assert placement.problems(config.validate({"arms": {"A": {}}, "cluster": fine}).cluster) == []
