#!/usr/bin/env bash
# The routing-quality benchmark's analysis (issue #27), from the answers
# scripts/bench-routing-quality.sh recorded, with the gateway's own tools:
#
#   scripts/routing_quality_analyse.sh DIR CONFIG [LARGE_PRICE]
#
# DIR/answers.jsonl holds every tier's answers to the tasks of two seeds
# and 24 families. Routers are measured on families they never trained
# on (issue #45): for each fold seed (FOLD_SEEDS, default "1 2") the
# families are split in two halves (scripts/routing_replay_inputs.py); the
# learned router is trained on each half (switchyard train-router, on both
# labels) and the routes of CONFIG are replayed (switchyard replay) over the
# *other* half's tasks with those weights, so every task is scored by
# weights that saw neither it nor its family (FOLD_SEEDS=0 splits by task
# seed instead: the figures for families the router trained on). CONFIG's
# predictors name
# `small-fails.json` and `large-helps.json`; each replay gets a copy of
# CONFIG naming the weights trained on the other half. Then the report,
# each figure the mean over the fold seeds: DIR/report/report.md, plot.svg
# and summary.json. LARGE_PRICE is the large tier's USD per million
# input/output tokens (gpt-4o's 2.5/10 unless given); small and mid cost
# $0.10 per hour of their calls, as in examples/routing-quality/local.yaml.
set -euo pipefail
dir="$(cd "$1" && pwd)"
config="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
price="${3:-2.5/10}"
here="$(cd "$(dirname "$0")" && pwd)"
bin="${SWITCHYARD_BIN:-$here/../target/release/switchyard}"
work="$dir/replay"
rm -rf "$work"
replays=()
for fold in ${FOLD_SEEDS:-1 2}; do
  python3 "$here/routing_replay_inputs.py" "$dir/answers.jsonl" --small small --large large --fold-seed "$fold" --out "$work"
  for half in a b; do
    for label in fail gain; do
      echo "== learned router on fold $fold, half $half, label $label"
      "$bin" train-router --from "$work/train-$fold-$half-$label.jsonl" --out "$work/weights-$fold-$half-$label.json" \
        --label "$label" --backend small --model small
    done
    sed -e "s#weights: small-fails.json#weights: $work/weights-$fold-$half-fail.json#" \
        -e "s#weights: large-helps.json#weights: $work/weights-$fold-$half-gain.json#" "$config" >"$work/config-$fold-$half.yaml"
  done
  "$bin" replay --config "$work/config-$fold-a.yaml" --from "$work/requests-$fold-b.jsonl" >"$work/replay-$fold-b.jsonl"
  "$bin" replay --config "$work/config-$fold-b.yaml" --from "$work/requests-$fold-a.jsonl" >"$work/replay-$fold-a.jsonl"
  replays+=(--replay "$work/replay-$fold-a.jsonl" "$work/replay-$fold-b.jsonl")
done
python3 "$here/routing_quality_report.py" "$dir/answers.jsonl" --small small --mid mid --large large \
  --price "large=$price" --price small=0.10/h --price mid=0.10/h "${replays[@]}" \
  $( [ -f "$dir/live.jsonl" ] && echo --live "$dir/live.jsonl" ) --out "$dir/report"
