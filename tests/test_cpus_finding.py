"""bracket.stats.cpus: a block that ran on fewer CPUs than it asked is a finding in the article.

Metas as the block runner writes them (cpus_allowed from os.sched_getaffinity, cpus_online from
os.cpu_count); the cluster key as validation resolves it.
"""

from bracket.article import findings as words
from bracket.experiment import config
from bracket.stats import cpus
from bracket.stats.findings import Finding
from bracket.stats.findings import FindingKind as K


def _cluster(**given):
    return config.validate({"arms": {"A": {}}, "cluster": given}).cluster


def _meta(k, allowed, online=16, status="complete"):
    return {"block": k, "status": status, "cpus_allowed": list(range(allowed)), "cpus_online": online}


def test_a_block_pinned_to_one_core_of_a_whole_node_is_a_finding():
    # exclusive true, no count: each block asked for the whole host (16); block 1 got core 0 alone (srun -c 1)
    metas = [_meta(0, 16), _meta(1, 1), _meta(2, 16), _meta(3, 4, status="failed")]
    (f,) = cpus.findings(metas, _cluster())
    assert f.kind == K.CPUS_NARROW
    assert (f.payload.blocks, f.payload.of, f.payload.fewest, f.payload.asked, f.payload.block) == (1, 3, 1, 16, 1)
    said = words.text(f)
    assert "1 of 3 blocks ran on fewer CPUs than they asked (the whole host)" in said
    assert "block 1 could run on 1 of the 16 asked" in said and "cluster.cpus" in said
    assert Finding.of(f.record()) == f  # as stats.json keeps it, and back


def test_a_block_given_fewer_than_cluster_cpus_is_a_finding_and_the_fewest_is_named():
    metas = [_meta(0, 8), _meta(1, 6), _meta(2, 2), _meta(3, 12)]
    (f,) = cpus.findings(metas, _cluster(cpus=8, exclusive="user"))
    assert (f.payload.blocks, f.payload.of, f.payload.fewest, f.payload.asked, f.payload.block) == (2, 4, 2, 8, 2)
    assert f.payload.basis == "cluster.cpus"


def test_blocks_that_got_what_they_asked_or_stated_nothing_are_no_finding():
    assert cpus.findings([_meta(0, 16), _meta(1, 16)], _cluster()) == []
    assert cpus.findings([_meta(0, 8)], _cluster(cpus=8, exclusive="user")) == []
    # a meta from before cpus_online, or a platform without sched_getaffinity (cpus_allowed None): nothing known
    assert cpus.findings([{"block": 0, "status": "complete", "cpus_allowed": [0]}], _cluster()) == []
    assert cpus.findings([{"block": 0, "status": "complete", "cpus_allowed": None, "cpus_online": 4}], _cluster()) == []
    assert cpus.findings(None, _cluster()) == []
