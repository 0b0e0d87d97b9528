#!/usr/bin/env bash
# bracket on a lent H200 with a prebuilt llama-server: the speculation experiment
# studies/h200/h200_speculation.yaml (the embedded trained tiny model as GGUF) through the workflow
# itself, Snakemake and native launch, with nothing compiled on the GPU machine.
#
# Usage, from the repository root on the GPU machine, with .gpu/spec/ carried:
#     bash studies/h200/run_spec.sh LIMIT_S
# .gpu/spec/ holds llama-server-cuda.tar.xz (studies/h200/cross_build.sh), the GGUF xz-compressed
# (tiny-qwen3-s1-l4-h256-v4096-t300.gguf.xz) and whl/ (wheels of what the image lacks for the blocks:
# snakemake, jsonschema, pydantic, gguf and their needs; without gguf the byte account cannot read
# the GGUF there, and studies/h200/render_here.py computes it here from the same file). Results are copied to $OUT every few seconds, so
# a call cut short returns every block it finished.
# BRACKET_SPEC_CPU=1 runs the same steps with this machine's CPU llama-server (a rehearsal).
set -uo pipefail
limit="${1:-200}"
t0=$(date +%s)
here="$(pwd)"
out="${OUT:-$here/out}"; mkdir -p "$out"
g="$here/.gpu/spec"
exp=h200_speculation
export PYTHONUNBUFFERED=1
left() { echo $(( limit - ($(date +%s) - t0) )); }
say() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$out/steps.log"; }
save() {  # what exists so far, to $OUT (a call cut short still returns it)
  mkdir -p "$out/run"
  cp -a results/$exp logs/$exp resources/engines "$out/run/" 2>/dev/null
  cp /tmp/bgpu/snakemake.log "$out/" 2>/dev/null
}

say "host $(hostname); $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
if [ -d "$g/whl" ] && [ -z "${BRACKET_SPEC_CPU:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$g"/whl/*.whl
  export PYTHONPATH="/tmp/site:$here/workflow" PATH="/tmp/site/bin:$PATH"
  say "wheels installed: $(ls "$g/whl" | wc -l)"
fi
mkdir -p /tmp/bgpu
python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
  "$g/tiny-qwen3-s1-l4-h256-v4096-t300.gguf.xz" /tmp/bgpu/tiny-qwen3-s1-l4-h256-v4096-t300.gguf
record="resources/engines/llama.cpp-0.3.36/build.json"
mkdir -p "$(dirname "$record")"
if [ -z "${BRACKET_SPEC_CPU:-}" ]; then
  dest=/tmp/bgpu/llama.cpp-cuda; mkdir -p "$dest" && python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$g/llama-server-cuda.tar.xz" "$dest"
  # cuBLAS and the CUDA runtime from the image (its CUDA 13 toolkit, or PyTorch's wheels)
  libs="$(find /usr/local /opt /usr/lib -name 'libcublas.so.13' 2>/dev/null | head -1)"
  rt="$(find /usr/local /opt /usr/lib -name 'libcudart.so.13' 2>/dev/null | head -1)"
  export LD_LIBRARY_PATH="$dest/bin:$(dirname "${libs:-/x/x}"):$(dirname "${rt:-/x/x}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  say "cuBLAS: ${libs:-none}; runtime: ${rt:-none}"
  missing="$(ldd "$dest/bin/llama-server" | grep 'not found')"
  [ -z "$missing" ] || { say "llama-server lacks libraries: $missing"; exit 3; }
  say "llama-server: $("$dest/bin/llama-server" --version 2>&1 | tr '\n' ' ')"
  python3 - "$dest" "$record" <<'PY'
import json, os, subprocess, sys
dest, record = sys.argv[1:]
info = json.load(open(os.path.join(dest, "build.json")))
gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip().splitlines()
info.update(path=dest, llama_server=os.path.join(dest, "bin", "llama-server"), cached=True, gpu=gpu[0] if gpu else None,
            ld_library_path=os.environ.get("LD_LIBRARY_PATH"))
json.dump(info, open(record, "w"), indent=1)
PY
  touch -d '2026-01-01' "$record"
fi

cp studies/h200/$exp.yaml experiments/$exp.yaml
nblocks=$(python3 -c "import yaml; d=yaml.safe_load(open('experiments/$exp.yaml')); print(d['design']['rounds'] * len(d['arms']))")
targets="results/$exp/weights.json results/$exp/ceiling.json $(for k in $(seq 0 $((nblocks - 1))); do printf 'results/%s/raw/block-%d.jsonl ' $exp $k; done)"
say "snakemake started ($nblocks blocks) with $(left) s left"
rm -f /tmp/bgpu/snakemake.rc
setsid bash -c "python3 -m snakemake --cores 1 --scheduler greedy --keep-going $targets > /tmp/bgpu/snakemake.log 2>&1; echo \$? > /tmp/bgpu/snakemake.rc" \
  < /dev/null > /dev/null 2>&1 &
while [ ! -f /tmp/bgpu/snakemake.rc ] && [ "$(left)" -gt 8 ]; do sleep 3; save; done
save
if [ -f /tmp/bgpu/snakemake.rc ]; then say "snakemake exit $(cat /tmp/bgpu/snakemake.rc)"; else
  say "snakemake still running at the limit (blocks done: $(ls results/$exp/raw/block-*.meta.json 2>/dev/null | wc -l))"; fi
tar -czf "$out/results.tar.gz" results/$exp logs/$exp resources/engines/llama.cpp-0.3.36 2>/dev/null
say "results packed ($(du -h "$out/results.tar.gz" | cut -f1))"
