#!/usr/bin/env bash
# Installs (cached, sha256-checked) and starts three local model servers on
# loopback for examples/local-three-tier/switchyard.yaml:
#   small   127.0.0.1:18181  SmolLM2-135M-Instruct
#   mid     127.0.0.1:18182  Qwen2.5-Coder-1.5B-Instruct drafting with Qwen2.5-Coder-0.5B
#   ngram   127.0.0.1:18183  Gemma 3 270M with n-gram speculation (no draft model)
# Each server gets one thread (this is sized for a 2-core machine). Logs and
# PIDs go to DIR/run; stop them with stop.sh.
#
#   examples/local-three-tier/start.sh [DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}/local-three-tier}"
eval "$("$here/install.sh" "$dir" | grep -E '^(LLAMA_SERVER|MODELS)=')"
run="$dir/run"
mkdir -p "$run"

start() {
  local name="$1" port="$2"; shift 2
  if [ -f "$run/$name.pid" ] && kill -0 "$(cat "$run/$name.pid")" 2>/dev/null; then
    echo "$name: already running (pid $(cat "$run/$name.pid"))"
    return
  fi
  "$LLAMA_SERVER" --host 127.0.0.1 --port "$port" -t 1 --no-webui --metrics "$@" >"$run/$name.log" 2>&1 &
  echo $! > "$run/$name.pid"
  echo "$name: starting on 127.0.0.1:$port (pid $!, log $run/$name.log)"
}

start small 18181 -m "$MODELS/smollm2-135m-instruct-q4_1.gguf" -c 8192
start mid 18182 -m "$MODELS/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" -c 32768 \
  -md "$MODELS/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf" --spec-type draft-simple -td 1
start ngram 18183 -m "$MODELS/gemma3-270m-q4_k_m.gguf" -c 32768 \
  --no-jinja --chat-template gemma --spec-type ngram-simple

for port in 18181 18182 18183; do
  for _ in $(seq 240); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
    sleep 0.5
  done
  curl -sf "http://127.0.0.1:$port/health" >/dev/null || { echo "server on $port did not become healthy; see $run" >&2; exit 1; }
done
echo "all three are up; now: cargo run --release -p switchyard -- serve --config $here/switchyard.yaml"
