#!/usr/bin/env bash
# bracket and llama-benchy beside llama-server's own timings on a lent H200 (bench/harness_live.py):
# the CUDA build of llama-server (the workflow's build rule, the llama-cpp-python 0.3.36 sdist's
# llama.cpp), the Qwen3-8B-shaped F16 GGUF with random weights (bench/h200/write_gguf.py), served
# without speculation (-fa on) and with the model as its own draft, one request at a time.
#
# Usage, from a folder holding peers/ (repo/: this repository's workflow/, bench/ and
# experiments/prompts/; whl/: llama-benchy 0.4.0 and what the image lacks for it and bracket;
# tokenizer.json: any tokenizer, the peers only build prompts with it) and llama-src.tar.gz:
#     bash peers/repo/bench/h200/run_peers.sh
# Results go to $OUT: harness_live_h200.md / .csv, the build record and the logs.
set -uo pipefail
t0=$(date +%s)
here="$(pwd)"; P="$here/peers"; repo="$P/repo"
out="${OUT:-$here/out}"; mkdir -p "$out"
say() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$out/steps.log"; }
export BRACKET_CACHE=/tmp/bcache PYTHONUNBUFFERED=1
src="$BRACKET_CACHE/llama.cpp/src-0.3.36"; gguf=/tmp/bgpu/qwen3-8b-shaped-f16.gguf; record=/tmp/bgpu/build.json
say "host $(hostname); $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$P"/whl/*.whl || exit 2
export PYTHONPATH="/tmp/site:$repo/workflow:$src/gguf-py" PATH="/tmp/site/bin:/usr/local/cuda/bin:$PATH"
# harness_live finds a peer as PEERS/<name>/bin/{python,<name>}: the image's python3 with the wheels above.
mkdir -p /tmp/peers/llama-benchy/bin && ln -sf "$(command -v python3)" /tmp/peers/llama-benchy/bin/python \
  && ln -sf /tmp/site/bin/llama-benchy /tmp/peers/llama-benchy/bin/llama-benchy
export BRACKET_PEERS_DIR=/tmp/peers
mkdir -p "$BRACKET_CACHE/llama.cpp" /tmp/bgpu && tar -xzf "$here/llama-src.tar.gz" -C "$BRACKET_CACHE/llama.cpp"
say "wheels installed, source unpacked"
bash "$repo/workflow/scripts/build_llamacpp.sh" 0.3.36 auto 16 "$record" > "$out/build.log" 2>&1 &
build=$!
python3 "$repo/bench/h200/write_gguf.py" "$src" "$gguf" --shape 8b > "$out/gguf.log" 2>&1 &
writer=$!
wait "$build"; say "build exit $?"; wait "$writer"; say "gguf exit $?: $(ls -la "$gguf" 2>&1)"
cp "$record" "$out/build.json" 2>/dev/null
server=$(python3 -c "import json; print(json.load(open('$record'))['llama_server'])") || exit 3
cd "$repo" && python3 bench/harness_live.py --servers llamacpp_plain,llamacpp_draft --tools bracket,llama-benchy \
  --tokens 128 --repeats 5 --llama-server "$server" --gguf "$gguf" --tokenizer "$P/tokenizer.json" \
  --server-args "-ngl 999 -c 4096 --slots -fa on" --draft-args "--spec-draft-ngl 999" --startup-timeout 300 \
  --machine "one NVIDIA H200 (CUDA build, Qwen3-8B-shaped F16 GGUF, random weights), 16 CPU cores" \
  --out "$out/harness_live_h200.md" --csv "$out/harness_live_h200.csv" 2>&1 | tee "$out/harness_live.log"
say "harness_live exit ${PIPESTATUS[0]}"
