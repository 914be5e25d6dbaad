#!/usr/bin/env bash
# Soak test (not part of CI): the release gateway under steady mixed load
# for MINUTES (default 30) in front of two `switchyard sim` servers, with
# streams opened, read, abandoned half-way and connections replaced all the
# time (examples/soak-load). Every minute it records the gateway's resident
# memory and open file descriptors. It passes when, after WARMUP minutes
# (default 5), resident memory stays within 10% (max/min <= 1.10), and open
# descriptors do not drift: their mean over the last third of the samples
# is within 10% of the mean over the first third, and at rest after the
# load (100 s after it stops, once idle upstream connections have closed)
# no more are open (two spare) than at rest before it. (One
# sample's descriptors move with the connections open at that instant:
# 16 clients, pools replaced and streams dropped all the time.) Exit
# status 1 when it does not pass.
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
keep_work=
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [ -n "$keep_work" ]; then echo "logs kept in $work"; else rm -rf "$work"; fi
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
  grep -m1 -o 'http://[0-9.:]*' "$work/$1.out"
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
alive() {
  [ -d "/proc/$gateway_pid" ] && return
  echo "the gateway died; its log:"
  cat "$work/gateway.err"
  keep_work=1
  exit 1
}
fds_now() { alive; find "/proc/$gateway_pid/fd" -mindepth 1 -maxdepth 1 | wc -l; }
# At rest: the fewest of a few looks, once start-up's own connections (a
# backend's context window being read) have had time to finish.
sleep 5
idle_before=$(for _ in 1 2 3; do fds_now; sleep 1; done | sort -n | head -1)

# A minute longer than the sampling, so the last sample is taken under load.
target/release/soak-load "$gateway" "$((minutes + 1))" "$rate" >"$work/load.out" &
load=$!
pids+=("$load")
samples="$work/samples"
for minute in $(seq "$minutes"); do
  sleep 60
  alive
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$gateway_pid/status")
  fds=$(fds_now)
  echo "$minute $rss $fds" >>"$samples"
  echo "minute $minute: RSS ${rss} kB, open fds ${fds}; $(tail -1 "$work/load.out")"
done
wait "$load" || true
tail -1 "$work/load.out"
# Idle upstream connections stay pooled for 90 s; then they are closed.
sleep 100
idle_after=$(for _ in 1 2 3; do fds_now; sleep 1; done | sort -n | head -1)
echo "open fds at rest: $idle_before before the load, $idle_after after it"

awk -v warmup="$warmup" -v idle_before="$idle_before" -v idle_after="$idle_after" '
  $1 > warmup {
    n++; rss[n] = $2; fds[n] = $3
    if (n == 1 || $2 < rmin) rmin = $2; if ($2 > rmax) rmax = $2
    if (n == 1 || $3 < fmin) fmin = $3; if ($3 > fmax) fmax = $3
  }
  END {
    if (n < 3) { print "too few samples after the warm-up"; exit 1 }
    third = int(n / 3)
    for (i = 1; i <= third; i++) { early += fds[i]; late += fds[n - third + i] }
    early /= third; late /= third
    printf "after %d min of warm-up: RSS %d-%d kB (max/min %.3f); open fds %d-%d, mean %.1f in the first third and %.1f in the last (%.3f)\n",
      warmup, rmin, rmax, rmax / rmin, fmin, fmax, early, late, late / early
    fail = 0
    if (rmax / rmin > 1.10) { print "FAIL: resident memory moved more than 10%"; fail = 1 }
    if (late / early > 1.10) { print "FAIL: open descriptors drifted up more than 10%"; fail = 1 }
    # Two spare: a context-window read of a backend may be open at either look.
    if (idle_after > idle_before + 2) { print "FAIL: more descriptors open at rest after the load than before"; fail = 1 }
    if (fail) exit 1
    print "PASS"
  }' "$samples"
