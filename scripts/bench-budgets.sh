#!/usr/bin/env bash
# The latency-budget benchmark: the use-case mix of the profiles (docs/src/routing/profiles.md)
# (workload-replay), streamed at a fixed concurrency, through the local
# three-tier example (three llama-server processes sharing this machine)
# plus a simulated cloud tier, once per policy in the same run:
# cheapest_within_budget, an equal split (round robin) and all-cloud. Then
# the report (scripts/budget_report.py): per profile the share within
# budget, first-token p50/p90, decode rate and backend mix; agent task
# time; cost against all-cloud; the prediction error.
#
# First it measures what the machine allows: each server's decode and
# prefill rate alone, with nothing else running.
#
#   scripts/bench-budgets.sh [JOBS_PER_POLICY] [CONCURRENCY]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${1:-60}"
concurrency="${2:-3}"
seed="${SEED:-7}"
cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}"
run="$cache/local-three-tier/run"

# The servers: started here unless they already run (then left running).
started_servers=false
if ! curl -sf http://127.0.0.1:18181/health >/dev/null 2>&1; then
  examples/local-three-tier/start.sh
  started_servers=true
fi
cargo build --release --locked -p switchyard -p switchyard-examples
work=$(mktemp -d)
echo "== results in $work"

echo "== each server alone (llama.cpp's own timings, one request of 64 tokens, its prompt not cached)"
document=$(python3 -c "print(' '.join(f'Note {i}: rivers carry silt to the sea.' for i in range(40)))")
for tier in small:18181 mid:18182 ngram:18183; do
  name="${tier%%:*}" port="${tier##*:}"
  body=$(python3 -c 'import json,sys,time; print(json.dumps({"messages":[{"role":"user","content":f"[{time.time_ns()}] "+sys.argv[1]+" Explain how a river delta forms."}],"max_tokens":64,"temperature":0,"cache_prompt":False}))' "$document")
  curl -s "http://127.0.0.1:$port/v1/chat/completions" -H 'content-type: application/json' -d "$body" |
    python3 -c "import json,sys; t=json.load(sys.stdin)['timings']; print(f'$name: prefill {t[\"prompt_per_second\"]:.0f} tokens/s, decode {t[\"predicted_per_second\"]:.1f} tokens/s')" |
    tee -a "$work/alone.txt"
done

# The gateway runs in the results folder, so its ledger lands there.
gateway_bin="$PWD/target/release/switchyard"
config="$PWD/examples/local-three-tier/budgets.yaml"
(cd "$work" && exec "$gateway_bin" serve --config "$config" --listen 127.0.0.1:0) \
  >"$work/gateway.out" 2>"$work/gateway.log" &
gateway=$!
cleanup() {
  kill "$gateway" 2>/dev/null || true
  if $started_servers; then examples/local-three-tier/stop.sh >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
for _ in $(seq 100); do grep -q http:// "$work/gateway.out" && break; sleep 0.1; done
addr=$(grep -o 'http://[0-9.:]*' "$work/gateway.out")

for policy in budget round-robin all-cloud; do
  echo "== $policy: $jobs jobs at concurrency $concurrency"
  target/release/workload-replay "$addr" "$policy" "$jobs" "$concurrency" "$seed" "$work/$policy.jsonl"
done

kill -TERM "$gateway"
wait "$gateway" || true  # flushes the ledger
{
  echo "Each server alone: $(paste -sd ';' "$work/alone.txt" | sed 's/;/; /g')."
  echo
  python3 scripts/budget_report.py "$work/switchyard-ledger.db" \
    "$work/budget.jsonl" "$work/round-robin.jsonl" "$work/all-cloud.jsonl"
} | tee "$work/report.md"
