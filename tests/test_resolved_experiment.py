"""The resolved experiment file (bracket.experiment.resolved): what the DAG validated, read back by every script
as the same frozen Experiment, rewritten only when its content changes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from bracket.experiment import config, resolved
from bracket.typed.experiment import Experiment

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted(p for p in (ROOT / "experiments").glob("*.yaml") if not p.name.endswith(".corrections.yaml"))


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_shipped_experiment_reads_back_as_the_experiment_validated(path, tmp_path):
    experiment = config.load(path)
    out = tmp_path / resolved.FILE_NAME
    assert resolved.write(experiment, out) is True
    back = resolved.read(out)
    assert isinstance(back, Experiment) and back == experiment
    # in the experiment's order: the design draws the arms in it, and the article lists workloads in it
    assert list(back.arms) == list(experiment.arms) and list(back.workloads) == list(experiment.workloads)
    # the same keys as validated: a key the file and the schema's defaults left out stays out
    assert config.as_data(back) == config.as_data(experiment)
    assert json.loads(out.read_text()) == config.as_data(experiment)


def test_a_comment_or_another_layout_gives_the_same_file_and_no_write(tmp_path):
    text = "arms:\n  a: {}\n  b: {args: [--x, '1']}\ndesign: {kind: abab, rounds: 2}\n"
    other = "# the same experiment, laid out otherwise\ndesign:\n  rounds: 2\n  kind: abab\narms:\n  a: {}\n  b:\n"
    other += "    args: ['--x', '1']\n"
    swapped = "arms:\n  b: {args: [--x, '1']}\n  a: {}\ndesign: {kind: abab, rounds: 2}\n"
    for name, t in (("one", text), ("two", other), ("swapped", swapped)):
        (tmp_path / f"{name}.yaml").write_text(t)
    one, two = config.load(tmp_path / "one.yaml"), config.load(tmp_path / "two.yaml")
    assert resolved.dumps(one) == resolved.dumps(two)
    # the arms' order is part of the experiment: the first is the reference, and the design draws them in it
    assert resolved.dumps(config.load(tmp_path / "swapped.yaml")) != resolved.dumps(one)
    out = tmp_path / "resolved.json"
    assert resolved.write(one, out) is True
    before = out.stat().st_mtime_ns
    os.utime(out, ns=(before - 10**9, before - 10**9))  # a second older, so a rewrite would show
    assert resolved.write(two, out) is False
    assert out.stat().st_mtime_ns == before - 10**9
    changed = config.load(tmp_path / "one.yaml").model_copy(update={"title": "another title"})
    assert resolved.write(changed, out) is True and resolved.read(out).title == "another title"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_a_file_that_is_not_a_resolved_experiment_names_itself_and_the_fix(tmp_path):
    out = tmp_path / resolved.FILE_NAME
    with pytest.raises(resolved.ResolvedError, match=r"experiment.resolved.json: not a resolved experiment.*delete it"):
        resolved.read(out)  # missing
    out.write_text("{not json")
    with pytest.raises(resolved.ResolvedError, match="not a resolved experiment"):
        resolved.read(out)
    data = config.as_data(config.validate({"arms": {"a": {}}}, source="test"))
    out.write_text(json.dumps({**data, "arms": {"a": {"speculative": {"method": "ngram"}}}}))
    with pytest.raises(resolved.ResolvedError, match=r"arms\.a\.speculative\.draft_tokens"):
        resolved.read(out)
    out.write_text(json.dumps({**data, "unknown": 1}))
    with pytest.raises(resolved.ResolvedError, match="unknown"):
        resolved.read(out)
