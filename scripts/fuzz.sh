#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo fuzz, libFuzzer) of every parser that reads
# outside input; the targets are in fuzz/src/targets.rs.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]    (default: 600 s, every target)
#
# Each target starts from its hand-written seeds (fuzz/seeds/TARGET/) and
# the corpus earlier runs found (fuzz/corpus/TARGET.hex.gz: an input per
# line, hex, gzipped, so thousands of inputs are one small file in git),
# and stops at the first panic, or at an input that takes over 10 s (a hang): libFuzzer
# saves that input under fuzz/artifacts/. Commit a crash as
# fuzz/regressions/TARGET/NAME with its fix. Afterwards the corpus is
# minimized (a set-cover merge) and packed back into TARGET.hex.gz. The
# workspace test gateway/tests/fuzz_corpus.rs replays seeds, corpus and
# regressions on every CI run.
#
# cargo fuzz passes rustc flags that only a nightly toolchain accepts, and a
# nightly cannot be installed here: RUSTC_BOOTSTRAP=1 lets this machine's
# stable rustc accept them. No sanitizer (-s none): the code is safe Rust,
# so what the fuzzer hunts is panics, overflows (fuzz/Cargo.toml turns
# overflow checks and debug assertions on), hangs and runaway memory
# (-rss_limit_mb).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-600}"
shift || true
cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}"
tools="$cache/tools/cargo-fuzz"
version=0.13.2
if ! "$tools/bin/cargo-fuzz" --version 2>/dev/null | grep -q "$version"; then
  echo "== installing cargo-fuzz $version into $tools"
  cargo install cargo-fuzz --version "$version" --locked --root "$tools" --quiet
fi
export PATH="$tools/bin:$PATH"
export RUSTC_BOOTSTRAP=1

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  # Not a process substitution: a failed listing must stop the script.
  list=$(cargo fuzz list --fuzz-dir fuzz)
  mapfile -t targets <<<"$list"
fi
[ "${#targets[@]}" -gt 0 ] && [ -n "${targets[0]}" ] || { echo "no fuzz targets"; exit 1; }

echo "== cargo fuzz build"
cargo fuzz build --fuzz-dir fuzz -s none --release

scratch=fuzz/target/corpus
for target in "${targets[@]}"; do
  echo "== $target: ${seconds} s"
  rm -rf "$scratch/$target" "$scratch/$target.min"
  mkdir -p "$scratch/$target" "$scratch/$target.min"
  python3 scripts/fuzz_corpus.py unpack "fuzz/corpus/$target.hex.gz" "$scratch/$target"
  cargo fuzz run --fuzz-dir fuzz -s none --release "$target" "$scratch/$target" "fuzz/seeds/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1
  # Keep only inputs that add coverage, then pack them for git.
  if ! cargo fuzz run --fuzz-dir fuzz -s none --release "$target" "$scratch/$target.min" "$scratch/$target" -- \
    -set_cover_merge=1 -timeout=10 >"$scratch/$target.merge.log" 2>&1; then
    cat "$scratch/$target.merge.log"
    echo "$target: minimizing the corpus failed"
    exit 1
  fi
  python3 scripts/fuzz_corpus.py pack "$scratch/$target.min" "fuzz/corpus/$target.hex.gz"
  echo "$target: no crash in ${seconds} s; corpus $(ls "$scratch/$target.min" | wc -l) inputs"
done
