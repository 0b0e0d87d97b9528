"""The embedded model is the model the article measured: its hash is pinned in the package, recorded
beside every block, stated in the article, and training it again from its seed gives the same bits."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from bracket import embedded
from bracket.article.method import model_hash_sentence
from bracket.experiment import config
from bracket.stats.provenance import weights_served
from conftest import ROOT, build_in_checkout

HEX = set("0123456789abcdef")


def default_model() -> str:
    cfg = config.validate(
        {
            "engine": {"kind": "llamacpp", "launch": "native", "embedded": True},
            "arms": {"baseline": {}},
            "workloads": {"chat": {"prompts": "experiments/prompts/chat.jsonl"}},
        }
    )
    return embedded.model_dir(cfg)


def test_pins_are_looked_up_by_the_served_file_per_cpu_vendor(tmp_path, monkeypatch):
    gguf = default_model()
    name = embedded.model_name(gguf)
    assert gguf.endswith(".gguf") and name == "tiny-qwen3-s1-l4-h256-v4096-t300"
    amd = {"model.safetensors": "1" * 64, "tokenizer.json": "2" * 64, "gguf": "3" * 64}
    intel = {"model.safetensors": "4" * 64, "tokenizer.json": "2" * 64, "gguf": "5" * 64}
    monkeypatch.setitem(embedded.MODEL_SHA256, name, {"AuthenticAMD": amd, "GenuineIntel": intel})
    # the served file's kind picks the pin: the GGUF's, or the folder's model.safetensors
    assert embedded.pins(gguf) == {"AuthenticAMD": "3" * 64, "GenuineIntel": "5" * 64}
    assert embedded.pins(gguf[: -len(".gguf")]) == {"AuthenticAMD": "1" * 64, "GenuineIntel": "4" * 64}
    assert embedded.pins("resources/models/another.gguf") == {}
    # the entry a build prints for pinning: build.json's hashes and the GGUF beside the folder, under the
    # vendor build.json's cpu names (this machine's where it names none)
    d = tmp_path / name
    d.mkdir()
    files = {"model.safetensors": "1" * 64, "tokenizer.json": "2" * 64, "config.json": "6" * 64}
    (d / "build.json").write_text(json.dumps({"sha256": files, "cpu": "AuthenticAMD AMD EPYC 7B13"}))
    (tmp_path / f"{name}.gguf").write_bytes(b"x")
    import hashlib

    entry = {"model.safetensors": "1" * 64, "tokenizer.json": "2" * 64, "gguf": hashlib.sha256(b"x").hexdigest()}
    assert embedded.pin_entry(d) == {name: {"AuthenticAMD": entry}}
    (d / "build.json").write_text(json.dumps({"sha256": files}))
    monkeypatch.setattr(embedded, "cpu_vendor", lambda: "GenuineIntel")
    assert embedded.pin_entry(d) == {name: {"GenuineIntel": entry}}
    monkeypatch.undo()
    for builds in embedded.MODEL_SHA256.values():  # whatever is pinned is a full sha256 per file, per vendor
        for vendor, files in builds.items():
            assert vendor in embedded.VENDORS, vendor
            assert all(len(h) == 64 and set(h) <= HEX for h in files.values()), files


def test_this_machines_cpu_vendor_is_read_from_proc_cpuinfo():
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    ids = {line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("vendor_id")}
    assert embedded.cpu_vendor() == (ids.pop() if ids else None)


def test_model_hash_says_whether_the_served_file_is_a_pinned_build(tmp_path, monkeypatch):
    import hashlib

    monkeypatch.setattr(embedded, "cpu_vendor", lambda: "GenuineIntel")
    f = tmp_path / "tiny-x.gguf"
    f.write_bytes(b"GGUF weights")
    digest = hashlib.sha256(b"GGUF weights").hexdigest()
    assert embedded.model_hash(f) == {
        "file": "tiny-x.gguf",
        "sha256": digest,
        "pinned": None,
        "matches": None,
        "build": None,
    }
    intel = {"gguf": "9" * 64, "model.safetensors": "0" * 64}
    monkeypatch.setitem(embedded.MODEL_SHA256, "tiny-x", {"AuthenticAMD": {"gguf": digest}, "GenuineIntel": intel})
    # the AMD build served on an Intel machine is still a pinned build: the AMD one
    assert embedded.model_hash(f) == {"file": "tiny-x.gguf", "sha256": digest, "pinned": digest, "matches": True,
                                      "build": "AuthenticAMD"}  # fmt: skip
    f.write_bytes(b"GGUF other weights")
    h = embedded.model_hash(f)
    assert h["matches"] is False and h["pinned"] == "9" * 64 and h["build"] is None  # against this vendor's
    monkeypatch.setattr(embedded, "cpu_vendor", lambda: "HygonGenuine")
    h = embedded.model_hash(f)  # no build pinned for this vendor: nothing to read it against
    assert h["matches"] is None and h["pinned"] is None
    # a folder serves its single safetensors file, compared with that pin
    monkeypatch.setattr(embedded, "cpu_vendor", lambda: "GenuineIntel")
    d = tmp_path / "tiny-x"
    d.mkdir()
    (d / "model.safetensors").write_bytes(b"")
    assert embedded.model_hash(d) == {
        "file": "model.safetensors",
        "sha256": hashlib.sha256(b"").hexdigest(),
        "pinned": "0" * 64,
        "matches": False,
        "build": None,
    }
    assert embedded.model_hash(tmp_path / "absent") is None


def test_the_article_states_the_served_hash_and_the_pin():
    ok = {"file": "m.gguf", "sha256": "a" * 64, "pinned": "a" * 64, "matches": True, "build": "GenuineIntel"}

    def said(metas):  # as the analysis states the blocks' hashes, and the article words them
        return model_hash_sentence(weights_served(metas))

    text, style = said([{"model_sha256": ok}, {"model_sha256": ok}])
    assert "sha256 " + "a" * 64 + ", every block" in text and style == ""
    assert "pins for the model trained on Intel CPUs" in text
    other = {**ok, "sha256": "b" * 64, "matches": False, "build": None}
    text, style = said([{"model_sha256": other}])
    assert style == "warn" and "other weights" in text and "refuses to compare" in text
    text, style = said([{"model_sha256": ok}, {"model_sha256": other}])
    assert style == "warn" and "different weights" in text
    text, style = said([{"model_sha256": {**ok, "pinned": None, "matches": None, "build": None}}])
    assert style == "" and "No hash is pinned for this model" in text and "per CPU vendor" in text
    text, style = said([{"model_sha256": ok}, {}])
    assert ", every block" not in text and "in 1 of 2 blocks" in text
    assert said([{"model_fingerprint": {}}]) is None


def _trainer() -> Path:
    py = Path(os.environ.get("BRACKET_TEST_TRAINER", ROOT / embedded.TRAINER_VENV)) / "bin" / "python"
    if not py.exists():
        # the workflow's rule, under the lock the engine fixtures take: xdist workers never build in one folder at once
        build_in_checkout(f"{embedded.TRAINER_VENV}/.installed")
        py = ROOT / embedded.TRAINER_VENV / "bin" / "python"
    return py


@pytest.mark.engine
def test_training_twice_from_one_seed_gives_the_same_bits(tmp_path):
    """A small shape (so it runs in a minute) trained twice in the trainer's environment, no vLLM:
    every file build_model.py writes has the same sha256."""
    py = _trainer()
    builder = Path(embedded.__file__).parent / "build_model.py"
    infos = []
    for i in (1, 2):
        out = tmp_path / str(i) / "tiny"
        proc = subprocess.run(
            [
                str(py),
                str(builder),
                "--out",
                str(out),
                "--seed",
                "3",
                "--layers",
                "1",
                "--hidden",
                "64",
                "--vocab",
                "600",
                "--steps",
                "4",
            ],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
        infos.append(json.loads((out / "build.json").read_text()))
    a, b = (x["sha256"] for x in infos)
    assert {"model.safetensors", "tokenizer.json", "config.json"} <= set(a)
    assert a == b
    # and the GGUF llama.cpp serves, by the converter of the workflow's llama.cpp source, where it is built
    record = ROOT / embedded.LLAMACPP_BUILD
    if record.exists():
        src = json.loads(record.read_text())["source_dir"]
        ggufs = []
        for i in (1, 2):
            out = tmp_path / str(i) / "tiny.gguf"
            proc = subprocess.run(
                [
                    str(py),
                    str(Path(embedded.__file__).parent / "to_gguf.py"),
                    src,
                    str(tmp_path / str(i) / "tiny"),
                    str(out),
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
            ggufs.append(embedded.file_sha256(out))
        assert ggufs[0] == ggufs[1]
    assert infos[0]["env"]["ATEN_CPU_CAPABILITY"] == "avx2" and infos[0]["threads"] == 2
    # MKL's BLAS on the branch every vendor's CPU takes, as MKL itself reports it (the trainer's torch carries MKL)
    assert infos[0]["env"]["MKL_CBWR"] == "COMPATIBLE,STRICT" and infos[0]["mkl_branch"] == "COMPATIBLE"
    assert infos[0]["cpu"]
    assert "vllm" not in str(py)


@pytest.mark.engine
def test_the_trainer_refuses_an_mkl_branch_that_depends_on_the_cpu(tmp_path):
    """Asked for its AVX512 branch, MKL takes AUTO on a CPU without AVX-512 or from another vendor than Intel,
    and AVX512 on an Intel CPU with it: neither is the portable branch, and the trainer stops before it trains."""
    py = _trainer()
    code = (
        "import os, sys; os.environ['MKL_CBWR'] = 'AVX512,STRICT'; sys.path.insert(0, sys.argv[1]); "
        "from pathlib import Path; import build_model; build_model.build(Path(sys.argv[2]), 1, 1, 32, 300, 1)"
    )
    proc = subprocess.run(
        [str(py), "-c", code, str(Path(embedded.__file__).parent), str(tmp_path / "m")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode != 0
    assert (
        "MKL took its" in proc.stderr and "not COMPATIBLE" in proc.stderr and "MKL_CBWR='AVX512,STRICT'" in proc.stderr
    )
    assert not (tmp_path / "m").exists()


@pytest.mark.engine
def test_the_workflow_built_model_has_the_pinned_hash(embedded_engine):
    """The model the workflow trained on this machine is the one the package pins (and the committed
    article measured); when it is not, build.json names what differs (Python, torch, CPU path)."""
    _, model = embedded_engine
    info = json.loads((model / "build.json").read_text())
    assert model.name in embedded.MODEL_SHA256, (
        f"no hash pinned for {model.name}: add `python -m bracket.embedded {model}`'s entry to MODEL_SHA256"
    )
    vendor = embedded.build_vendor(info)
    assert vendor in embedded.MODEL_SHA256[model.name], (
        f"no build pinned for {model.name} trained on {info.get('cpu')}: add `python -m bracket.embedded {model}`'s "
        "entry to MODEL_SHA256"
    )
    pins = embedded.MODEL_SHA256[model.name][vendor]
    got = info.get("sha256") or {}
    assert {k: got.get(k) for k in ("model.safetensors", "tokenizer.json")} == {
        k: pins[k] for k in ("model.safetensors", "tokenizer.json")
    }, (
        f"trained with Python {info.get('python')}, torch {info.get('torch')}, CPU path {info.get('cpu_capability')}, "
        f"MKL branch {info.get('mkl_branch')}, on {info.get('cpu')}"
    )
    gguf = model.with_name(model.name + ".gguf")
    if gguf.exists():
        assert embedded.model_hash(gguf)["matches"] is True
