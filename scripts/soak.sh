#!/usr/bin/env bash
# Soak test (not part of CI): the release gateway under steady mixed load
# for MINUTES (default 30) in front of two `switchyard sim` servers, with
# streams opened, read, abandoned half-way and connections replaced all the
# time (examples/soak-load). Every minute it records the gateway's resident
# memory and open file descriptors; at the end it prints the table and
# whether, after WARMUP minutes (default 5), each stayed within 10% of its
# range (max/min <= 1.10). Exit status 1 when one did not.
#
#   scripts/soak.sh [MINUTES] [REQUESTS_PER_SECOND] [WARMUP]
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-30}"
rate="${2:-40}"
warmup="${3:-5}"

cargo build --release --locked -p switchyard -p switchyard-examples --bin switchyard --bin soak-load
bin=$PWD/target/release/switchyard
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# Starts a process whose first stdout line names its address, in the
# background of this shell (so its pid is ours to end); `address NAME`
# then waits for and prints that address.
start() {
  local name="$1"
  shift
  (cd "$work" && exec "$@") >"$work/$name.out" 2>"$work/$name.err" &
  pids+=($!)
  echo $! >"$work/$name.pid"
}
address() {
  for _ in $(seq 100); do grep -q http:// "$work/$1.out" && break; sleep 0.1; done
  grep -o 'http://[0-9.:]*' "$work/$1.out"
}

start sim-a "$bin" sim --listen 127.0.0.1:0 --profile small --set decode_tokens_per_s=400 --set base_ttft_ms=20
start sim-b "$bin" sim --listen 127.0.0.1:0 --profile mid --set decode_tokens_per_s=200 --set base_ttft_ms=40
sim_a=$(address sim-a)
sim_b=$(address sim-b)
cat >"$work/soak.yaml" <<YAML
backends:
  local:
    tier: small
    openai: {base_url: "$sim_a/v1"}
  mid:
    tier: mid
    openai: {base_url: "$sim_b/v1"}
routes:
  auto:
    strategy:
      split:
        weights: {local: 80, mid: 20}
YAML
start gateway "$bin" serve --config "$work/soak.yaml" --listen 127.0.0.1:0
gateway=$(address gateway)
gateway_pid=$(cat "$work/gateway.pid")
echo "soak: ${minutes} min at ${rate} req/s against $gateway (pid $gateway_pid)"

target/release/soak-load "$gateway" "$minutes" "$rate" >"$work/load.out" &
load=$!
pids+=("$load")
samples="$work/samples"
for minute in $(seq "$minutes"); do
  sleep 60
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$gateway_pid/status")
  fds=$(ls "/proc/$gateway_pid/fd" | wc -l)
  echo "$minute $rss $fds" >>"$samples"
  echo "minute $minute: RSS ${rss} kB, open fds ${fds}; $(tail -1 "$work/load.out")"
done
wait "$load" || true
tail -1 "$work/load.out"

awk -v warmup="$warmup" '
  $1 > warmup {
    if (n == 0 || $2 < rmin) rmin = $2; if ($2 > rmax) rmax = $2
    if (n == 0 || $3 < fmin) fmin = $3; if ($3 > fmax) fmax = $3
    n++
  }
  END {
    if (n == 0) { print "no samples after the warm-up"; exit 1 }
    printf "after %d min of warm-up: RSS %d-%d kB (max/min %.3f), open fds %d-%d (max/min %.3f)\n",
      warmup, rmin, rmax, rmax / rmin, fmin, fmax, fmax / fmin
    if (rmax / rmin > 1.10 || fmax / fmin > 1.10) { print "FAIL: more than 10% apart"; exit 1 }
    print "PASS: both within 10%"
  }' "$samples"
