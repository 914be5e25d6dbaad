#!/usr/bin/env bash
# Builds llama.cpp's llama-server for any x86-64 CPU with AVX2 (Intel or AMD)
# and prints its path. The sources are llama.cpp as vendored in the
# llama-cpp-python sdist on PyPI, checked by sha256; the build is cached
# outside the checkout under that sha256, so only the first run pays for it
# (about 13 minutes on two cores). Prebuilt wheels are compiled for one CPU
# family and die with "Illegal instruction" on others; this build asks the
# compiler for AVX2, FMA and F16C only (GGML_NATIVE=OFF, no AVX-512, no AMX).
#
#   scripts/llama-server.sh            # prints /…/llama-server
set -euo pipefail

version=0.3.36
sdist_sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}"
home="$cache/llama-server/$sdist_sha256"
binary="$home/bin/llama-server"

if [ -x "$binary" ]; then
  echo "$binary"
  exit 0
fi

{
  echo "== building llama-server from llama-cpp-python $version's llama.cpp (first run only)"
  work="$home/work"
  rm -rf "$work"
  mkdir -p "$work"
  python3 -m venv "$work/venv"
  "$work/venv/bin/pip" install --quiet --disable-pip-version-check cmake==4.4.5 ninja==1.13.0
  # --no-binary for this package only: its build tools come as wheels.
  "$work/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps \
    --no-binary llama-cpp-python --dest "$work" "llama-cpp-python==$version"
  echo "$sdist_sha256  $work/llama_cpp_python-$version.tar.gz" | sha256sum --check --quiet \
    || { echo "llama-cpp-python $version's sdist does not match its sha256" >&2; exit 1; }
  tar -xzf "$work/llama_cpp_python-$version.tar.gz" -C "$work"
  src="$work/llama_cpp_python-$version/vendor/llama.cpp"
  # The web UI stays out (the tests run with --no-webui) and nothing is
  # fetched at build time; one static binary, linked only to the C runtime.
  "$work/venv/bin/cmake" -S "$src" -B "$work/build" -G Ninja \
    -DCMAKE_MAKE_PROGRAM="$work/venv/bin/ninja" \
    -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
    -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
    -DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_OPENMP=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >"$work/configure.log"
  "$work/venv/bin/cmake" --build "$work/build" --target llama-server -j "$(nproc)" >"$work/build.log"
  mkdir -p "$home/bin"
  cp "$work/build/bin/llama-server" "$binary.partial"
  mv "$binary.partial" "$binary"
  rm -rf "$work"
} >&2

echo "$binary"
