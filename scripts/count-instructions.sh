#!/usr/bin/env bash
# Instructions per request, counted by callgrind: a figure the host's noise
# does not move, to check a change that timing runs cannot resolve. Runs a
# release `switchyard sim` as the upstream and, under callgrind, a release
# gateway with the overhead benchmark's feature set (auth with rate limits, a
# split route, the SQLite ledger, metrics); sends 200 warm-up requests, then
# counts 1,000 sequential ones. With `bare`, counts the benchmark's bare
# hyper hop instead. TOKIO_WORKER_THREADS=1 (as scripts/instructions-guard.sh
# sets it) counts with one tokio worker, which makes the count repeat
# within 0.2% run to run; with a worker per core it moves by about 2%, with
# how the workers happen to park and wake. Needs valgrind (apt-get install valgrind) and a release
# build (cargo build --release -p switchyard; for the bare hop, cargo build
# --release -p switchyard-examples --bin bare-hop). Takes under a minute.
# COUNT_STREAM=1 asks for each answer streamed (19 events from the
# simulator) instead of whole.
# COUNT_SYSCALLS=1 runs the same requests without callgrind, with a tokio
# worker per core unless TOKIO_WORKER_THREADS says otherwise, and counts the
# process's system calls per request instead, all of them and the main kinds,
# with `perf stat` on the syscalls tracepoints (needs perf and root): the
# wakes (futex) and parks (epoll_wait) a request costs its threads. The
# counted window also holds a second before the requests.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-gateway-config.sh
source scripts/bench-gateway-config.sh
# CARGO_TARGET_DIR picks another build (target/pgo/optimized: scripts/build-pgo.sh).
release=${CARGO_TARGET_DIR:-target}/release
bin=$release/switchyard
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sim_port=19101
gateway_port=19102
key=sk-count-0123456789
syscalls=${COUNT_SYSCALLS:-0}
stream=${COUNT_STREAM:-0}
# The ledger commits every 1,024 rows (its largest group) rather than every
# 200 ms: how many rows a timed group gathers depends on how fast the
# requests run under callgrind, and moved the count by 2% run to run.
# System calls are counted with the 200 ms groups the gateway runs with.
flush='s|^ledger: {path: \(.*\)}$|ledger: {path: \1, flush_ms: 60000}|'
if [ "$syscalls" = 1 ]; then flush=''; fi
bench_gateway_config "$bin" "$sim_port" "$key" "$work/ledger.db" | sed "$flush" > "$work/gateway.yaml"
# A variant of that config (scripts/instructions-by-feature.sh): COUNT_SED,
# a sed script applied to it; COUNT_EXTRA, sections appended.
if [ -n "${COUNT_SED:-}" ]; then sed -i -e "$COUNT_SED" "$work/gateway.yaml"; fi
if [ -n "${COUNT_EXTRA:-}" ]; then printf '%s\n' "$COUNT_EXTRA" >> "$work/gateway.yaml"; fi
"$bin" sim --listen "127.0.0.1:$sim_port" "${BENCH_SIM_SETTINGS[@]}" > "$work/sim.log" 2>&1 &
sim=$!
under=(valgrind --tool=callgrind --callgrind-out-file="$work/out")
if [ "$syscalls" = 1 ]; then under=(); fi
if [ "${1:-}" = bare ]; then
  hop=$(bench_bare_hop "$release")
  BARE_HOP_LISTEN="127.0.0.1:$gateway_port" BARE_HOP_UPSTREAM="http://127.0.0.1:$sim_port" \
    ${under[@]+"${under[@]}"} "$hop" > "$work/gateway.log" 2>&1 &
else
  SWITCHYARD_LOG=error ${under[@]+"${under[@]}"} \
    "$bin" serve --config "$work/gateway.yaml" --listen "127.0.0.1:$gateway_port" > "$work/gateway.log" 2>&1 &
fi
gateway=$!
requests() {
  python3 - "$1" "$gateway_port" "$key" "$stream" <<'PY'
import http.client, json, sys, time
n, port, key = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
stream = sys.argv[4] == "1"
body = json.dumps({"model": "auto", "stream": stream, "max_tokens": 16, "temperature": 0.7, "messages": [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Say something short about rivers and the sea."}]})
for _ in range(120):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port); c.request("GET", "/healthz"); c.getresponse().read(); break
    except OSError:
        time.sleep(0.5)
c = http.client.HTTPConnection("127.0.0.1", port)
for _ in range(n):
    c.request("POST", "/v1/chat/completions", body, {"content-type": "application/json", "authorization": f"Bearer {key}"})
    r = c.getresponse(); r.read()
    assert r.status == 200, (r.status, r.read())
PY
}
requests 200
# The counted window: the 1,000 requests, and a second before them for
# perf to attach, or after them for callgrind's dump.
if [ "$syscalls" = 1 ]; then
  calls=raw_syscalls:sys_enter
  for call in futex epoll_wait writev write sendto recvfrom read pread64 pwrite64 fdatasync fsync; do
    calls="$calls,syscalls:sys_enter_$call"
  done
  perf stat -x, -e "$calls" -p "$gateway" -o "$work/perf" &
  perf=$!
  sleep 1
else
  callgrind_control -z "$gateway" > /dev/null 2>&1
fi
requests 1000
if [ "$syscalls" = 1 ]; then
  # perf may have exited already (not root, no tracepoints): the check
  # below says so, after the gateway and the simulator are stopped.
  kill -INT "$perf" 2> /dev/null || true
  wait "$perf" || true
else
  callgrind_control -d "$gateway" > /dev/null 2>&1
  sleep 1
fi
kill -TERM "$gateway" "$sim"
wait "$gateway" "$sim" 2> /dev/null || true
if [ "$syscalls" = 1 ]; then
  # A tracepoint perf could not open is `<not supported>` or missing.
  if ! grep -q '^[1-9][0-9]*,,raw_syscalls:sys_enter,' "$work/perf" 2> /dev/null; then
    cat "$work/perf" >&2 2> /dev/null || true
    echo "perf counted no system calls (perf needs root and the syscalls tracepoints)" >&2
    exit 1
  fi
  awk -F, '$1 ~ /^[0-9]+$/ && $3 ~ /syscalls:sys_enter/ {
    name = $3; sub(/^raw_syscalls:sys_enter$/, "all system calls", name); sub(/^syscalls:sys_enter_/, "", name)
    printf "%s %.2f a request\n", name, $1 / 1000 }' "$work/perf"
  exit 0
fi
dump=$(ls "$work"/out.* | sort -t. -k2 -n | tail -1)
# CALLGRIND_KEEP=<file>: keep the counted part's profile (scripts/hot-symbols.sh).
if [ -n "${CALLGRIND_KEEP:-}" ]; then cp "$dump" "$CALLGRIND_KEEP"; fi
# awk reads all of it (grep -m1 would stop early, and under pipefail the
# annotator's SIGPIPE would fail the script).
total=$(callgrind_annotate "$dump" 2> /dev/null | awk '/PROGRAM TOTALS/ && !n { gsub(",", "", $1); print $1; n = 1 }')
answers=whole
if [ "$stream" = 1 ]; then answers=streamed; fi
echo "$((total / 1000)) instructions per request (${1:-switchyard}; 1,000 sequential requests after 200, $answers)"
