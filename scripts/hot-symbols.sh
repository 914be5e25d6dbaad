#!/usr/bin/env bash
# Writes gateway/hot-symbols.txt: the functions a proxied request runs,
# hottest first, by callgrind (scripts/count-instructions.sh), for the
# gateway as `cargo build --release` builds it and as `cargo bench` builds
# it (the two profiles give generic functions different symbol hashes), and
# for the overhead benchmark's bare hop. gateway/build.rs gives the list to
# the linker, which lays those functions out together. Rerun after code or
# dependency changes: a symbol's hash can change with them, and names the
# binary no longer has are skipped. Builds both profiles, then relinks them
# with the new list; needs valgrind. Takes about fifteen minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-gateway-config.sh
source scripts/bench-gateway-config.sh
release=${CARGO_TARGET_DIR:-target}/release
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Symbols as the linker sees them, not demangled.
export VALGRIND_OPTS=--demangle=no
# Self cost per function in the given binary, summed over the source files
# its code came from; then the names, hottest first.
hottest() {
  callgrind_annotate --threshold=100 "$1" 2> /dev/null |
    awk -v bin="[$(realpath "$2")]" '$NF == bin {
      n = $1; gsub(",", "", n)
      name = $0; sub(/ \[[^]]*\]$/, "", name); sub(/^.*:/, "", name)
      cost[name] += n
    } END { for (f in cost) print cost[f], f }' |
    sort -rn | cut -d' ' -f2
}
cargo build --release -p switchyard
CALLGRIND_KEEP="$work/release.out" scripts/count-instructions.sh
hottest "$work/release.out" "$release/switchyard" > "$work/release.txt"
# Writes the bench profile's gateway over the release one, same path.
cargo bench -p switchyard --bench overhead --no-run
cargo build --release -p switchyard-examples --bin bare-hop
CALLGRIND_KEEP="$work/bench.out" scripts/count-instructions.sh
CALLGRIND_KEEP="$work/bare.out" scripts/count-instructions.sh bare
hop=$(bench_bare_hop "$release")
hottest "$work/bench.out" "$release/switchyard" > "$work/bench.txt"
hottest "$work/bare.out" "$hop" > "$work/bare.txt"
cat "$work/release.txt" "$work/bench.txt" "$work/bare.txt" | awk '!seen[$0]++' > gateway/hot-symbols.txt
echo "gateway/hot-symbols.txt: $(wc -l < gateway/hot-symbols.txt) functions"
# The list changed: link both again with it.
cargo bench -p switchyard --bench overhead --no-run
cargo build --release -p switchyard
