#!/usr/bin/env bash
# How this repository carried `snakemake h200_llamacpp --cores 16 --resources exclusive_host=1` to
# its lent H200 (studies/h200/README.md): a thin wrapper around the product command for a machine
# that reaches nothing outside, whose calls last at most 10 minutes, and whose image cannot install
# nbconvert's templates (the article is rendered off the machine: studies/h200/render_here.py).
#
# Usage, from a folder holding repo/ (`git archive` of this repository), llama-src.tar.gz (the
# llama-cpp-python 0.3.36 sdist's vendor/llama.cpp, trimmed) and whl/ (py3.12 wheels of what the
# GPU image lacks: snakemake, jsonschema, gguf and their needs):
#     bash repo/bench/h200/run.sh LIMIT_S
# What differs from a GPU owner's run: the wheels go to /tmp/site; the source is unpacked where the
# build rule looks for it (so nothing is downloaded); Snakemake runs in its own session, so that a
# block outlasting this call finishes while a next call on the same warm machine
# (`bash /tmp/bgpu/repo/bench/h200/run.sh LIMIT_S`) waits for it; its targets are the blocks, the
# byte account and the ceiling rather than the article. After the blocks, studies/h200/body_cost.py
# measures bracket's request body against a plain client's on one more fresh server. Results go
# to $OUT as they come.
set -uo pipefail
limit="${1:-540}"
t0=$(date +%s)
here="$(pwd)"
out="${OUT:-$here/out}"; mkdir -p "$out"
exp=h200_llamacpp
# Work in a copy outside the checkout: a later call that carries other paths has the checkout's copy
# removed, and a Snakemake still running there would lose its files.
# (BGPU, BRACKET_CACHE and SITE move it all elsewhere for a rehearsal on a CPU machine.)
w="${BGPU:-/tmp/bgpu}"; site="${SITE:-/tmp/site}"
if [ ! -d "$w/repo" ]; then mkdir -p "$w" && cp -a "$here/repo" "$w/repo"; fi
repo="$w/repo"
export BRACKET_CACHE="${BRACKET_CACHE:-/tmp/bcache}" PYTHONUNBUFFERED=1
src="$BRACKET_CACHE/llama.cpp/src-0.3.36"
left() { echo $(( limit - ($(date +%s) - t0) )); }
say() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$out/steps.log"; }
save() {  # what exists so far, to $OUT (a call cut short still returns it)
  (cd "$repo" && tar -czf "$out/results.tar.gz" results/$exp logs/$exp logs/engine resources/engines \
     studies/h200/body_cost.json studies/h200/body_cost.log studies/h200/body_cost-server.log 2>/dev/null)
  cp $w/snakemake.log "$out/" 2>/dev/null
}

say "host $(hostname); $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1); $(nproc) cores"
if [ ! -f $site/.done ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $site "$here"/whl/*.whl \
    && touch $site/.done || { say "wheels failed to install"; exit 2; }
  say "wheels installed: $(ls "$here"/whl | wc -l)"
fi
export PYTHONPATH="$site:$repo/workflow" PATH="$site/bin:/usr/local/cuda/bin:$PATH"
if [ ! -f "$src/CMakeLists.txt" ]; then
  mkdir -p "$BRACKET_CACHE/llama.cpp" && tar -xzf "$here/llama-src.tar.gz" -C "$BRACKET_CACHE/llama.cpp" \
    && say "llama.cpp source unpacked: $src"
fi

cd "$repo"
nblocks=$(python3 -c "import yaml; d=yaml.safe_load(open('experiments/$exp.yaml')); print(d['design']['rounds'] * len(d['arms']))")
targets="results/$exp/weights.json results/$exp/ceiling.json $(for k in $(seq 0 $((nblocks - 1))); do printf 'results/%s/raw/block-%d.jsonl ' $exp $k; done)"
if [ ! -f $w/snakemake.rc ] && ! pgrep -f "python3 -m snakemake results/$exp" > /dev/null; then
  say "snakemake started ($nblocks blocks) with $(left) s left in this call"
  setsid bash -c "python3 -m snakemake $targets --cores 16 --keep-going --rerun-incomplete --resources exclusive_host=1 \
    > $w/snakemake.log 2>&1; echo \$? > $w/snakemake.rc" < /dev/null > /dev/null 2>&1 &
fi
n=0
while [ ! -f $w/snakemake.rc ] && [ "$(left)" -gt 25 ]; do
  sleep 5; save; n=$((n + 1))
  [ $((n % 12)) -eq 0 ] && say "blocks done: $(ls results/$exp/raw/block-*.meta.json 2>/dev/null | wc -l) of $nblocks; last: $(grep -E '^rule |^localrule ' $w/snakemake.log | tail -1)"
done
save
if [ ! -f $w/snakemake.rc ]; then
  say "snakemake still running (blocks done: $(ls results/$exp/raw/block-*.meta.json 2>/dev/null | wc -l) of $nblocks); a next call resumes"
  exit 0
fi
[ "$(cat $w/snakemake.rc)" = 0 ] || tail -40 $w/snakemake.log
say "snakemake exit $(cat $w/snakemake.rc); $(grep -h '^wrote' logs/engine/synthetic-qwen3-*-f16.log 2>/dev/null | tail -1)"
say "build: $(python3 -c "import json; d=json.load(open('resources/engines/llama.cpp-0.3.36/build.json')); print(d['backend'], d['build_seconds'], 's')" 2>&1)"
if [ ! -f studies/h200/body_cost.json ] && [ "$(left)" -gt 100 ]; then
  say "body cost: bracket's request body against a plain client's, one fresh server"
  python3 studies/h200/body_cost.py experiments/$exp.yaml fa_on --rounds ${BODY_ROUNDS:-8} --port ${BODY_PORT:-8032} \
    --log studies/h200/body_cost-server.log --json studies/h200/body_cost.json > studies/h200/body_cost.log 2>&1
  say "body cost exit $?"; tail -8 studies/h200/body_cost.log
fi
save
say "results packed ($(du -h "$out/results.tar.gz" | cut -f1))"
