"""Experiment files: defaults filled, and every mistake named with its fix before anything runs."""

import pytest
from bracket.experiment import config
from bracket.experiment import schema as exp_schema
from bracket.experiment.config import ExperimentError
from conftest import ROOT


def test_shipped_experiments_validate_and_fill_defaults():
    for path in sorted((ROOT / "experiments").glob("*.yaml")):
        if path.stem.endswith(".corrections"):
            continue
        cfg = config.load(path)
        config.check_prompt_files(cfg, ROOT)
        assert cfg.reference in cfg.arms
        assert cfg.design.kind in ("abab", "abba", "bracket", "random", "sequential")


def test_defaults_come_from_the_schema():
    cfg = config.validate({"arms": {"a": {}, "b": {"speculative": {"method": "ngram", "draft_tokens": 3}}}})
    assert cfg.reference == "a"  # first arm when not given
    assert config.as_data(cfg.design) == {
        "kind": "abab",
        "rounds": 5,
        "runs_per_block": 5,
        "warmup_runs": 1,
        "cooldown_s": 5,
        "seed": 1,
    }
    assert cfg.request.max_tokens == 256 and cfg.request.unique_prefix is True
    assert cfg.arms["b"].speculative.prompt_lookup_min == 2
    assert cfg.engine.host == "127.0.0.1"


def test_every_schema_key_has_type_default_or_requirement_and_description():
    schema = exp_schema.load_schema()

    def walk(node, path):
        for key, sub in node.get("properties", {}).items():
            assert "description" in sub, f"{path}.{key} has no description"
            assert "type" in sub or "enum" in sub, f"{path}.{key} has no type"
            walk(sub, f"{path}.{key}")
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            walk(extra, f"{path}.*")

    walk(schema, "")


@pytest.mark.parametrize(
    "raw, needles",
    [
        ({"arms": {"a": {}}, "desing": {}}, ["unknown key 'desing'", "did you mean 'design'", "Allowed keys"]),
        ({"arms": {"a": {}}, "design": {"kind": "abcd"}}, ["design.kind", "'abcd'", "'abab'", "'bracket'"]),
        ({"arms": {"a": {}}, "design": {"rounds": "two"}}, ["design.rounds", "integer", "'two'"]),
        ({"arms": {"a": {}}, "reference": "base"}, ["reference is 'base'", "no arm has that name", "Defined arms: a"]),
        (
            {"arms": {"a": {"speculative": {"method": "ngram", "draft_tokens": 0}}}},
            ["arms.a.speculative.draft_tokens", "out of range", "minimum 1"],
        ),
        ({"arms": {"a": {"speculative": {"method": "ngram"}}}}, ["arms.a.speculative", "draft_tokens"]),
        ({"arms": {"a": {"speculative": {"method": "dflash", "draft_tokens": 8}}}}, ["needs a draft model"]),
        ({"arms": {}}, ["arms"]),
    ],
)
def test_bad_experiments_are_named_with_their_fix(raw, needles):
    with pytest.raises(ExperimentError) as err:
        config.validate(raw, source="experiments/x.yaml")
    msg = str(err.value)
    assert msg.startswith("experiments/x.yaml")
    for needle in needles:
        assert needle in msg, msg


def test_bad_yaml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("arms: {a: {}\n  design: [")
    with pytest.raises(ExperimentError, match="not valid YAML"):
        config.load(bad)
    with pytest.raises(ExperimentError, match="no experiment file"):
        config.load(tmp_path / "nope.yaml")


def test_missing_prompt_file_is_named(tmp_path):
    cfg = config.validate({"arms": {"a": {}}, "workloads": {"code": {"prompts": "nope.jsonl"}}})
    with pytest.raises(ExperimentError, match=r"workloads.code.prompts names 'nope.jsonl'"):
        config.check_prompt_files(cfg, tmp_path)


def test_without_defaults_keeps_only_what_the_experiment_states():
    cfg = config.validate(
        {
            "arms": {"a": {}, "b": {"speculative": {"method": "ngram", "draft_tokens": 3}}},
            "engine": {"port": 9000},
            "request": {"max_tokens": 256},
        }
    )
    engine = config.without_defaults(cfg.engine, exp_schema.schema_of("engine"))
    assert engine == {"port": 9000}  # kind, host, embedded... equal their defaults
    assert config.without_defaults(cfg.request, exp_schema.schema_of("request")) == {}
    arm_b = config.without_defaults(cfg.arms["b"], exp_schema.schema_of("arms", "*"))
    assert arm_b == {"speculative": {"method": "ngram", "draft_tokens": 3}}
    assert config.without_defaults(cfg.arms["a"], exp_schema.schema_of("arms", "*")) == {}


def test_server_state_is_named_per_engine_and_fresh_by_default():
    """prefix_caching: left out means bracket's fresh-cache setting on every engine with a switch."""
    node = exp_schema.schema_of("arms", "*", "server", "prefix_caching")
    assert node["default"] is None
    for flag in (
        "--no-enable-prefix-caching",
        "--disable-radix-cache",
        "--no-cache-prompt --cache-ram 0",
        "cache_prompt false",
        "Ollama has no switch",
    ):
        assert flag in node["description"], flag
    cfg = config.validate({"arms": {"a": {}, "cached": {"server": {"prefix_caching": True}}}})
    assert cfg.arms["a"].server is None  # nothing filled: an existing arm's block parameters do not change
    assert "server" not in config.as_data(cfg.arms["a"])
    assert config.without_defaults(cfg.arms["a"], exp_schema.schema_of("arms", "*")) == {}
    margin = exp_schema.schema_of("analysis", "phase_margin")
    assert margin["default"] == 0.1 and "|ln(TTFT ratio)|" in margin["description"]
    with pytest.raises(ExperimentError, match="phase_margin = -0.1 is out of range"):
        config.validate({"arms": {"a": {}}, "analysis": {"phase_margin": -0.1}})
    with pytest.raises(ExperimentError, match="prefix_caching has no ollama switch"):
        config.validate(
            {
                "engine": {"kind": "ollama", "embedded": False, "model": "m"},
                "arms": {"a": {"server": {"prefix_caching": False}}},
            }
        )
