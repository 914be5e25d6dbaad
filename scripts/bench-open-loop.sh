#!/usr/bin/env bash
# Added p50 and p99 latency at fixed, open-loop request rates
# (gateway/benches/open_loop.rs): the upstream direct, the bare hyper hop,
# Switchyard and LiteLLM's proxy, driven in turns by oha with its
# coordinated-omission correction. Installs oha and LiteLLM (pinned) into
# the cache under ~/.cache/switchyard first. Takes about ten minutes.
# SWITCHYARD_COMPARE=path adds another build of Switchyard to the same
# rounds (an A/B of two commits); NO_LITELLM=1 leaves LiteLLM out.
set -euo pipefail
# Made absolute before the cd below (and the benchmark's own, to gateway/).
if [ -n "${SWITCHYARD_COMPARE:-}" ]; then
  SWITCHYARD_COMPARE=$(realpath "$SWITCHYARD_COMPARE")
  export SWITCHYARD_COMPARE
fi
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-tools.sh
source scripts/bench-tools.sh
litellm=
if [ "${NO_LITELLM:-0}" = 1 ]; then
  unset LITELLM
else
  litellm=$(litellm_bin)
fi
oha=$(oha_bin)
ulimit -n "$(ulimit -Hn)"
# The floor, built where the benchmark looks for it (beside itself).
cargo build --release -p switchyard-examples --bin bare-hop
if [ -n "$litellm" ]; then export LITELLM="$litellm"; fi
OHA="$oha" cargo bench -p switchyard --bench open_loop
