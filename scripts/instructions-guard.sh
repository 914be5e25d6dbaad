#!/usr/bin/env bash
# CI's guard on what a proxied request costs: the gateway's instructions per
# request over the bare hyper hop's, both counted by callgrind in this run
# (scripts/count-instructions.sh, one tokio worker each so the count does
# not move with thread scheduling: three runs of one build agree within
# 0.2%), must stay within 2% of the ratio recorded in
# scripts/instructions-ratio.txt. Absolute counts differ between Intel and
# AMD machines; the ratio, taken in the same run, moves far less, but not
# nothing (which memcpy and SHA-256 code the CPU and glibc pick is counted
# too): the machine it was recorded on is in that file, and this one is
# printed beside it. A change that moves it past 2% either
# way records the new ratio in that file, in a commit of its own that says
# why. The release build goes to a target directory in the cache outside
# the checkout (SWITCHYARD_CACHE), shared by every run, so only what
# changed is built again. Needs valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}"
export CARGO_TARGET_DIR="${GUARD_TARGET_DIR:-$cache/target-release}"
recorded=$(awk '!/^#/ && NF { print $1; exit }' scripts/instructions-ratio.txt)
echo "== release build (gateway and bare hop) in $CARGO_TARGET_DIR"
# Two builds, not one: built together, the bare hop's dependencies change
# the features of some the gateway shares, and with them their symbols'
# hashes, so the gateway counted was not quite the one users build
# (`cargo build --release -p switchyard`), nor the one
# gateway/hot-symbols.txt names.
cargo build --release --locked -p switchyard --bin switchyard
cargo build --release --locked -p switchyard-examples --bin bare-hop
# The function order only works for the names the binary still has; a
# dependency change renames many (scripts/hot-symbols.sh writes the list
# again). Printed, not guarded: on 2026-12-06 a list that had lost three
# quarters of its names cost 2% to 4% of the CPU per request at c=1, within
# the benchmark's spread (docs: the function order written again).
if command -v nm > /dev/null && [ -f gateway/hot-symbols.txt ]; then
  listed=$(LC_ALL=C sort -u gateway/hot-symbols.txt | wc -l)
  present=$(nm "$CARGO_TARGET_DIR/release/switchyard" | awk '{ print $NF }' | LC_ALL=C sort -u |
    LC_ALL=C comm -12 - <(LC_ALL=C sort -u gateway/hot-symbols.txt) | wc -l)
  echo "function order: $present of the $listed functions in gateway/hot-symbols.txt are in the binary"
fi
echo "this machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(ldd --version 2>&1 | awk 'NR == 1')"
grep '^# recorded on' scripts/instructions-ratio.txt || true
export TOKIO_WORKER_THREADS=1
gateway=$(scripts/count-instructions.sh | awk '{ print $1 }')
bare=$(scripts/count-instructions.sh bare | awk '{ print $1 }')
awk -v g="$gateway" -v b="$bare" -v r="$recorded" 'BEGIN {
  ratio = g / b; drift = (ratio / r - 1) * 100
  printf "instructions per request: gateway %d, bare hop %d, ratio %.3f (recorded %.3f, %+.1f%%)\n", g, b, ratio, r, drift
  if (drift > 2 || drift < -2) {
    printf "the ratio moved more than 2%% from the recorded one: find what moved it (scripts/instructions-by-feature.sh), or record %.3f in scripts/instructions-ratio.txt in a commit that says why\n", ratio
    exit 1
  }
}'
