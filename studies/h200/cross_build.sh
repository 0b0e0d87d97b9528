#!/usr/bin/env bash
# llama-server with CUDA for one GPU architecture, built on a machine with no GPU, so that a lent GPU
# machine spends its time measuring rather than compiling (the CUDA build takes 270-300 s of a
# 16-core GPU machine; here, on 2 cores, about 25 minutes that cost no device time).
#
# Usage: cross_build.sh OUT_TARBALL.tar.xz [ARCH]    (ARCH: CUDA compute capability, default 90 = H100/H200)
# Needs nvcc (CUDA 13 here, the GPU image's version) and cuBLAS headers and libraries: the CUDA 13
# wheels (nvidia-cublas, nvidia-cuda-runtime; any venv holding them), found under $CUBLAS_ROOT
# (a folder with include/cublas_v2.h and lib/libcublas.so.13). No libcuda.so is needed:
# GGML_CUDA_NO_VMM=ON drops ggml's one direct use of the driver library (its virtual-memory pool;
# the legacy pool takes its place). The CPU code is built for AVX2 (GGML_NATIVE=OFF), not for this
# machine's CPU, which the GPU machine's need not share.
set -euo pipefail
tarball="$1"; arch="${2:-90}"
version=0.3.36
src="${BRACKET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bracket}/llama.cpp/src-$version"
[ -f "$src/CMakeLists.txt" ] || { echo "no llama.cpp source at $src: run 'snakemake --cores 1 resources/engines/llama.cpp-$version/build.json' once (it unpacks the sdist)" >&2; exit 2; }
cublas="${CUBLAS_ROOT:?set CUBLAS_ROOT to a folder with include/cublas_v2.h and lib/libcublas.so.13}"
nvcc="$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)"
[ -x "$nvcc" ] || { echo "no nvcc on PATH or under /usr/local/cuda*/bin" >&2; exit 2; }
cuda_root="$(cd "$(dirname "$(readlink -f "$nvcc")")/.." && pwd)"
# BUILD_DIR: keep the build (ninja resumes an interrupted one; a second run only relinks)
work="${BUILD_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/llama-cross-XXXXXX")}"
mkdir -p "$work/cublas"; rm -rf "$work/pkg"
for lib in libcublas libcublasLt; do   # the link-time names, and the sonames the executable's link resolves
  ln -sfn "$cublas/lib/$lib.so.13" "$work/cublas/$lib.so"; ln -sfn "$cublas/lib/$lib.so.13" "$work/cublas/$lib.so.13"
done
opts=(-DCMAKE_BUILD_TYPE=Release -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_TESTS=OFF
      -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=OFF -DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$arch"
      -DGGML_CUDA_NO_VMM=ON)
start=$(date +%s)
PATH="$cuda_root/bin:$PATH" cmake -S "$src" -B "$work/build" -G Ninja "${opts[@]}" \
  "-DCUDAToolkit_ROOT=$cuda_root" "-DCUDA_cublas_LIBRARY=$work/cublas/libcublas.so" \
  "-DCUDA_cublasLt_LIBRARY=$work/cublas/libcublasLt.so" \
  "-DCMAKE_CUDA_FLAGS=-I$cublas/include" "-DCMAKE_CXX_FLAGS=-I$cublas/include" "-DCMAKE_C_FLAGS=-I$cublas/include" \
  "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,$work/cublas" >&2
PATH="$cuda_root/bin:$PATH" cmake --build "$work/build" --target llama-server -j "$(nproc)" >&2
secs=$(( $(date +%s) - start ))
mkdir -p "$work/pkg/bin"
cp -a "$work/build/bin/llama-server" "$work/build/bin/"*.so* "$work/pkg/bin/"
# OpenMP's runtime (the CPU backend's threads) goes along: the GPU image need not have GCC's
gomp="$(ldd "$work/build/bin/libggml-cpu.so" | awk '/libgomp/ {print $3}')"
[ -z "$gomp" ] || cp -L "$gomp" "$work/pkg/bin/"
strip --strip-unneeded "$work/pkg/bin/"* 2>/dev/null || true
python3 - "$work/pkg/build.json" "$version" "$secs" "$src" "$arch" "$("$nvcc" --version | tail -1)" "${opts[@]}" <<'PY'
import json, os, platform, subprocess, sys
out, version, secs, src, arch, nvcc, *opts = sys.argv[1:]
sha = open(os.path.join(src, ".sdist_sha256")).read().strip() if os.path.exists(os.path.join(src, ".sdist_sha256")) else None
cxx = subprocess.run(["c++", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
json.dump({"engine": "llama.cpp", "source": f"llama-cpp-python=={version} sdist (vendor/llama.cpp)", "version": version,
           "sdist_sha256": sha, "backend": "cuda", "key": f"{version}-cuda-cross-sm{arch}", "cmake_options": opts,
           "build_seconds": int(secs), "machine": platform.machine(), "compiler": cxx, "nvcc": nvcc,
           "built_on": f"{platform.node()} (no GPU; cross-built for sm_{arch} by studies/h200/cross_build.sh)"},
          open(out, "w"), indent=1)
PY
XZ_OPT="-9e -T0" tar -cJf "$tarball" -C "$work/pkg" .   # xz: 43 MB against gzip's 45 (a call carries 64 MiB)
echo "built in $secs s: $tarball ($(du -h "$tarball" | cut -f1))" >&2
