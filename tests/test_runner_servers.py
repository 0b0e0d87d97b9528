"""The servers of one block (bracket.block.runner): a prefix-caching arena cell gets a server of its own, a new
experiment whose arm turns the prefix cache on, and the block's first server keeps it off. Commands only: no
server is started."""

from bracket.block import runner
from bracket.experiment import arena_workload, config
from bracket.measure import session

PREFIX = {"prompts": "p.jsonl", "kind": "arena", "cache": "prefix", "depth": 512, "prompt_tokens": 64}


def _exp(**arm):
    return config.validate(
        {
            "engine": {"kind": "vllm", "embedded": False, "model": "/models/m", "port": 8051},
            "arms": {"a": arm},
            "workloads": {"single": {"prompts": "p.jsonl"}, "cached": PREFIX},
        },
        source="t",
    )


def _argv(exp):
    return session.plan(exp, "a", model="/models/m", python="python", name="x").argv


def test_a_prefix_cell_runs_in_a_second_server_launched_with_the_cache_on():
    exp = _exp(args=["--max-num-seqs", "4"])
    before = config.as_data(exp)
    (first, names0), (second, names1) = [
        (runner._with_arm(exp, "a", arm), names) for arm, names in arena_workload.servers(exp, "a")
    ]
    assert (names0, names1) == (["single"], ["cached"])
    assert first is exp  # the block's own server: the experiment as loaded
    assert second.arms["a"].server.prefix_caching is True
    assert second.arms["a"].args == exp.arms["a"].args and second.engine == exp.engine
    assert second.workloads == exp.workloads and second.design == exp.design
    assert config.as_data(exp) == before and exp.arms["a"].server is None  # the loaded experiment is left as it was
    one, two = _argv(first), _argv(second)
    assert "--no-enable-prefix-caching" in one and "--enable-prefix-caching" not in one
    assert "--enable-prefix-caching" in two and "--no-enable-prefix-caching" not in two
    assert two[two.index("--max-num-seqs") + 1] == "4"  # the arm's own flags come with it


def test_an_arm_that_turns_the_cache_on_itself_keeps_one_server():
    exp = _exp(server={"prefix_caching": True})
    ((arm, names),) = arena_workload.servers(exp, "a")
    assert names == ["single", "cached"] and runner._with_arm(exp, "a", arm) is exp
    assert "--enable-prefix-caching" in _argv(exp)
