#!/usr/bin/env bash
# Create the embedded model's trainer environment: CPU torch, transformers, tokenizers, safetensors,
# numpy, sentencepiece at the versions of workflow/envs/trainer.txt (1.2 GB, no vLLM).
# Usage: install_trainer.sh PYTHON VENV_DIR REQUIREMENTS
set -euo pipefail
python="$1"; venv="$2"; req="$3"
start=$(date +%s)
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip 2>&1 | grep -v "is ignored: it is neither" || true
# torch's CPU-only wheel: machines that carry it locally find it by themselves; elsewhere it comes
# from PyTorch's CPU index (PyPI's default torch wheel pulls several GB of CUDA libraries).
if ! "$venv/bin/pip" install -q -r "$req" 2>&1 | grep -v "is ignored: it is neither"; then :; fi
if ! "$venv/bin/python" -c "import torch, transformers, tokenizers, safetensors, sentencepiece" 2>/dev/null; then
  echo "plain install did not provide the trainer's packages; retrying with PyTorch's CPU index"
  "$venv/bin/pip" install -q -r "$req" --extra-index-url https://download.pytorch.org/whl/cpu
fi
"$venv/bin/python" -c "import torch, transformers, tokenizers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'tokenizers', tokenizers.__version__)"
echo "trainer environment ready in $(( $(date +%s) - start )) s: $venv"
