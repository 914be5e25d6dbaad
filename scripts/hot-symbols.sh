#!/usr/bin/env bash
# Writes gateway/hot-symbols.txt: the functions a proxied request runs in the
# gateway, hottest first, by callgrind (scripts/count-instructions.sh), as
# `cargo build --release -p switchyard` builds it and as `cargo bench`
# builds it (the bench build's dev-dependencies change some shared
# dependencies' features, so the two hash some generic functions
# differently: on 2026-12-06 each had 1,104 of the list's names, the two
# together 1,575). gateway/build.rs gives the list to the linker, which lays those
# functions out together. Only the gateway is linked with it, so the bare
# hop's functions are not listed. Rerun after moving code or changing
# dependencies: a symbol's name is its module path and a hash that changes
# with its crate's dependencies and features, and names the
# binary no longer has are skipped (scripts/instructions-guard.sh prints how
# many are left). Builds both profiles, then relinks them with the new list;
# needs valgrind. Takes about fifteen minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
release=${CARGO_TARGET_DIR:-target}/release
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Symbols as the linker sees them, not demangled.
export VALGRIND_OPTS=--demangle=no
# Self cost per function in the given binary, summed over the source files
# its code came from; then the names, hottest first. Left out: callgrind's
# names for a function's recursive calls (`name'2`, the function itself is
# listed) and its `(below main)`, which no symbol is called.
hottest() {
  callgrind_annotate --threshold=100 "$1" 2> /dev/null |
    awk -v bin="[$(realpath "$2")]" '$NF == bin {
      n = $1; gsub(",", "", n)
      name = $0; sub(/ \[[^]]*\]$/, "", name); sub(/^.*:/, "", name)
      cost[name] += n
    } END { for (f in cost) if (f !~ /\047|^\(below main\)$/) print cost[f], f }' |
    sort -rn | cut -d' ' -f2
}
cargo build --release -p switchyard
CALLGRIND_KEEP="$work/release.out" scripts/count-instructions.sh
hottest "$work/release.out" "$release/switchyard" > "$work/release.txt"
# Writes the bench profile's gateway over the release one, same path.
cargo bench -p switchyard --bench overhead --no-run
CALLGRIND_KEEP="$work/bench.out" scripts/count-instructions.sh
hottest "$work/bench.out" "$release/switchyard" > "$work/bench.txt"
cat "$work/release.txt" "$work/bench.txt" | awk '!seen[$0]++' > gateway/hot-symbols.txt
echo "gateway/hot-symbols.txt: $(wc -l < gateway/hot-symbols.txt) functions"
# The list changed: link both again with it.
cargo bench -p switchyard --bench overhead --no-run
cargo build --release -p switchyard
