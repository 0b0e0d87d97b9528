#!/usr/bin/env bash
# bracket on a lent H200: build llama.cpp with CUDA, write a Qwen3-8B-shaped GGUF, and run the
# experiment bench/h200/h200_llamacpp.yaml through the workflow itself (Snakemake, native launch).
#
# Usage, from a folder holding repo/ (a copy of this repository), llama-src.tar.gz (the llama.cpp
# source of the llama-cpp-python 0.3.36 sdist, trimmed) and whl/ (wheels of what the image lacks):
#     bash repo/bench/h200/run.sh LIMIT_S            # the first call
#     bash /tmp/bgpu/repo/bench/h200/run.sh LIMIT_S  # a later call on the same machine, resuming
# Idempotent: a second call on the same machine finds the build, the GGUF and the blocks already
# done and resumes: Snakemake runs in its own session, so a block that outlasts one call finishes
# while the next call waits for it. Results go to $OUT as they are made.
set -uo pipefail
limit="${1:-540}"
t0=$(date +%s)
here="$(pwd)"
out="${OUT:-$here/out}"; mkdir -p "$out"
# Work in a copy outside the checkout: a later call that carries other paths has the checkout's
# copy of repo/ removed, and a Snakemake still running there would lose its files and results (it
# did once: the last block was run again). A resuming call runs /tmp/bgpu/repo/bench/h200/run.sh.
if [ ! -d /tmp/bgpu/repo ]; then mkdir -p /tmp/bgpu && cp -a "$here/repo" /tmp/bgpu/repo; fi
repo=/tmp/bgpu/repo
export BRACKET_CACHE=/tmp/bcache PYTHONUNBUFFERED=1
cache="$BRACKET_CACHE/llama.cpp"; src="$cache/src-0.3.36"
gguf=/tmp/bgpu/qwen3-8b-shaped-f16.gguf
left() { echo $(( limit - ($(date +%s) - t0) )); }
say() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$out/steps.log"; }

say "host $(hostname); $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
if [ ! -f /tmp/site/.done ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site whl/*.whl \
    && touch /tmp/site/.done
  say "wheels installed: $(ls whl | wc -l)"
fi
# The image's versions of what the peer tools (run_peers.sh) take from it rather than from wheels.
say "image: $(python3 -m pip list 2>/dev/null | grep -iE '^(pyarrow|pandas|aiohttp|aiofiles|rich|click|pillow|psutil|huggingface.hub|transformers|tokenizers|numpy|httpx|fsspec|multidict|prometheus.client|torch) ' | tr -s ' ' | tr '\n' ';')"
export PYTHONPATH="/tmp/site:$repo/workflow:$src/gguf-py"
export PATH="/tmp/site/bin:/usr/local/cuda/bin:$PATH"
if [ ! -f "$src/CMakeLists.txt" ]; then
  mkdir -p "$cache" && tar -xzf llama-src.tar.gz -C "$cache" && say "source unpacked: $src"
fi

# The CUDA build and the GGUF in parallel, each in its own session so that a call ending early
# does not stop them (a later call on the same machine waits for them and resumes).
record="$repo/resources/engines/llama.cpp-0.3.36/build.json"
if [ ! -f "$record" ]; then
  setsid bash "$repo/workflow/scripts/build_llamacpp.sh" 0.3.36 auto 16 "$record" > "$out/build.log" 2>&1 < /dev/null &
fi
if [ ! -f "$gguf" ] && [ ! -f "$gguf.writing" ]; then
  mkdir -p /tmp/bgpu && touch "$gguf.writing"
  setsid bash -c "python3 '$repo/bench/h200/write_gguf.py' '$src' '$gguf.tmp' --shape 8b && mv '$gguf.tmp' '$gguf'; rm -f '$gguf.writing'" \
    > "$out/gguf.log" 2>&1 < /dev/null &
fi
mkdir -p /tmp/bgpu
# The copy probe while the CPUs build (it needs only the GPU): the measured side of the ceiling.
if [ ! -f "$out/bandwidth_probe.json" ] && [ ! -f /tmp/bgpu/bandwidth_probe.json ]; then
  (cd "$repo" && python3 bench/bandwidth_probe.py --json /tmp/bgpu/bandwidth_probe.json > "$out/bandwidth_probe.log" 2>&1)
  say "bandwidth probe: $(tail -3 "$out/bandwidth_probe.log" | tr '\n' ' ')"
fi
cp /tmp/bgpu/bandwidth_probe.json "$out/" 2>/dev/null
while [ ! -f "$record" ] || [ ! -f "$gguf" ]; do
  if [ "$(left)" -lt 30 ]; then say "out of time waiting for the build or the GGUF"; exit 3; fi
  if [ -f "$gguf.writing" ] || pgrep -f build_llamacpp.sh > /dev/null || [ -f "$gguf" ]; then sleep 5; else
    say "the build or the GGUF writer stopped without a result"; tail -20 "$out/build.log" "$out/gguf.log"; exit 4; fi
done
say "build: $(python3 -c "import json; d=json.load(open('$record')); print(d['backend'], d['build_seconds'], 's', d['cmake_options'])")"
say "gguf: $(ls -la $gguf)"

cd "$repo"
cmp -s bench/h200/h200_llamacpp.yaml experiments/h200_llamacpp.yaml || cp bench/h200/h200_llamacpp.yaml experiments/  # same mtime on a resume
# Snakemake in its own session, so that a call ending before the last block leaves it running: the
# next call on the same machine waits for it instead of killing a block half-way (a killed block is
# run again from its start). The targets are the blocks and the physics; the article is rendered
# off the machine (bench/h200/render_here.py), since nbconvert's templates do not install with
# `pip install --target`.
exp=h200_llamacpp; nblocks=$(python3 -c "import yaml; d=yaml.safe_load(open('experiments/$exp.yaml')); print(d['design']['rounds'] * len(d['arms']))")
targets="results/$exp/weights.json results/$exp/ceiling.json $(for k in $(seq 0 $((nblocks - 1))); do printf 'results/%s/raw/block-%d.jsonl ' $exp $k; done)"
if [ ! -f /tmp/bgpu/snakemake.rc ] && ! pgrep -f "snakemake --cores 1" > /dev/null; then
  say "snakemake started ($nblocks blocks) with $(left) s left in this call"
  setsid bash -c "python3 -m snakemake --cores 1 --scheduler greedy --keep-going $targets > /tmp/bgpu/snakemake.log 2>&1; echo \$? > /tmp/bgpu/snakemake.rc" \
    < /dev/null > /dev/null 2>&1 &
fi
while [ ! -f /tmp/bgpu/snakemake.rc ] && [ "$(left)" -gt 40 ]; do sleep 5; done
cp /tmp/bgpu/snakemake.log "$out/" 2>/dev/null
if [ -f /tmp/bgpu/snakemake.rc ]; then say "snakemake exit $(cat /tmp/bgpu/snakemake.rc)"; else
  say "snakemake still running (blocks done: $(ls results/$exp/raw/block-*.meta.json 2>/dev/null | wc -l)); a next call resumes"; fi
tar -czf "$out/h200_results.tar.gz" results/$exp logs/$exp resources/engines 2>/dev/null
say "results packed ($(du -h "$out/h200_results.tar.gz" | cut -f1))"
