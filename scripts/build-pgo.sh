#!/usr/bin/env bash
# A profile-guided release build: the gateway, the overhead benchmark, and
# the bare hyper hop (examples/bare-hop, the floor the gateway is measured
# against, so it is built the same way). Builds both instrumented, runs training traffic
# (scripts/pgo-train.py) through each against an instrumented
# `switchyard sim`, merges the profiles, and builds both again with them.
# The result is target/pgo/optimized/release/switchyard; run the benchmark
# on it with `scripts/bench-overhead.sh --pgo`. Takes about twenty minutes
# on 2 cores. Needs the toolchain's llvm-profdata (the llvm-tools rustup
# component) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-gateway-config.sh
source scripts/bench-gateway-config.sh
out=$PWD/target/pgo
host=$(rustc -vV | sed -n 's/^host: //p')
profdata_tool=$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata
if [ ! -x "$profdata_tool" ]; then
  echo "build-pgo: $profdata_tool is missing (rustup component add llvm-tools)" >&2
  exit 1
fi
profiles=$out/profiles
rm -rf "$profiles"
mkdir -p "$profiles"

build() { # build TARGET_DIR RUSTFLAGS
  # The benchmark's build builds the `switchyard` binary too (it runs it).
  CARGO_TARGET_DIR=$1 RUSTFLAGS=$2 cargo bench --locked -p switchyard --bench overhead --no-run
  CARGO_TARGET_DIR=$1 RUSTFLAGS=$2 cargo build --release --locked -p switchyard-examples --bin bare-hop
}

echo "== instrumented build"
# Build scripts and proc macros are instrumented too; their profiles land
# here and are not used.
build "$out/instrumented" "-Cprofile-generate=$out/instrumented/build-profiles"
instrumented=$out/instrumented/release
bare_hop=$(bench_bare_hop "$instrumented")

echo "== training"
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
# Each process writes its own profile when it exits (%p: its PID).
export LLVM_PROFILE_FILE="$profiles/%p.profraw"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
sim_port=$(free_port)
SWITCHYARD_LOG=error "$instrumented/switchyard" sim --listen "127.0.0.1:$sim_port" \
  "${BENCH_SIM_SETTINGS[@]}" --set max_concurrency=1000 > "$work/sim.log" 2>&1 &
pids+=($!)
key=sk-pgo-0123456789
bench_gateway_config "$instrumented/switchyard" "$sim_port" "$key" "$work/ledger.db" > "$work/gateway.yaml"
gateway_port=$(free_port)
SWITCHYARD_LOG=error "$instrumented/switchyard" serve --config "$work/gateway.yaml" \
  --listen "127.0.0.1:$gateway_port" > "$work/gateway.log" 2>&1 &
pids+=($!)
python3 scripts/pgo-train.py "$gateway_port" "$key" 16000
hop_port=$(free_port)
BARE_HOP_LISTEN="127.0.0.1:$hop_port" BARE_HOP_UPSTREAM="http://127.0.0.1:$sim_port" "$bare_hop" > "$work/hop.log" 2>&1 &
pids+=($!)
python3 scripts/pgo-train.py "$hop_port" "$key" 16000
# The profiles are written at exit: stop everything, gracefully.
cleanup
trap - EXIT
unset LLVM_PROFILE_FILE
"$profdata_tool" merge -o "$out/switchyard.profdata" "$profiles"/*.profraw

echo "== optimized build"
build "$out/optimized" "-Cprofile-use=$out/switchyard.profdata"
echo "built $out/optimized/release/switchyard"
