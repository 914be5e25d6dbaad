#!/usr/bin/env bash
# Instructions to read the overhead benchmark's upstream answer, each way
# adapters/benches/answer_parse.rs reads it, counted by callgrind: the
# loop's own count (`none`) subtracted, divided by its 1,000 reads. Needs
# valgrind. Builds the benchmark in release (bench profile) first.
set -euo pipefail
cd "$(dirname "$0")/.."
bench=$(cargo bench -p switchyard-adapters --bench answer_parse --no-run --message-format=json 2> /dev/null |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "answer_parse" and m.get("executable"):
        print(m["executable"])')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
count() {
  ANSWER_PARSE=$1 valgrind --tool=callgrind --callgrind-out-file="$work/$1" "$bench" > /dev/null 2>&1
  callgrind_annotate "$work/$1" 2> /dev/null | awk '/PROGRAM TOTALS/ && !n { gsub(",", "", $1); print $1; n = 1 }'
}
base=$(count none)
for mode in typed light ignored value; do
  echo "$mode: $(( ($(count "$mode") - base) / 1000 )) instructions per read"
done
