"""`bracket weights` and `bracket ceiling` on a header-only fixture, as a user runs them."""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import pytest
from bracket.cli import physics as commands_physics

_spec = importlib.util.spec_from_file_location(
    "physics_checkpoints", Path(__file__).parent / "data" / "physics" / "checkpoints.py"
)
ck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ck)


def run(argv):
    parser = argparse.ArgumentParser(prog="bracket")
    commands_physics.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    tensors, config = ck.qwen38_27b_unsloth_nvfp4()
    return str(ck.write(tmp_path_factory.mktemp("m"), tensors, config, shards=2))


def test_weights_table_and_json(model, capsys):
    assert run(["weights", model]) == 0
    out = capsys.readouterr().out
    assert "read per token 19.100 GB" in out and "nvfp4" in out
    assert run(["weights", model, "--json"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert set(a) >= {
        "components",
        "bytes_per_token",
        "bits_per_weight",
        "format",
        "tensors",
        "tied_embeddings",
        "files",
    }


def test_ceiling_with_device_and_measured(model, capsys):
    # Seed 003 on a GB10: 14.29 tok/s ceiling, 11.4 measured = 80%; FP8 and BF16 impossible.
    assert run(["ceiling", model, "--device", "GB10", "--measured", "11.4", "--json"]) == 0
    c = json.loads(capsys.readouterr().out)
    assert round(c["ceiling_tok_s"], 2) == 14.29
    assert [h["possible"] for h in c["hypotheses"]] == [True, False, False]
    assert run(["ceiling", model, "--bandwidth", "273", "--measured", "11.4"]) == 0
    assert "impossible" in capsys.readouterr().out


def test_ceiling_needs_a_bandwidth_source(model):
    with pytest.raises(SystemExit):
        run(["ceiling", model])
