#!/usr/bin/env bash
# Consecutive runs at one fixed, open-loop rate against one gateway that
# keeps running, its ledger growing from run to run: each run's p50, p99
# and p99.9 (oha, latency-corrected) and the CPU each kind of the
# gateway's threads took in it (from /proc, in ticks of 10 ms). For a tail
# that moves between the open-loop benchmark's rounds: does it grow with
# the ledger, or move with what the request threads cost?
# As in gateway/benches/open_loop.rs: the gateway on core 1, the simulator
# and oha on core 0, the same simulator settings, request and connections;
# the config is the benchmark's (a split route, a key with rate limits,
# the SQLite ledger in a fresh directory).
# usage: scripts/bench-fixed-rate-runs.sh [RATE [RUNS]] (13500 and 8 by
# default). SWITCHYARD_BIN picks the build (by default the release build
# under CARGO_TARGET_DIR, or target/). Installs oha like
# scripts/bench-open-loop.sh. Takes RUNS x 10 s and a few seconds more.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-tools.sh
source scripts/bench-tools.sh
# shellcheck source=scripts/bench-gateway-config.sh
source scripts/bench-gateway-config.sh
rate=${1:-13500}
runs=${2:-8}
bin=${SWITCHYARD_BIN:-${CARGO_TARGET_DIR:-target}/release/switchyard}
if [ ! -x "$bin" ]; then
  echo "no gateway at $bin: cargo build --release -p switchyard, or set SWITCHYARD_BIN" >&2
  exit 1
fi
oha=$(oha_bin)
ulimit -n "$(ulimit -Hn)"
work=$(mktemp -d)
sim_port=19311
gateway_port=19312
key=sk-bench-0123456789
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
bench_gateway_config "$bin" "$sim_port" "$key" "$work/switchyard-ledger.db" > "$work/gateway.yaml"
printf 'server:\n  max_concurrent_requests: 100000\n' >> "$work/gateway.yaml"
# The open-loop benchmark's simulator (its FAST settings).
taskset -c 0 "$bin" sim --listen "127.0.0.1:$sim_port" --preset small \
  --set base_ttft_ms=1 --set prefill_tokens_per_s=10000000 \
  --set decode_tokens_per_s=1000000000000 --set jitter=0 \
  --set max_concurrency=100000 --set max_queue=100000 > "$work/sim.log" 2>&1 &
pids+=($!)
SWITCHYARD_LOG=error taskset -c 1 "$bin" serve --config "$work/gateway.yaml" \
  --listen "127.0.0.1:$gateway_port" > "$work/gateway.log" 2>&1 &
gateway=$!
pids+=("$gateway")
up=0
for _ in $(seq 100); do
  if curl -sf "http://127.0.0.1:$gateway_port/healthz" > /dev/null; then
    up=1
    break
  fi
  sleep 0.1
done
if [ "$up" != 1 ]; then
  echo "the gateway did not come up:" >&2
  cat "$work/gateway.log" >&2
  exit 1
fi
body='{"model":"auto","stream":false,"max_tokens":16,"temperature":0.7,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Say something short about rivers and the sea."}]}'
# Ticks by thread name (user + system), summed over the threads of a name
# (tokio's worker and its blocking pool share one). A thread that ends
# between two runs drops out of its name's sum.
ticks() {
  for task in /proc/"$gateway"/task/*; do
    printf '%s %s\n' "$(tr ' ' _ < "$task/comm")" "$(awk '{print $14 + $15}' "$task/stat")"
  done | awk '{t[$1] += $2} END {for (n in t) print n, t[n]}' | sort
}
echo "$rate requests/s, $runs runs of 10 s, $bin"
before=$(ticks)
for run in $(seq "$runs"); do
  taskset -c 0 "$oha" --no-tui --output-format json --worker-threads 1 -z 10s -c 64 \
    -m POST -T application/json -d "$body" -t 10s -w \
    -H "authorization: Bearer $key" -q "$rate" --latency-correction \
    "http://127.0.0.1:$gateway_port/v1/chat/completions" > "$work/oha.json"
  after=$(ticks)
  cpu=$(join -a 2 -e 0 -o 2.1,1.2,2.2 <(echo "$before") <(echo "$after") |
    awk '{printf "%s %d, ", $1, $3 - $2}')
  before=$after
  # The ledger file, without its -wal file (up to 16 MiB).
  ledger=$(du -k "$work/switchyard-ledger.db" | cut -f1)
  python3 - "$work/oha.json" "$run" "$ledger" "${cpu%, }" << 'PY'
import json, sys
j = json.load(open(sys.argv[1]))
p = j["latencyPercentiles"]
ok = j["statusCodeDistribution"].get("200", 0)
print(f"run {sys.argv[2]}: {ok / 10:.0f}/s answered, p50 {p['p50'] * 1000:.3f} ms, "
      f"p99 {p['p99'] * 1000:.3f} ms, p99.9 {p['p99.9'] * 1000:.3f} ms; "
      f"ledger {int(sys.argv[3]) // 1024} MiB; CPU ticks: {sys.argv[4]}")
PY
done
