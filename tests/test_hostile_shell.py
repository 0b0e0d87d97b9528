"""No experiment text reaches a shell (issue 40): a canary file that any command substitution, backtick,
`;`, `|`, `&&` or newline would create, fed through every experiment field that reaches a rule.

The fast tests read the rules' text and the path check (bracket.experiment.paths); the rest run the real
`snakemake` in a copy of the workflow (faultkit.repo_copy): the issue's own case (a draft model whose name
holds `$(touch PWNED)`), every path field refused before the DAG is built, the workflow's own targets asked
for with hostile wildcards (with a stand-in trainer, so the rule's command would run if a wildcard admitted
the text), the same targets against the rules as they were before (the canary appears: the test can fail),
and a whole run on the reference engine with the payload in every free-text field that reaches a script.
"""

import re
from functools import partial
from pathlib import Path

import pytest
from bracket.experiment import config, paths

from tests.support import faultkit as fk
from tests.support import snakemake as run_snakemake

ROOT = Path(__file__).resolve().parent.parent
RULES = sorted((ROOT / "workflow" / "rules").glob("*.smk")) + [ROOT / "Snakefile"]
PORT = 8071


def payload(canary: Path) -> str:
    """Every way a shell would run `touch CANARY` from a word it was handed."""
    c = str(canary)
    return f'x$(touch {c})`touch {c}`;touch {c}|touch {c}&&touch {c}\ntouch {c}\'"$(touch {c})"'


# ---- the rules' text ------------------------------------------------------------------------------


def shell_commands(text: str) -> list[str]:
    """The string literals of every `shell:` directive in a rules file, joined per directive."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if lines[i].strip() == "shell:":
            parts, i = [], i + 1
            while i < len(lines) and lines[i].strip().startswith(('"', "'", 'f"', 'r"')):
                parts.append(lines[i].strip())
                i += 1
            out.append(" ".join(parts))
        else:
            i += 1
    return out


def test_every_field_in_every_shell_command_is_quoted():
    commands = [c for f in RULES for c in shell_commands(f.read_text())]
    assert len(commands) >= 7, commands  # engine_venv, trainer_venv, embedded_model, llamacpp_build, ...
    unquoted = [(c, f) for c in commands for f in re.findall(r"\{([^{}]+)\}", c) if not f.endswith(":q")]
    assert unquoted == [], f"fields formatted into a shell command without :q: {unquoted}"


def test_the_shell_command_parser_sees_an_unquoted_field():
    # the check above on a rule as it was before issue 40
    old = 'rule x:\n    shell:\n        "{params.python} {params.builder:q} --seed {wildcards.seed}"\n'
    assert [f for c in shell_commands(old) for f in re.findall(r"\{([^{}]+)\}", c) if not f.endswith(":q")] == [
        "params.python",
        "wildcards.seed",
    ]


def output_wildcards() -> dict[str, set[str]]:
    """Each rule's wildcards, from the `{name}` fields of its output and log patterns."""
    found: dict[str, set[str]] = {}
    for f in RULES:
        for rule in re.split(r"^(?=rule |checkpoint )", f.read_text(), flags=re.M)[1:]:
            name = rule.split()[1].rstrip(":")
            body = re.split(r"^\S", rule.split("\n", 1)[1], maxsplit=1, flags=re.M)[0]
            outs = re.findall(r"^\s+(?:\w+=)?\"([^\"]*\{[^\"]*)\",?$", body, flags=re.M)
            found[name] = {w for o in outs for w in re.findall(r"\{(\w+)\}", o)}
    return found


def test_every_wildcard_of_every_rule_has_a_constraint():
    text = "\n".join(f.read_text() for f in RULES)
    global_block = re.search(r"^wildcard_constraints:\n((?:    .+\n)+)", text, flags=re.M).group(1)
    global_names = set(re.findall(r"^\s+(\w+)=", global_block, flags=re.M))
    assert {"exp", "k", "r"} <= global_names
    missing = []
    for f in RULES:
        for rule in re.split(r"^(?=rule |checkpoint )", f.read_text(), flags=re.M)[1:]:
            name = rule.split()[1].rstrip(":")
            local = re.search(r"wildcard_constraints:\n((?:\s{8}.+\n)+)", rule)
            local_names = set(re.findall(r"^\s+(\w+)=", local.group(1), flags=re.M)) if local else set()
            for w in output_wildcards().get(name, set()):
                if w not in global_names | local_names:
                    missing.append(f"{f.name}: rule {name}: {{{w}}}")
    assert output_wildcards()["embedded_model"] == {"seed", "layers", "hidden", "vocab", "steps"}
    assert missing == [], missing


# ---- the path check --------------------------------------------------------------------------------

ISSUE_DRAFT = "resources/models/tiny-qwen3-s1$(touch PWNED)-l2-h64-v512-t10.gguf"


@pytest.mark.parametrize(
    "value",
    [
        ISSUE_DRAFT,
        "models/a`touch x`",
        "models/a;touch x",
        "models/a|x",
        "models/a&&x",
        "models/a\ntouch x",
        "models/a\x00",
        "models/it's",
        'models/"q"',
        "models/a\\b",
        "models/{exp}",
        "models/a>b",
        "--api-key=sk-1",
        "resources/models/tiny-qwen3-anything.gguf",
        "./resources/models/tiny-qwen3-s1-l2-h64-v512.gguf",  # four numbers, not five
        "a" * 5000,
    ],
)
def test_a_path_with_shell_text_or_outside_its_form_is_refused_naming_the_key(value):
    problem = paths.path_problem("arms.fast.speculative.model", value)
    assert problem is not None and problem.startswith("arms.fast.speculative.model is ")
    assert any(fix in problem for fix in ("rename the file", "./", "write it in that form", "give the real path"))


@pytest.mark.parametrize(
    "value",
    [
        "",
        "Qwen/Qwen3-8B",
        "/data/models/Qwen3-8B",
        "./models/my model (8B)/model.gguf",
        "~/models/q.gguf",
        "resources/models/tiny-qwen3-s1-l4-h256-v4096-t300",
        "resources/models/tiny-qwen3-s1-l4-h256-v4096-t300.gguf",
        "resources/models/synthetic-qwen3-8b-f16.gguf",
        "qwen3:8b",
        "/data/models:/models:ro",
    ],
)
def test_ordinary_paths_hub_ids_and_the_workflows_own_models_pass(value):
    assert paths.path_problem("engine.model", value) is None


def base_experiment(**engine) -> dict:
    return {
        "engine": {"kind": "llamacpp", "embedded": True, **engine},
        "arms": {"baseline": {}},
        "workloads": {"code": {"prompts": "experiments/prompts/code.jsonl"}},
    }


def test_validation_refuses_every_path_field_with_shell_text(tmp_path):
    bad = payload(tmp_path / "CANARY")
    cases = {
        "engine.model": {"engine": {"kind": "vllm", "embedded": False, "model": bad}},
        "engine.executable": {"engine": {"kind": "llamacpp", "embedded": False, "model": "m.gguf", "executable": bad}},
        "engine.python": {"engine": {"kind": "vllm", "embedded": False, "model": "Qwen/Qwen3-8B", "python": bad}},
        "arms.draft.speculative.model": {
            "arms": {
                "baseline": {},
                "draft": {"speculative": {"method": "draft_model", "draft_tokens": 4, "model": bad}},
            }
        },
        "workloads.code.prompts": {"workloads": {"code": {"prompts": bad}}},
        "engine.docker.volumes[0]": {
            "engine": {
                "kind": "vllm",
                "embedded": False,
                "launch": "docker",
                "model": "/models/m",
                "docker": {"image": "vllm/vllm-openai:v0.11.0", "volumes": [bad]},
            }
        },
    }
    for key, change in cases.items():
        raw = base_experiment()
        raw.update(change)
        raw.setdefault("reference", "baseline")
        with pytest.raises(config.ExperimentError) as err:
            config.validate(raw, "experiments/x.yaml")
        assert f"experiments/x.yaml: {key} is " in str(err.value), (key, str(err.value))
    assert not (tmp_path / "CANARY").exists()


# ---- through the real Snakemake ----------------------------------------------------------------------


snakemake = partial(run_snakemake, timeout=300)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A copy of the workflow with a stand-in trainer: its python records its argv and writes what the
    rules expect, so a rule whose wildcards admitted the payload would run its command here."""
    root = fk.repo_copy(tmp_path_factory.mktemp("repo"))
    trainer = root / "resources" / "engines" / "trainer-torch-2.13.0"
    (trainer / "bin").mkdir(parents=True)
    (trainer / ".installed").touch()
    stand_in = trainer / "bin" / "python"
    stand_in.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {root}/trainer-argv.txt\nexit 1\n')
    stand_in.chmod(0o755)
    return root


@pytest.mark.integration
def test_the_issues_draft_model_is_refused_before_the_dag_and_runs_nothing(repo):
    (repo / "experiments" / "pwned.yaml").write_text(
        "engine: {kind: llamacpp, embedded: true}\n"
        "arms:\n  baseline: {}\n"
        f"  draft: {{speculative: {{method: draft_model, draft_tokens: 4, model: '{ISSUE_DRAFT.replace('PWNED', str(repo / 'PWNED'))}'}}}}\n"
        "reference: baseline\n"
        "workloads: {code: {prompts: experiments/prompts/code.jsonl}}\n"
    )
    proc = snakemake(repo, "pwned")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "experiments/pwned.yaml: arms.draft.speculative.model is " in out and "Traceback" not in out, out[-3000:]
    assert not (repo / "PWNED").exists()
    assert not (repo / "results" / "pwned").exists()


HOSTILE_TARGETS = [
    "resources/models/tiny-qwen3-s1$(touch {c})-l2-h64-v512-t10/build.json",
    "resources/models/tiny-qwen3-s1`touch {c}`-l2-h64-v512-t10/build.json",
    "resources/models/tiny-qwen3-s1;touch {c};-l2-h64-v512-t10/build.json",
    "resources/models/tiny-qwen3-s1-l2-h64-v512-t10\ntouch {c}\n/build.json",
    "resources/models/tiny-qwen3-s1'$(touch {c})'-l2-h64-v512-t10/build.json",
    "resources/models/tiny-qwen3-s1$(touch {c})-l2-h64-v512-t10.gguf",
    "resources/models/synthetic-qwen3-8b$(touch {c})-f16.gguf",
]


@pytest.mark.integration
def test_no_rule_takes_a_hostile_wildcard(repo):
    canary = repo / "CANARY-targets"
    for target in HOSTILE_TARGETS:
        proc = snakemake(repo, target.format(c=canary))
        assert proc.returncode != 0, proc.stdout[-2000:]
        assert "MissingRuleException" in proc.stderr or "No rule to produce" in proc.stderr, proc.stderr[-2000:]
        assert not canary.exists(), target
    assert not (repo / "trainer-argv.txt").exists()


@pytest.mark.integration
def test_the_rules_as_they_were_ran_the_canary(tmp_path, repo):
    """The same target against engine.smk before issue 40 (no constraint, no quoting): the canary appears.
    So the test above fails where a rule takes the text, and the stand-in trainer is a real path to a shell."""
    old = fk.repo_copy(tmp_path / "old")
    shutil_tree(repo / "resources", old / "resources")
    rules = old / "workflow" / "rules" / "engine.smk"
    text = re.sub(r":q\}", "}", rules.read_text())
    text = re.sub(r"    wildcard_constraints:\n        # decimal numbers alone.*\n(        \w+=.*\n)+", "", text)
    rules.write_text(text)
    assert "seed=" not in text and "--seed {wildcards.seed}" in text
    canary = tmp_path / "CANARY-old"
    snakemake(old, HOSTILE_TARGETS[0].format(c=canary))
    assert canary.exists(), "the old rule did not run the payload: the canary test cannot tell"


def shutil_tree(src: Path, dest: Path):
    import shutil

    shutil.copytree(src, dest, symlinks=True)
    argv = dest / "engines" / "trainer-torch-2.13.0" / "bin" / "python"
    argv.write_text(argv.read_text().replace(str(src.parent), str(dest.parent)))


@pytest.mark.integration
def test_free_text_fields_reach_the_scripts_and_the_article_as_text(repo):
    """The payload in every free-text field that passes validation and reaches a rule's script (title,
    question, an arm's label, engine.env and an arm's env, the served name: an argument of the server's
    argv), on the reference engine, through the whole run to the article: the canary never appears, and
    the article shows the title as text."""
    canary = repo / "CANARY-text"
    bad = payload(canary)
    quoted = bad.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    (repo / "experiments" / "textpayload.yaml").write_text(
        f'title: "{quoted}"\n'
        f'question: "{quoted}"\n'
        f'engine: {{kind: reference, port: {PORT}, served_model: "{quoted}",\n'
        f'  args: ["--ttft", "0.01"], env: {{BRACKET_NOTE: "{quoted}"}}}}\n'
        "arms:\n"
        f'  baseline: {{label: "{quoted}", args: ["--rate", "400"], env: {{ARM_NOTE: "{quoted}"}}}}\n'
        '  fast: {args: ["--rate", "800"]}\n'
        "reference: baseline\n"
        "workloads: {code: {prompts: experiments/prompts/code.jsonl}}\n"
        "design: {kind: abab, rounds: 1, runs_per_block: 2, warmup_runs: 0, cooldown_s: 0, seed: 1}\n"
        "request: {max_tokens: 16}\n"
        "analysis: {bootstrap_resamples: 200}\n"
        "hardware: {probe_bandwidth: false, bandwidth_gbps: 20, steadiness_s: 0}\n"
    )
    proc = snakemake(repo, "textpayload", timeout=600)
    out = proc.stdout + proc.stderr
    assert not canary.exists(), out[-3000:]
    assert proc.returncode == 0, out[-3000:]
    html = (repo / "report" / "textpayload" / "article.html").read_text()
    assert "touch " in html and "<script" not in html.split("<body", 1)[-1].lower().replace("<script type=", "")
    assert not (repo / "trainer-argv.txt").exists()


@pytest.mark.parametrize("exe", ["/bin/sh", "bash", "/usr/bin/env", "python3", "/usr/bin/python3.11", "perl"])
def test_a_shell_or_interpreter_named_as_the_server_is_refused(exe):
    raw = base_experiment()
    raw["engine"] = {
        "kind": "llamacpp",
        "embedded": False,
        "model": "m.gguf",
        "executable": exe,
        "args": ["-c", "touch PWNED"],
    }
    with pytest.raises(config.ExperimentError, match="engine.executable is .* not an engine's server"):
        config.validate(raw, "experiments/x.yaml")


def test_the_servers_own_program_passes():
    raw = base_experiment()
    raw["engine"] = {"kind": "llamacpp", "embedded": False, "model": "m.gguf", "executable": "/opt/llama/llama-server"}
    assert config.validate(raw, "experiments/x.yaml").engine.executable == "/opt/llama/llama-server"
