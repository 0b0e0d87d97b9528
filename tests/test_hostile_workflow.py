"""Hostile input through Snakemake, in a copy of the workflow: what a new user meets.

- inputs that can be checked before launch stop `snakemake NAME` (and `-n`) with one message, no
  traceback, before any job: names that would become paths outside the experiment's folders, a
  secret in engine.env, prompt files that do not parse, are empty or hold a 5 MB prompt;
- a server that echoes the Authorization header in its error bodies, its stream and its log, run
  to the article: the key is in no file under results/, logs/, report/, .snakemake/ nor in the output;
- the finished checkout moved to another folder: nothing reruns.
The engine is a sentinel that leaves a mark if it is ever launched, or the stand-in server the test
starts (attached to), with a model folder of a few bytes for the byte account.
"""

import json
import os
import shutil
import struct
import subprocess

import pytest

from tests.support import faultkit as fk
from tests.support import snakemake

pytestmark = pytest.mark.integration  # processes, servers or Snakemake: the full tier, not make test-fast


def tiny_model(folder):
    """config.json, tokenizer.json (longest token 16 bytes) and a safetensors file of three tensors."""
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {
        "model.embed_tokens.weight": [64, 8],
        "model.layers.0.mlp.up_proj.weight": [16, 8],
        "lm_head.weight": [64, 8],
    }
    header, off = {}, 0
    for name, shape in tensors.items():
        n = shape[0] * shape[1] * 2
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(h)) + h + b"\0" * off)
    (folder / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["Qwen3ForCausalLM"],
                "max_position_embeddings": 2048,
                "num_hidden_layers": 1,
                "hidden_size": 8,
                "vocab_size": 64,
                "torch_dtype": "bfloat16",
            }
        )
    )
    (folder / "tokenizer.json").write_text(
        json.dumps({"model": {"type": "BPE", "vocab": {"a" * n: n for n in range(1, 17)}}})
    )
    return folder


def prompts_line(text):
    return json.dumps({"id": "p0", "prompt": text}) + "\n"


CASES = {
    "traversal": (
        "workloads: {'../../../../../../tmp/bracket-escape': {prompts: experiments/prompts/code.jsonl}}\n",
        None,
        [
            "workload name '../../../../../../tmp/bracket-escape' is not allowed",
            "^[A-Za-z0-9][A-Za-z0-9_-]*$",
            "rename it",
        ],
    ),
    "subfolder": (
        "workloads: {co/de: {prompts: experiments/prompts/code.jsonl}}\n",
        None,
        ["workload name 'co/de' is not allowed"],
    ),
    "arm_dots": ("arms: {'..': {}}\n", None, ["arm name '..' is not allowed"]),
    "token_in_env": (
        "engine: {env: {HF_TOKEN: hf_notasecretbutlooksone}}\n",
        None,
        ["engine.env sets HF_TOKEN", "Use secret_env instead", "engine.secret_env: [HF_TOKEN]"],
    ),
    "bad_json_prompts": (
        "workloads: {code: {prompts: prompts/bad.jsonl}}\n",
        ("prompts/bad.jsonl", prompts_line("ok") + '{"id": "p1", "prompt": "no end"\n'),
        ["workloads.code.prompts:", "prompts/bad.jsonl:2: not JSON"],
    ),
    "no_prompts": (
        "workloads: {code: {prompts: prompts/empty.jsonl}}\n",
        ("prompts/empty.jsonl", ""),
        ["prompts/empty.jsonl: no prompts"],
    ),
    "huge_prompt": (
        "workloads: {code: {prompts: prompts/huge.jsonl}}\n",
        ("prompts/huge.jsonl", prompts_line("lorem ipsum " * (5_000_000 // 12))),
        [
            "prompt 'p0' of prompts/huge.jsonl is 5,000,005 bytes, so at least 312,501 tokens",
            "2,048-token context of arm 'baseline'",
            "Shorten the prompt",
        ],
    ),
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = fk.repo_copy(tmp_path_factory.mktemp("repo"))
    sentinel = fk.sentinel_engine(root)
    model = tiny_model(root / "tiny-model")
    engine = f"python: {sentinel}, model: {model}, port: 8036, startup_timeout_s: 5"
    for name, (body, prompt_file, _) in CASES.items():
        if prompt_file:
            (root / prompt_file[0]).parent.mkdir(exist_ok=True)
            (root / prompt_file[0]).write_text(prompt_file[1])
        text = f"engine: {{embedded: false, {engine}}}\narms: {{baseline: {{}}}}\nrequest: {{max_tokens: 8}}\n"
        for key in ("engine", "arms", "workloads"):  # a case's own key replaces the default line
            if body.startswith(key + ":"):
                if key == "engine":
                    body = body.replace("engine: {", f"engine: {{embedded: false, {engine}, ")
                text = "\n".join(line for line in text.splitlines() if not line.startswith(key + ":")) + "\n"
        (root / "experiments" / f"hostile_{name}.yaml").write_text(text + body)
    shutil.copy(root / "experiments" / "smoke.yaml", root / "experiments" / "qa.v2.yaml")
    return root


@pytest.mark.parametrize("case", sorted(CASES))
def test_input_that_cannot_run_is_refused_before_any_job_with_one_message(repo, case):
    name = f"hostile_{case}"
    for args in (["-n", name], [name]):
        proc = snakemake(repo, *args)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0, out[-3000:]
        for phrase in CASES[case][2]:
            assert phrase in out, f"{phrase!r} missing from:\n{out[-3000:]}"
        assert "Traceback" not in out and "InputFunctionException" not in out, out[-3000:]
        assert "rule " not in out.split("Building DAG of jobs...")[-1]  # no job was even planned
    assert not (repo / "LAUNCHED").exists()
    assert not (repo / "results" / name).exists() and not (repo / "logs" / name).exists()
    assert not (repo / "report" / name).exists() and not os.path.exists("/tmp/bracket-escape")


def test_a_file_name_that_cannot_be_an_experiment_gets_the_naming_rule(repo):
    proc = snakemake(repo, "-n", "qa.v2")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "experiments/qa.v2.yaml: experiment name 'qa.v2' is not allowed" in out, out[-2000:]
    assert "^[A-Za-z0-9][A-Za-z0-9_-]*$" in out and "MissingInputException" not in out


def test_an_echoing_server_leaks_the_key_nowhere_and_a_moved_checkout_reruns_nothing(tmp_path_factory):
    repo = fk.repo_copy(tmp_path_factory.mktemp("echo") / "checkout")
    model = tiny_model(tmp_path_factory.mktemp("model"))
    port = fk.free_port()
    env = dict(fk.snakemake_env(), BRACKET_TEST_API_KEY=fk.SECRET)
    server = subprocess.Popen(
        fk.fake_argv(port, "--api-key-env", "BRACKET_TEST_API_KEY", "--script", "ok,echo_auth,echo_text,ok"),
        env=env,
        stdout=open(repo / "gateway.log", "w"),
        stderr=subprocess.STDOUT,
    )
    (repo / "experiments" / "echo.yaml").write_text(
        f"engine: {{kind: openai, launch: attach, embedded: false, base_url: 'http://127.0.0.1:{port}', "
        f"api_key_env: BRACKET_TEST_API_KEY, model: {model}}}\n"
        "arms: {first: {}, again: {}}\n"
        "workloads: {code: {prompts: experiments/prompts/code.jsonl}}\n"
        "design: {rounds: 1, runs_per_block: 2, warmup_runs: 0, cooldown_s: 0}\n"
        "request: {max_tokens: 8}\nanalysis: {bootstrap_resamples: 200}\n"
    )
    try:
        fk.wait_for(lambda: fk.listener(port), 20, "the stand-in gateway")
        proc = snakemake(repo, "echo", env=env, timeout=600)
    finally:
        server.kill()
        server.wait()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "Authorization: Bearer " + fk.SECRET in (repo / "gateway.log").read_text()  # it did echo the key
    # the error's message (which quotes the start of the body) and the body kept beside it (raw_response)
    assert (repo / "results" / "echo" / "runs.csv").read_text().count("Bearer ***") == 2
    raw = "".join(p.read_text() for p in (repo / "results" / "echo" / "raw").glob("block-*.jsonl"))
    assert raw.count("Bearer ***") == 3  # the error's message, its body and the generated text, masked
    leaks = [
        hit
        for folder in ("results", "logs", "report", ".snakemake")
        for hit in fk.files_containing(repo / folder, fk.SECRET)
    ]
    assert leaks == [] and fk.SECRET not in out
    assert (repo / "report" / "echo" / "article.html").exists()

    moved = repo.with_name("moved")
    repo.rename(moved)
    proc = snakemake(moved, "-n", "echo", env=env)
    assert proc.returncode == 0 and "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout[-3000:]


def test_a_run_without_one_valid_measurement_fails_with_the_reason_first_and_keeps_its_records(tmp_path):
    repo = fk.repo_copy(tmp_path / "checkout")
    model = tiny_model(tmp_path / "model")
    port = fk.free_port()
    server = subprocess.Popen(
        fk.fake_argv(port, "--script", "http400"), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    (repo / "experiments" / "all400.yaml").write_text(
        f"engine: {{kind: openai, launch: attach, embedded: false, base_url: 'http://127.0.0.1:{port}', "
        f"model: {model}}}\n"
        "arms: {first: {}, again: {}}\n"
        "workloads: {code: {prompts: experiments/prompts/code.jsonl}}\n"
        "design: {rounds: 1, runs_per_block: 2, warmup_runs: 1, cooldown_s: 0}\n"
        "request: {max_tokens: 8}\nanalysis: {bootstrap_resamples: 200}\n"
    )
    try:
        fk.wait_for(lambda: fk.listener(port), 20, "the stand-in server")
        proc = snakemake(repo, "all400", timeout=600)
    finally:
        server.kill()
        server.wait()
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    said = "no valid measurement: all 4 timed requests in results/all400/runs.csv are invalid."
    assert said in out, out[-3000:]
    assert "4 x error; the first: HTTP 400:" in out and "maximum context length is 2048 tokens" in out
    assert out.index(said) < out.index("Error in rule analyze")  # the reason before Snakemake's report
    assert len((repo / "results" / "all400" / "runs.csv").read_text().splitlines()) == 1 + 2 * 3
    assert len(list((repo / "results" / "all400" / "raw").glob("block-*.jsonl"))) == 2
    assert not (repo / "report" / "all400" / "article.html").exists()
