"""Experiment files that cannot be meant, refused (issue 40): a key written twice in one mapping at any level,
named with both lines; values no experiment needs (10^9 runs, seconds or tokens; 15,000 workloads), refused in
seconds with a message that names the key and why it is bounded. Every file is written here by hand and read
through config.load, the way the workflow reads it."""

import time
from pathlib import Path

import pytest
from bracket.experiment import config
from bracket.experiment import schema as exp_schema
from bracket.stats import planning

FIX = "YAML would keep the second and drop the first without a word."


def _refused(tmp_path, text: str) -> str:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(config.ExperimentError) as err:
        config.load(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: ") and "Traceback" not in msg
    return msg.removeprefix(f"{path}: ")


@pytest.mark.parametrize(
    "text, key, where, at",
    [
        # the case: the first value (3) would be dropped, 50 would run
        (
            "arms: {a: {}}\ndesign:\n  runs_per_block: 3\n  rounds: 4\n  runs_per_block: 50\n",
            "runs_per_block",
            "under design",
            "lines 3 and 5",
        ),
        (
            "arms: {a: {}}\nrequest: {max_tokens: 8}\nrequest: {max_tokens: 9}\n",
            "request",
            "at the top level",
            "lines 2 and 3",
        ),
        ("arms:\n  a: {}\n  b: {args: [x]}\n  a: {label: A}\n", "a", "under arms", "lines 2 and 4"),
        (
            "arms: {a: {}}\nworkloads:\n  code: {prompts: experiments/prompts/code.jsonl}\n"
            "  code: {prompts: experiments/prompts/prose.jsonl}\n",
            "code",
            "under workloads",
            "lines 3 and 4",
        ),
        (
            "arms:\n  a:\n    speculative: {method: ngram, draft_tokens: 3, draft_tokens: 5}\n",
            "draft_tokens",
            "under arms.a.speculative",
            "line 3, columns 34 and 51",  # counted from 1: the 34th and 51st characters
        ),
        (
            "arms: {a: {env: {X: '1'}}}\nengine:\n  env: {Y: '2'}\n  args: []\n  env: {}\n",
            "env",
            "under engine",
            "lines 3 and 5",
        ),
    ],
)
def test_a_key_written_twice_is_named_with_both_lines_and_the_fix(tmp_path, text, key, where, at):
    msg = _refused(tmp_path, text)
    assert (
        msg
        == f"key {key!r} appears twice {where} ({at}); {FIX} Keep one {key!r}: delete the other, or merge what the two hold."
    )


def test_a_key_the_same_under_two_parents_and_merge_keys_stay_allowed(tmp_path):
    path = tmp_path / "ok.yaml"
    # the same name in two mappings is no duplicate; a key a merge brings in may be overridden, as YAML means
    path.write_text(
        "arms:\n  a: {args: [--x]}\n  b: {args: [--y]}\n"
        "workloads:\n  code: &w {prompts: experiments/prompts/code.jsonl}\n  prose: *w\n"
        "request:\n  <<: {max_tokens: 8, temperature: 0}\n  max_tokens: 16\n"
    )
    raw = config.read_yaml(path)
    assert raw["request"] == {"max_tokens": 16, "temperature": 0}
    assert raw["workloads"]["prose"] == {"prompts": "experiments/prompts/code.jsonl"}
    assert config.validate(raw).request.max_tokens == 16


@pytest.mark.parametrize(
    "text, key, bound",
    [
        ("arms: {a: {}}\ndesign: {runs_per_block: 1000000000}\n", "design.runs_per_block", 1000),
        ("arms: {a: {}}\ndesign: {warmup_runs: 1000000000}\n", "design.warmup_runs", 100),
        ("arms: {a: {}}\ndesign: {cooldown_s: 1.0e+9}\n", "design.cooldown_s", 3600),
        ("arms: {a: {}}\nrequest: {max_tokens: 1000000000}\n", "request.max_tokens", 1048576),
        ("arms: {a: {}}\nrequest: {timeout_s: 1000000000}\n", "request.timeout_s", 86400),
        ("arms: {a: {}}\nengine: {startup_timeout_s: 1000000000}\n", "engine.startup_timeout_s", 86400),
        ("arms: {a: {}}\ncontrols: {neutrality_pairs: 1000000000}\n", "controls.neutrality_pairs", 100),
        ("arms: {a: {}}\nhardware: {steadiness_s: 1000000000}\n", "hardware.steadiness_s", 3600),
        (
            "arms: {a: {}}\nengine: {embedded_model: {train_steps: 1000000000}}\n",
            "engine.embedded_model.train_steps",
            1000000,
        ),
        (
            "arms: {a: {}}\nworkloads: {g: {prompts: experiments/prompts/code.jsonl, kind: arena, users: 1000000000}}\n",
            "workloads.g.users",
            1024,
        ),
    ],
)
def test_a_value_of_a_billion_is_refused_at_once_naming_the_key_and_its_bound(tmp_path, text, key, bound):
    msg = _refused(tmp_path, text)
    assert msg.startswith(f"{key} = ") and f"is out of range (maximum {bound}); set it to at most {bound}." in msg
    assert "at most" in msg.split(f"set it to at most {bound}.")[1].lower()  # the schema's reason, said with it


FIFTEEN_THOUSAND = "arms: {a: {}}\nworkloads:\n" + "".join(
    f"  w{i}: {{prompts: experiments/prompts/code.jsonl}}\n" for i in range(15_000)
)


# Timed: run alone after the parallel pass (a wall-clock bound has no place in the fast tier on a shared machine).
@pytest.mark.integration
@pytest.mark.serial
def test_a_billion_and_fifteen_thousand_workloads_are_refused_in_seconds(tmp_path):
    for text, most in (
        ("arms: {a: {}}\ndesign: {runs_per_block: 1000000000}\n", 2.0),
        ("arms: {a: {}}\nrequest: {max_tokens: 1000000000}\n", 2.0),
        (FIFTEEN_THOUSAND, 10.0),  # about 1.5 s on 2 idle cores, 6 s at a load of 8 (composing the YAML)
    ):
        t0 = time.monotonic()
        _refused(tmp_path, text)
        assert time.monotonic() - t0 < most, text[:60]


def test_fifteen_thousand_workloads_are_refused_by_their_number(tmp_path):
    msg = _refused(tmp_path, FIFTEEN_THOUSAND)
    assert msg.startswith(
        "workloads has 15,000 entries, more than the 1,000 an experiment may hold; keep at most 1,000, or split "
        "the experiment."
    )
    assert len(msg) < 1000  # the number, not the 15,000 entries


def test_too_many_arms_and_a_grid_of_too_many_cells_are_refused_by_their_count(tmp_path):
    arms = "arms: {" + ", ".join(f"a{i}: {{}}" for i in range(101)) + "}\n"
    assert _refused(tmp_path, arms).startswith("arms has 101 entries, more than the 100 an experiment may hold")
    # 40 depths x 30 users: 1,200 cells, each a workload once expanded; counted before any is made
    grid = (
        "arms: {a: {}}\nworkloads:\n  g:\n    prompts: experiments/prompts/code.jsonl\n    kind: arena\n"
        f"    grid: {{depth: {list(range(40))}, users: {list(range(1, 31))}}}\n"
    )
    assert _refused(tmp_path, grid).startswith(
        "the workloads expand to 1,200 (workloads.g.grid makes 1,200 cells, one per combination of its lists), "
        "more than the 1,000 an experiment may hold"
    )


def test_a_design_past_a_week_is_refused_by_its_requests_and_its_idle_time(tmp_path):
    # 2 arms x 100 rounds = 200 blocks, each 3 workloads x (1000 + 1) + 2 x 2 neutrality requests = 3,007: 601,400
    msg = _refused(tmp_path, "arms: {a: {}, b: {}}\ndesign: {rounds: 100, runs_per_block: 1000}\n")
    assert msg.startswith("the design sends 601,400 requests in one sequence of blocks (200 blocks x 3,007")
    assert "more than 500,000" in msg and "lower design.runs_per_block" in msg
    # 2 arms x 100 rounds, 3600 s before each of 199 blocks: 716,400 s = 8.3 days
    msg = _refused(tmp_path, "arms: {a: {}, b: {}}\ndesign: {rounds: 100, cooldown_s: 3600}\n")
    assert msg.startswith("design.cooldown_s is 3600 s before each of 199 blocks: 8.3 days idle")
    # just inside: 166,666 requests and 198 x 3000 s = 6.9 days pass
    path = tmp_path / "ok.yaml"
    path.write_text("arms: {a: {}, b: {}}\ndesign: {rounds: 99, cooldown_s: 3000, runs_per_block: 10}\n")
    config.load(path)


def test_every_upper_bound_in_the_schema_says_why():
    """A bound without its reason reads as arbitrary: each maximum or maxProperties comes with 'At most' (or 'at
    most') in its key's description, or in the description of the array it bounds the items of."""
    schema = exp_schema.load_schema()
    missing = []

    def walk(node, path, described):
        desc = " ".join(str(node.get("description", "")).split()) or described
        if ("maximum" in node or "maxProperties" in node) and "at most" not in desc.lower():
            if not ("exclusiveMinimum" in node and node.get("maximum") == 1):  # a fraction: memory_fraction
                missing.append(path)
        for key, sub in node.get("properties", {}).items():
            walk(sub, f"{path}.{key}", "")
        for key in ("additionalProperties", "items"):
            if isinstance(node.get(key), dict):
                walk(node[key], f"{path}.{key}", desc if key == "items" else "")

    walk(schema, "", "")
    allowed = {".engine.nice", ".engine.port", ".analysis.confidence"}  # bounds of the thing itself, not of cost
    assert [p for p in missing if p not in allowed and ".grid." not in p] == []


def test_the_design_notebook_reads_the_file_as_the_workflow_does(tmp_path):
    """The design notebook loads the experiment as the workflow does (config.load) and hands
    bracket.stats.planning.write_design the validated experiment: a key written twice in the file is refused
    there, rather than carried into the file it writes with one of the two values dropped."""
    src = tmp_path / "x.yaml"
    src.write_text("arms: {a: {}, b: {}}\ndesign: {runs_per_block: 3}\ndesign: {runs_per_block: 50}\n")
    with pytest.raises(config.ExperimentError, match=r"key 'design' appears twice at the top level \(lines 2 and 3\)"):
        planning.write_design(config.load(src), tmp_path / "out.yaml", {"rounds": 4})
    assert not (tmp_path / "out.yaml").exists()
    notebook = Path(__file__).resolve().parents[1] / "notebooks" / "design.py"
    assert "config.load(experiment_path)" in notebook.read_text()
