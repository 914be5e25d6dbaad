#!/usr/bin/env bash
# The overhead benchmark (gateway/benches/overhead.rs): the upstream direct,
# a bare hyper hop, Switchyard and LiteLLM's proxy, measured side by side.
# Installs LiteLLM (pinned, with its proxy extras) into a venv cached under
# ~/.cache/switchyard, raises the open-file limit for 10,000 open streams,
# and prints the figures. Takes about seventeen minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
# --pgo: measure the profile-guided build of scripts/build-pgo.sh (the
# gateway and the bare hop both), built first if it is not there yet.
if [ "${1:-}" = --pgo ]; then
  [ -x target/pgo/optimized/release/switchyard ] || scripts/build-pgo.sh
  export CARGO_TARGET_DIR=$PWD/target/pgo/optimized
  export RUSTFLAGS="-Cprofile-use=$PWD/target/pgo/switchyard.profdata"
fi
# shellcheck source=scripts/bench-tools.sh
source scripts/bench-tools.sh
litellm=$(litellm_bin)
# 10,000 open streams: the soft open-file limit up to the hard one. The
# benchmark reaches the gateway over HTTP/2, so the gateway's upstream
# connections are what it needs descriptors for.
ulimit -n "$(ulimit -Hn)"
# The floor, built where the benchmark looks for it (beside itself).
cargo build --release -p switchyard-examples --bin bare-hop
LITELLM="$litellm" cargo bench -p switchyard --bench overhead
