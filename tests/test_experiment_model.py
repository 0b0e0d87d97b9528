"""The typed experiment (bracket.typed.experiment): generated from the schema, frozen, and the same values."""

from __future__ import annotations

import copy
import importlib.util
import json
import pickle
from pathlib import Path

import pydantic
import pytest
import yaml
from bracket.experiment import config
from bracket.typed.experiment import Arm, Design, Engine, Experiment, FrozenDict

ROOT = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("experiment_model", ROOT / "tools" / "experiment_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_model_is_what_the_schema_generates():
    gen = _generator()
    schema = yaml.safe_load(gen.SCHEMA.read_text())
    assert gen.MODEL.read_text() == gen.render(schema), "run .venv/bin/python tools/experiment_model.py"


def test_every_key_of_the_schema_is_a_field_and_no_field_is_invented():
    schema = yaml.safe_load((ROOT / "workflow/schemas/experiment.schema.yaml").read_text())
    assert list(Experiment.model_fields) == list(schema["properties"])
    assert list(Engine.model_fields) == list(schema["properties"]["engine"]["properties"])
    assert list(Arm.model_fields) == list(schema["properties"]["arms"]["additionalProperties"]["properties"])
    assert list(Design.model_fields) == list(schema["properties"]["design"]["properties"])


def test_a_key_with_a_default_is_required_and_one_without_is_none_when_absent():
    # the model holds no defaults of its own: the schema's are filled before it is built
    assert Engine.model_fields["kind"].is_required()
    assert not Engine.model_fields["docker"].is_required() and Engine.model_fields["docker"].default is None
    assert Arm.model_fields["label"].default is None


def test_validate_returns_a_frozen_experiment_holding_the_filled_values():
    exp = config.validate({"arms": {"base": {}, "ng": {"speculative": {"method": "ngram", "draft_tokens": 4}}}})
    assert isinstance(exp, Experiment)
    assert exp.reference == "base"  # the first arm, filled by the meaning checks
    assert exp.design.rounds == 5 and exp.request.max_tokens == 256  # the schema's defaults
    assert exp.arms["ng"].speculative.draft_tokens == 4
    assert exp.arms["ng"].speculative.prompt_lookup_max == 5
    assert exp.arms["base"].speculative is None
    assert exp.engine.args == ()
    with pytest.raises(pydantic.ValidationError):
        exp.design.rounds = 3  # frozen
    with pytest.raises(pydantic.ValidationError):
        Experiment.model_validate({**config.as_data(exp), "colour": "red"})  # no key the schema does not name


def test_as_data_round_trips_and_keeps_numbers_as_written():
    raw = {"arms": {"a": {"env": {"OMP_NUM_THREADS": 2}}}, "design": {"cooldown_s": 5, "rounds": "adaptive"}}
    exp = config.validate(raw)
    data = config.as_data(exp)
    assert data["design"]["cooldown_s"] == 5 and isinstance(data["design"]["cooldown_s"], int)
    assert data["design"]["min_rounds"] == 2  # an adaptive design's parameters, filled
    assert data["arms"]["a"]["env"] == {"OMP_NUM_THREADS": 2}
    assert "docker" not in data["engine"]  # a key left out stays out
    assert Experiment.model_validate(data) == exp


def test_the_mappings_inside_the_experiment_cannot_be_changed():
    exp = config.validate(
        {
            "engine": {"env": {"OMP_NUM_THREADS": 2}},
            "arms": {"base": {"env": {"A": "1"}}, "ng": {"speculative": {"method": "ngram", "draft_tokens": 4}}},
            "weights": {"overrides": {"lm_head.weight": "output"}},
        }
    )
    mappings = [exp.arms, exp.workloads, exp.engine.env, exp.arms["base"].env, exp.weights.overrides]
    changes = [
        lambda m: m.pop(next(iter(m))),
        lambda m: m.__setitem__("new", 1),
        lambda m: m.__delitem__(next(iter(m))),
        lambda m: m.update({"new": 1}),
        lambda m: m.setdefault("new", 1),
        lambda m: m.popitem(),
        lambda m: m.clear(),
        lambda m: m.__ior__({"new": 1}),
    ]
    for mapping in mappings:
        before = dict(mapping)
        for change in changes:
            with pytest.raises(TypeError, match="frozen"):
                change(mapping)
        assert dict(mapping) == before
    assert list(exp.arms) == ["base", "ng"] and exp.engine.env == {"OMP_NUM_THREADS": 2}


def test_a_frozen_experiment_pickles_copies_and_dumps_as_plain_data():
    exp = config.validate({"arms": {"a": {"env": {"X": 1}}, "b": {}}})
    again = pickle.loads(pickle.dumps(exp))
    assert again == exp and isinstance(again.arms, FrozenDict)
    with pytest.raises(TypeError):
        again.arms.pop("a")
    assert copy.deepcopy(exp) == exp
    assert json.loads(json.dumps(exp.arms["a"].env)) == {"X": 1}
    dumped = exp.model_dump()
    assert type(dumped["arms"]) is dict and type(dumped["arms"]["a"]["env"]) is dict
    dumped["arms"].pop("b")  # the dump is the caller's own, plain data
    assert Experiment.model_validate_json(exp.model_dump_json()) == exp
    assert hash(exp) == hash(again)  # frozen all the way down: the experiment can key a cache
