#!/usr/bin/env bash
# The routing-quality benchmark's analysis (issue #27), from the answers
# scripts/bench-routing-quality.sh recorded, with the gateway's own tools:
#
#   scripts/routing_quality_analyse.sh DIR CONFIG [LARGE_PRICE]
#
# DIR/answers.jsonl holds every tier's answers to the tasks of two seeds.
# For each seed the learned router is trained (switchyard train-router, on
# both labels) and the routes of CONFIG are replayed (switchyard replay)
# over the *other* seed's tasks with those weights, so no task is scored
# by weights that saw it. CONFIG's predictors name `small-fails.json` and
# `large-helps.json`; each replay gets a copy of CONFIG naming the weights
# trained on the other seed. Then the report: DIR/report/report.md, plot.svg
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
python3 "$here/routing_replay_inputs.py" "$dir/answers.jsonl" --small small --large large --out "$work"
seeds=$(cd "$work" && ls requests-*.jsonl | sed 's/requests-\(.*\)\.jsonl/\1/' | sort -n)
[ "$(echo "$seeds" | wc -l)" -eq 2 ] || { echo "need the answers of exactly two seeds, found: $seeds" >&2; exit 1; }
first=$(echo "$seeds" | head -1) second=$(echo "$seeds" | tail -1)
for seed in $first $second; do
  for label in fail gain; do
    echo "== learned router on seed $seed, label $label"
    "$bin" train-router --from "$work/train-$seed-$label.jsonl" --out "$work/weights-$seed-$label.json" \
      --label "$label" --backend small --model small
  done
  sed -e "s#weights: small-fails.json#weights: $work/weights-$seed-fail.json#" \
      -e "s#weights: large-helps.json#weights: $work/weights-$seed-gain.json#" "$config" >"$work/config-$seed.yaml"
done
"$bin" replay --config "$work/config-$first.yaml" --from "$work/requests-$second.jsonl" >"$work/replay-$second.jsonl"
"$bin" replay --config "$work/config-$second.yaml" --from "$work/requests-$first.jsonl" >"$work/replay-$first.jsonl"
python3 "$here/routing_quality_report.py" "$dir/answers.jsonl" --small small --mid mid --large large \
  --price "large=$price" --price small=0.10/h --price mid=0.10/h --replay "$work/replay-$first.jsonl" "$work/replay-$second.jsonl" \
  $( [ -f "$dir/live.jsonl" ] && echo --live "$dir/live.jsonl" ) --out "$dir/report"
