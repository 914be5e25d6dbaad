#!/usr/bin/env bash
# Retrains the compiled-in `builtin:quality` weights (issue #45), which the
# embedded default's `auto` route ranks requests by:
#
#   scripts/train-builtin-router.sh [ANSWERS]
#
# ANSWERS is the routing-quality benchmark's recorded answers
# (docs/routing-quality/answers.jsonl.gz unless given; a fresh run of
# scripts/bench-routing-quality.sh writes them). The label is `gain`: the
# small tier's answer was wrong where the large tier's was right. Every
# task of every family trains the shipped weights; the held-out figures in
# docs/routing-quality/report.md come from weights trained on half the
# families. Writes router/src/learned/weights/quality.json; rebuild after.
# SWITCHYARD_BIN names a gateway binary already built.
set -euo pipefail
cd "$(dirname "$0")/.."
answers="${1:-docs/routing-quality/answers.jsonl.gz}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
case "$answers" in
  *.gz) gunzip -c "$answers" >"$work/answers.jsonl" ;;
  *) cp "$answers" "$work/answers.jsonl" ;;
esac
if [ -z "${SWITCHYARD_BIN:-}" ]; then
  cargo build --release --locked -p switchyard
  SWITCHYARD_BIN="$PWD/target/release/switchyard"
fi
python3 scripts/routing_replay_inputs.py "$work/answers.jsonl" --small small --large large --fold-seed 1 --out "$work"
cat "$work/train-1-a-gain.jsonl" "$work/train-1-b-gain.jsonl" >"$work/train.jsonl"
"$SWITCHYARD_BIN" train-router --from "$work/train.jsonl" --out router/src/learned/weights/quality.json \
  --label gain --backend small --model small
