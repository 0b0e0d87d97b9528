"""Build the embedded engine's tiny model, deterministically, from text that ships with Python.

Runs inside the trainer's virtual environment (torch, transformers, tokenizers: workflow/envs/trainer.txt,
rule trainer_venv), not the analysis one and not vLLM's, so it imports nothing from bracket. Steps:
  1. corpus: the first N standard-library .py files (code) and pydoc's topic texts (prose),
     in sorted order;
  2. a byte-level BPE tokenizer trained with `tokenizers`;
  3. a Qwen3-architecture model, trained for a fixed number of steps from a seed, so greedy
     output repeats phrases rather than one token and speculative acceptance depends on what is
     generated;
  4. saved as bf16 safetensors with tokenizer files, plus build.json (seed, steps, losses, time, and
     the sha256 of every file written, which the package pins: bracket.embedded.MODEL_SHA256).

Bit-reproducible on one machine: a fixed thread count (reductions split by thread), one inter-op
thread, deterministic algorithms, every generator seeded, the tokenizer trained single-threaded,
torch's own CPU kernels held to the AVX2 code path (ATEN_CPU_CAPABILITY) so a CPU with AVX-512 computes
what one with AVX2 does, and MKL's BLAS held to its COMPATIBLE branch (MKL_CBWR), the one branch MKL
honours on every vendor's CPU: asked for its AVX2 branch, MKL takes it on an Intel CPU but silently
takes its AUTO branch on an AMD one, and the weights differ (bench/mkl_branch.py prints the branch each
request gets and the bytes of one sgemm: COMPATIBLE's bytes were equal on an AMD EPYC and an Intel Xeon,
AVX2's were not). The trainer refuses to run when MKL reports another branch than the one asked for, and
build.json records the branch and the CPU. Even so an AMD EPYC and an Intel Xeon train other weights (one
sgemm alike is not 300 steps alike), so the package pins a build per CPU vendor. What still varies between
machines of one vendor: the corpus is the
running interpreter's standard library (another Python version trains another model), and a CPU
without AVX2 or another torch build rounds differently. build.json records each, and the
pinned hash is the check: a reproduction that serves a model with another hash refuses to compare
(bracket.controls.reproduce).

Usage: python build_model.py --out DIR [--seed 1] [--layers 4] [--hidden 256] [--vocab 4096] [--steps 400]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import re
import sys
import sysconfig
import time
from pathlib import Path

SEQ_LEN = 96
BATCH = 24
LR = 3e-3
TRAIN_THREADS = 2
N_CODE_FILES = 300
SPECIAL = ["<|endoftext|>", "<|user|>", "<|assistant|>"]
# Set before torch or tokenizers load: one code path for torch's vectorised kernels and MKL's BLAS
# (conditional numerical reproducibility: the branch every vendor's CPU takes), and a single-threaded
# tokenizer trainer.
MKL_BRANCH = "COMPATIBLE"
DETERMINISTIC_ENV = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_CBWR": f"{MKL_BRANCH},STRICT",
    "TOKENIZERS_PARALLELISM": "false",
    "RAYON_NUM_THREADS": "1",
    "OMP_NUM_THREADS": str(TRAIN_THREADS),
    "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
    "PYTHONHASHSEED": "0",
}


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def corpus_texts() -> list[str]:
    """Code and prose from the running interpreter's standard library, in a stable order."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.glob("*.py") if p.is_file())[:N_CODE_FILES]
    # Runs of blank lines would teach greedy decoding to emit newlines forever; keep one.
    texts = [re.sub(r"\n\s*\n+", "\n\n", p.read_text(encoding="utf-8", errors="replace")) for p in files]
    try:
        from pydoc_data.topics import topics  # English reference text of the language

        texts += [topics[k] for k in sorted(topics)]
    except ImportError:  # pragma: no cover - every CPython ships it
        pass
    return texts


# mkl_service.h: what mkl_cbwr_get(MKL_CBWR_BRANCH) returns for each branch.
MKL_BRANCHES = {
    1: "OFF",
    2: "AUTO",
    3: "COMPATIBLE",
    4: "SSE2",
    6: "SSSE3",
    7: "SSE4_1",
    8: "SSE4_2",
    9: "AVX",
    10: "AVX2",
    11: "AVX512_MIC",
    12: "AVX512",
    13: "AVX512_MIC_E1",
    14: "AVX512_E1",
}


def mkl_branch(torch) -> str | None:
    """The branch MKL's BLAS takes in this process, as MKL reports it (mkl_cbwr_get, exported by the
    libtorch_cpu that carries MKL); None where torch carries no MKL (another build, another machine)."""
    import ctypes

    (torch.ones(2, 2) @ torch.ones(2, 2)).sum()  # MKL reads MKL_CBWR on its first call
    try:
        get = ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so")).mkl_serv_cbwr_get
    except (OSError, AttributeError):
        return None
    code = get(1)  # MKL_CBWR_BRANCH
    return MKL_BRANCHES.get(code, str(code))


def cpu_name() -> str | None:
    """The CPU's vendor and model as /proc/cpuinfo names them (Linux), else platform.processor()."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or None
    fields = dict(
        (k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in info.splitlines()) if v.strip()
    )
    return " ".join(x for x in (fields.get("vendor_id"), fields.get("model name")) if x) or None


def train_tokenizer(texts: list[str], vocab: int, out: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=SPECIAL,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "eos_token": "<|endoftext|>",
                "pad_token": "<|endoftext|>",
                "bos_token": None,
                "model_max_length": 2048,
                "add_bos_token": False,
                "clean_up_tokenization_spaces": False,
            },
            indent=1,
        )
    )
    (out / "special_tokens_map.json").write_text(
        json.dumps({"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"})
    )
    return tok


def build(out: Path, seed: int, layers: int, hidden: int, vocab: int, steps: int) -> dict:
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    t0 = time.time()
    branch = mkl_branch(torch)
    if branch not in (None, MKL_BRANCH):
        raise SystemExit(
            f"MKL took its {branch} branch, not {MKL_BRANCH} (MKL_CBWR={os.environ.get('MKL_CBWR')!r}): the weights "
            f"would depend on this CPU. Run build_model.py as a program (it sets MKL_CBWR={MKL_BRANCH},STRICT before "
            "torch loads), or report the CPU and torch build"
        )
    # A fixed thread count: reductions split differently across threads, so the weights would
    # otherwise depend on the machine's core count.
    torch.set_num_threads(TRAIN_THREADS)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set by an earlier parallel op in this process
        pass
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(seed)
    random.seed(seed)
    out.mkdir(parents=True, exist_ok=True)
    texts = corpus_texts()
    tok = train_tokenizer(texts, vocab, out)
    eos = tok.token_to_id("<|endoftext|>")
    ids: list[int] = []
    for t in texts:
        ids += tok.encode(t).ids + [eos]
    data = torch.tensor(ids, dtype=torch.long)

    heads = max(1, hidden // 64)
    config = Qwen3Config(
        vocab_size=tok.get_vocab_size(),
        hidden_size=hidden,
        intermediate_size=hidden * 3,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        head_dim=64,
        max_position_embeddings=2048,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        bos_token_id=eos,
        eos_token_id=eos,
        pad_token_id=eos,
    )
    model = Qwen3ForCausalLM(config)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)

    def lr_factor(s: int) -> float:
        """Linear warm-up over 20 steps, flat, then linear decay over the last fifth to 10%."""
        return min(1.0, (s + 1) / 20) * min(1.0, max(0.1, 5 * (1 - s / max(steps, 1))))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for step in range(steps):
        starts = torch.randint(0, len(data) - SEQ_LEN - 1, (BATCH,), generator=gen)
        batch = torch.stack([data[s : s + SEQ_LEN] for s in starts.tolist()])
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(round(loss.item(), 4))
        if step % 50 == 0 or step == steps - 1:
            print(f"step {step + 1}/{steps} loss {loss.item():.3f} ({time.time() - t0:.0f} s)", flush=True)
    model = model.to(torch.bfloat16)
    model.config.dtype = "bfloat16"
    model.save_pretrained(out, safe_serialization=True)
    GenerationConfig(eos_token_id=eos, pad_token_id=eos, do_sample=False).save_pretrained(out)
    info = {
        "seed": seed,
        "layers": layers,
        "hidden": hidden,
        "vocab": tok.get_vocab_size(),
        "steps": steps,
        "seq_len": SEQ_LEN,
        "batch": BATCH,
        "lr": LR,
        "corpus_tokens": len(ids),
        "corpus": f"first {N_CODE_FILES} stdlib .py files + pydoc_data.topics, Python {sys.version.split()[0]}",
        "final_loss": sum(losses[-20:]) / max(1, len(losses[-20:])) if losses else None,
        "losses_every_10": losses[::10],
        "build_seconds": round(time.time() - t0, 1),
        "torch": torch.__version__,
        "threads": TRAIN_THREADS,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkl_branch": branch,
        "cpu": cpu_name(),
        "env": {k: os.environ.get(k) for k in DETERMINISTIC_ENV},
    }
    import tokenizers
    import transformers

    info["transformers"], info["tokenizers"] = transformers.__version__, tokenizers.__version__
    info["sha256"] = {f.name: sha256(f) for f in sorted(out.iterdir()) if f.is_file() and f.name != "build.json"}
    (out / "build.json").write_text(json.dumps(info, indent=1))
    return info


def main(argv=None) -> int:
    missing = {k: v for k, v in DETERMINISTIC_ENV.items() if os.environ.get(k) != v}
    if (
        argv is None and missing and "torch" not in sys.modules
    ):  # they only act when set before torch loads: run again with them
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **DETERMINISTIC_ENV})
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--steps", type=int, default=300)
    a = p.parse_args(argv)
    info = build(a.out, a.seed, a.layers, a.hidden, a.vocab, a.steps)
    print(json.dumps({k: v for k, v in info.items() if k != "losses_every_10"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
