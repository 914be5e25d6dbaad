#!/usr/bin/env bash
# The shadow comparison on real servers (docs/src/routing/shadow.md): two
# llama-servers serving one model (Qwen2.5-Coder-0.5B, Q4_K_M), one plain,
# one with n-gram speculation, each on one thread of this machine; the
# gateway on examples/local-three-tier/shadow.yaml serves the route from the
# plain one and copies every request to the other; the workload replay
# (the profiles' mix, streamed) drives it at temperature 0, so the two
# engines' answers can be compared answer for answer. Then
# `switchyard compare` and `switchyard advise` over the ledger.
#
# First each server alone, with nothing else running: what the machine
# allows.
#
#   scripts/bench-shadow.sh [JOBS] [CONCURRENCY]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${1:-40}"
concurrency="${2:-1}"
seed="${SEED:-7}"
profile="${PROFILE:-release}"   # or debug: the gateway's own time is noise here
eval "$(examples/local-three-tier/install.sh | grep -E '^(LLAMA_SERVER|MODELS)=')"
model="$MODELS/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
if [ "$profile" = release ]; then
  cargo build --release --locked -p switchyard -p switchyard-examples
else
  cargo build --locked -p switchyard -p switchyard-examples
fi
work=$(mktemp -d)
echo "== results in $work"

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT
"$LLAMA_SERVER" --host 127.0.0.1 --port 18191 -t 1 -m "$model" -c 16384 -np 2 \
  --no-webui --metrics >"$work/served.log" 2>&1 &
pids+=($!)
"$LLAMA_SERVER" --host 127.0.0.1 --port 18192 -t 1 -m "$model" -c 16384 -np 2 \
  --no-webui --metrics --spec-type ngram-simple >"$work/candidate.log" 2>&1 &
pids+=($!)
for port in 18191 18192; do
  for _ in $(seq 240); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.5; done
  curl -sf "http://127.0.0.1:$port/health" >/dev/null || { echo "server on $port is not up; see $work" >&2; exit 1; }
done

echo "== each server alone (llama.cpp's timings, one 128-token answer, prompt not cached)"
for server in served:18191 candidate:18192; do
  name="${server%%:*}" port="${server##*:}"
  body='{"messages":[{"role":"user","content":"Write a Python function that merges two sorted lists, with tests."}],"max_tokens":128,"temperature":0,"cache_prompt":false}'
  curl -s "http://127.0.0.1:$port/v1/chat/completions" -H 'content-type: application/json' -d "$body" |
    python3 -c "import json,sys; t=json.load(sys.stdin)['timings']; print(f'$name: prefill {t[\"prompt_per_second\"]:.0f} tokens/s, decode {t[\"predicted_per_second\"]:.1f} tokens/s')" |
    tee -a "$work/alone.txt"
done

bin="$PWD/target/$profile/switchyard"
config="$PWD/examples/local-three-tier/shadow.yaml"
(cd "$work" && exec "$bin" serve --config "$config" --listen 127.0.0.1:0) \
  >"$work/gateway.out" 2>"$work/gateway.log" &
gateway=$!
pids+=("$gateway")
for _ in $(seq 100); do grep -q http:// "$work/gateway.out" && break; sleep 0.1; done
addr=$(grep -o 'http://[0-9.:]*' "$work/gateway.out")

echo "== $jobs jobs at concurrency $concurrency, temperature 0"
REPLAY_TEMPERATURE=0 "target/$profile/workload-replay" "$addr" mid "$jobs" "$concurrency" "$seed" "$work/replay.jsonl"
kill -TERM "$gateway"
wait "$gateway" || true  # the copies finish, the ledger is flushed
{
  echo "Each server alone: $(paste -sd ';' "$work/alone.txt" | sed 's/;/; /g')."
  echo
  (cd "$work" && "$bin" compare --config "$config" --since 1d)
  echo
  (cd "$work" && "$bin" compare --config "$config" --since 1d --format json)
  echo
  (cd "$work" && "$bin" advise --config "$config" --since 1d)
} | tee "$work/report.md"
