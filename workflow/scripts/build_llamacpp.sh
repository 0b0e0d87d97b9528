#!/usr/bin/env bash
# Build llama.cpp's llama-server from the llama-cpp-python sdist on the Python package index,
# which vendors the full llama.cpp source. The build is cached outside the clone, keyed by the
# sdist version and the build options, so later clones and CI runs on the same machine reuse it.
#
# Usage: build_llamacpp.sh VERSION BACKEND JOBS [RECORD]
#   VERSION  llama-cpp-python sdist version, e.g. 0.3.36
#   BACKEND  cpu | cuda | auto (cuda where nvcc and an NVIDIA GPU are present, else cpu) | source
#            (source: only unpack the source; RECORD then names it)
#   JOBS     parallel build jobs
#   RECORD   where to write the build's record (build.json plus the cache path), for the workflow
# Cache root: $BRACKET_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/bracket)/llama.cpp
# Prints the build directory (holding bin/llama-server and build.json) on its last line.
set -euo pipefail
version="$1"; backend="$2"; jobs="${3:-2}"; record="${4:-}"
root="${BRACKET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bracket}/llama.cpp"
mkdir -p "$root"

have_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; }
find_nvcc() {
  if command -v nvcc >/dev/null 2>&1; then command -v nvcc; return; fi
  for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
    if [ -x "$d/nvcc" ]; then echo "$d/nvcc"; return; fi
  done
  return 1
}
# Source: the sdist, downloaded once, then vendor/llama.cpp extracted once per version (with the
# sdist's sha256 beside it, so a copy of the extracted tree carries where it came from). Under its
# own lock: the source alone (BACKEND source) and a build may be asked for together.
src="$root/src-$version"
unpack_source() {
  exec 8>"$root/.lock-src-$version"
  flock 8
  if [ ! -f "$src/CMakeLists.txt" ]; then
    sdist_dir="$root/sdist"; mkdir -p "$sdist_dir"
    sdist="$sdist_dir/llama_cpp_python-$version.tar.gz"
    if [ ! -f "$sdist" ]; then
      python3 -m pip download --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$sdist_dir" >&2
    fi
    tmp="$(mktemp -d "$root/.src-XXXXXX")"
    tar -xzf "$sdist" -C "$tmp" --strip-components=3 \
      --exclude='*/docs' --exclude='*/.github' --exclude='*/examples' \
      "llama_cpp_python-$version/vendor/llama.cpp"
    sha256sum "$sdist" | cut -d' ' -f1 > "$tmp/.sdist_sha256"
    rm -rf "$src"; mv "$tmp" "$src"
  fi
  flock -u 8
}
if [ "$backend" = source ]; then   # the source alone (gguf-py, the vocabularies), for rules that need no build
  unpack_source
  if [ -n "$record" ]; then
    mkdir -p "$(dirname "$record")"
    python3 - "$src" "$version" "$record" <<'EOF'
import json, os, sys
src, version, record = sys.argv[1:]
sha_file = os.path.join(src, ".sdist_sha256")
json.dump({"engine": "llama.cpp", "source": f"llama-cpp-python=={version} sdist (vendor/llama.cpp)",
           "version": version, "source_dir": src,
           "sdist_sha256": open(sha_file).read().strip() if os.path.exists(sha_file) else None},
          open(record + ".tmp", "w"), indent=1)
os.replace(record + ".tmp", record)
EOF
  fi
  echo "$src"; exit 0
fi

if [ "$backend" = auto ]; then
  if have_gpu && find_nvcc >/dev/null; then backend=cuda; else backend=cpu; fi
fi

# Options that matter offline (docs/llamacpp.md): no OpenSSL, no prebuilt web UI download.
opts=(-DCMAKE_BUILD_TYPE=Release -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=ON)
if [ "$backend" = cuda ]; then
  nvcc="$(find_nvcc)" || { echo "backend cuda: no nvcc found (looked on PATH and /usr/local/cuda*/bin)" >&2; exit 2; }
  export PATH="$(dirname "$nvcc"):$PATH"
  arch="${BRACKET_CUDA_ARCH:-}"
  if [ -z "$arch" ] && have_gpu; then
    arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')"
  fi
  opts+=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=${arch:-90}")
elif [ "$backend" != cpu ]; then
  echo "backend must be cpu, cuda or auto, not '$backend'" >&2; exit 2
fi
key="$version-$backend-$(printf '%s\n' "${opts[@]}" | sha256sum | cut -c1-10)"
dest="$root/$key"

exec 9>"$root/.lock-$key"
flock 9   # one build per key at a time (Snakemake and the test suite may ask together)
write_record() {
  [ -n "$record" ] || return 0
  mkdir -p "$(dirname "$record")"
  python3 - "$dest" "$record" "$1" <<'EOF'
import json, os, sys
dest, record, cached = sys.argv[1:]
info = json.load(open(os.path.join(dest, "build.json")))
info.update(path=dest, llama_server=os.path.join(dest, "bin", "llama-server"), cached=cached == "1")
json.dump(info, open(record + ".tmp", "w"), indent=1)
os.replace(record + ".tmp", record)
EOF
}
if [ -f "$dest/build.json" ] && [ -x "$dest/bin/llama-server" ]; then
  echo "cached: $dest" >&2; write_record 1; echo "$dest"; exit 0
fi

unpack_source
start=$(date +%s)
mkdir -p "$dest"   # an interrupted build resumes where it stopped (ninja)
cmake -S "$src" -B "$dest/build" -G Ninja "${opts[@]}" >&2
cmake --build "$dest/build" --target llama-server -j "$jobs" >&2
ln -sfn build/bin "$dest/bin"
"$dest/bin/llama-server" --version >&2 2>&1 || true
secs=$(( $(date +%s) - start ))
python3 - "$dest/build.json" "$version" "$backend" "$key" "$secs" "$src" "${opts[@]}" <<'EOF'
import json, os, platform, subprocess, sys
out, version, backend, key, secs, src, *opts = sys.argv[1:]
sha_file = os.path.join(src, ".sdist_sha256")
sha = open(sha_file).read().strip() if os.path.exists(sha_file) else None
def line(cmd, last=False):
    try:
        lines = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
        return lines[-1 if last else 0]
    except Exception:
        return None
info = {
    "engine": "llama.cpp", "source": f"llama-cpp-python=={version} sdist (vendor/llama.cpp)",
    "version": version, "sdist_sha256": sha, "source_dir": src, "backend": backend, "key": key,
    "cmake_options": opts, "build_seconds": int(secs), "machine": platform.machine(),
    "compiler": line(["c++", "--version"]),
    "nvcc": line(["nvcc", "--version"], last=True) if backend == "cuda" else None,
    "gpu": line(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]) if backend == "cuda" else None,
}
tmp = out + ".tmp"
json.dump(info, open(tmp, "w"), indent=1)
import os; os.replace(tmp, out)
EOF
echo "built in ${secs} s: $dest" >&2
write_record 0
echo "$dest"
