#!/usr/bin/env bash
# bracket, llama-benchy, AIPerf and guidellm beside llama-server's own timings on a lent H200
# (bench/harness_live.py): the CUDA build of llama-server (the workflow's build rule, the
# llama-cpp-python 0.3.36 sdist's llama.cpp), the Qwen3-8B-shaped F16 GGUF with random weights
# (workflow/bracket/embedded/synthetic.py), served without speculation (-fa on) and with the model as its own
# draft, one request at a time.
#
# Usage, from the folder run.sh ran in (repo/, whl/, llama-src.tar.gz), on the same machine right
# after it, so that the build, the GGUF and bracket's wheels are there already (else they are made
# here), with peers/ beside them: repo/ (this repository's workflow/, bench/ and experiments/prompts/),
# whl/ (llama-benchy 0.4.0, AIPerf 0.13.0, guidellm 0.8.1 and what the GPU image lacks for them:
# studies/h200/README.md lists them) and tokenizer.json (any tokenizer; the peers build prompts with it):
#     bash peers/repo/bench/h200/run_peers.sh [TOOLS]
# Results go to $OUT: harness_live_h200.md / .csv and the logs.
set -uo pipefail
t0=$(date +%s)
tools="${1:-bracket,llama-benchy,aiperf,guidellm}"
here="$(pwd)"; P="$here/peers"; repo="$P/repo"
out="${OUT:-$here/out}"; mkdir -p "$out"
say() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$out/steps.log"; }
export BRACKET_CACHE=/tmp/bcache PYTHONUNBUFFERED=1
src="$BRACKET_CACHE/llama.cpp/src-0.3.36"; gguf=/tmp/bgpu/qwen3-8b-shaped-f16.gguf
say "host $(hostname); $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
# bracket's own needs (run.sh installed them on this machine already, else from whl/ here).
if [ ! -f /tmp/site/.done ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$here"/whl/*.whl \
    && touch /tmp/site/.done || exit 2
fi
# llama-benchy beside bracket, as in the first peers run; AIPerf and guidellm in a site of their own,
# so that neither sees bracket's pandas 3.1.1 but the image's (3.0.6; AIPerf pins ~= 2.3.3 and ran with it). The peers'
# site takes what the image lacks, from peers/whl (pydantic and the few others bracket needs too included).
rm -rf /tmp/site-lb /tmp/site-peers
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site-lb "$P"/whl/llama_benchy-*.whl || exit 2
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site-peers \
  $(ls "$P"/whl/*.whl | grep -v llama_benchy) || exit 2
export PYTHONPATH="/tmp/site:$repo/workflow:$src/gguf-py" PATH="/tmp/site/bin:/usr/local/cuda/bin:$PATH"
# harness_live finds a peer as PEERS/<name>/bin/{python,<name>}.
for t in llama-benchy aiperf guidellm; do
  site=/tmp/site-peers; [ $t = llama-benchy ] && site=/tmp/site-lb:/tmp/site
  mkdir -p /tmp/peers/$t/bin && ln -sf "$(command -v python3)" /tmp/peers/$t/bin/python
  printf '#!/bin/sh\nPYTHONPATH=%s exec %s %s/bin/%s "$@"\n' $site "$(command -v python3)" ${site%%:*} $t \
    > /tmp/peers/$t/bin/$t && chmod +x /tmp/peers/$t/bin/$t
  v=$(/tmp/peers/$t/bin/$t --version 2>&1 | tail -1); say "$t: ${v:0:200}"
done
export BRACKET_PEERS_DIR=/tmp/peers
say "wheels installed: $(ls "$P"/whl | wc -l) for the peers"

# The build and the GGUF: run.sh's, where it ran here; else made now, side by side.
record=/tmp/bgpu/repo/resources/engines/llama.cpp-0.3.36/build.json  # run.sh's
[ -f "$record" ] || record=/tmp/bgpu/build.json
if [ ! -f "$record" ]; then
  mkdir -p "$BRACKET_CACHE/llama.cpp" && [ -f "$src/CMakeLists.txt" ] || tar -xzf "$here/llama-src.tar.gz" -C "$BRACKET_CACHE/llama.cpp"
  bash "$repo/workflow/scripts/build_llamacpp.sh" 0.3.36 auto 16 "$record" > "$out/build.log" 2>&1 &
  build=$!
fi
if [ ! -f "$gguf" ]; then
  mkdir -p /tmp/bgpu && python3 "$repo/workflow/bracket/embedded/synthetic.py" "$src" "$gguf" --shape 8b > "$out/gguf.log" 2>&1
  say "gguf exit $?"
fi
[ -n "${build:-}" ] && { wait "$build"; say "build exit $?"; }
say "build $record; gguf $(ls -la "$gguf" 2>&1)"
server=$(python3 -c "import json; print(json.load(open('$record'))['llama_server'])") || exit 3
cd "$repo" && python3 bench/harness_live.py --servers llamacpp_plain,llamacpp_draft --tools "$tools" \
  --tokens 128 --repeats 5 --llama-server "$server" --gguf "$gguf" --tokenizer "$P/tokenizer.json" \
  --server-args "-ngl 999 -c 4096 --slots -fa on" --draft-args "--spec-draft-ngl 999" --startup-timeout 300 \
  --machine "one NVIDIA H200 (CUDA build, Qwen3-8B-shaped F16 GGUF, random weights), 16 CPU cores" \
  --out "$out/harness_live_h200.md" --csv "$out/harness_live_h200.csv" 2>&1 | tee "$out/harness_live.log"
say "harness_live exit ${PIPESTATUS[0]}"
