#!/usr/bin/env bash
# The dashboard end to end: a gateway on tests/dashboard/gateway.yaml, real
# traffic from two keys over both routes, then the page in a real Chromium
# (run.sh) compared against GET /admin/stats, and a screenshot.
#   usage: tests/dashboard/e2e.sh SWITCHYARD_BIN SCREENSHOT.png
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$1" screenshot="$2"
workdir=$(mktemp -d)  # the ledger goes here
out="$workdir/out"
(cd "$workdir" && exec "$bin" serve --config "$here/gateway.yaml") >"$out" 2>"$workdir/log" &
gateway=$!
trap 'kill "$gateway" 2>/dev/null || true; wait "$gateway" 2>/dev/null || true; rm -rf "$workdir"' EXIT
for _ in $(seq 100); do grep -q http:// "$out" && break; sleep 0.1; done
base=$(grep -o 'http://[0-9.:]*' "$out")

# 60 requests: alice on auto (chat), bob on code, some streamed.
for i in $(seq 60); do
  if [ $((i % 3)) -eq 0 ]; then key=sk-bob-dash model=code; else key=sk-alice-dash model=auto; fi
  stream=$([ $((i % 2)) -eq 0 ] && echo true || echo false)
  curl -sf -o /dev/null "$base/v1/chat/completions" \
    -H "authorization: Bearer $key" -H 'content-type: application/json' -H "x-session-id: dash-task-$((i % 4))" \
    -d "{\"model\":\"$model\",\"stream\":$stream,\"max_tokens\":24,\"messages\":[{\"role\":\"user\",\"content\":\"request $i: say something short\"}]}"
done
# One request the gateway refuses (an unknown model): an error on the page.
curl -s -o /dev/null "$base/v1/chat/completions" -H 'authorization: Bearer sk-alice-dash' \
  -H 'content-type: application/json' -d '{"model":"nope","messages":[{"role":"user","content":"hi"}]}'
# A batch of three lines (the openai SDK's calls, as curl makes them), so the
# Batches panel has lines to show.
for i in 1 2 3; do
  echo "{\"custom_id\":\"d$i\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{\"model\":\"auto\",\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"batch line $i\"}]}}"
done >"$workdir/batch.jsonl"
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
file=$(curl -sf "$base/v1/files" -H 'authorization: Bearer sk-alice-dash' \
  -F purpose=batch -F "file=@$workdir/batch.jsonl" | field id)
batch=$(curl -sf "$base/v1/batches" -H 'authorization: Bearer sk-alice-dash' -H 'content-type: application/json' \
  -d "{\"input_file_id\":\"$file\",\"endpoint\":\"/v1/chat/completions\",\"completion_window\":\"24h\"}" | field id)
for _ in $(seq 100); do
  status=$(curl -sf "$base/v1/batches/$batch" -H 'authorization: Bearer sk-alice-dash' | field status)
  [ "$status" = completed ] && break
  sleep 0.2
done
[ "$status" = completed ] || { echo "the batch is $status, not completed"; exit 1; }
# The ledger commits in groups: wait until every row is in the figures.
for _ in $(seq 50); do
  n=$(curl -s -H 'authorization: Bearer sk-admin-dash' "$base/admin/stats?window=1h" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["totals"]["requests"])')
  [ "$n" = 64 ] && break
  sleep 0.2
done
[ "$n" = 64 ] || { echo "the stats count $n requests, not 64"; exit 1; }
# Every code request (20) was also tried on small: wait for the copies.
for _ in $(seq 50); do
  n=$(curl -s -H 'authorization: Bearer sk-admin-dash' "$base/admin/compare?since=1h" \
    | python3 -c 'import json,sys; print(sum(l["requests"] for l in json.load(sys.stdin)["lines"]))')
  [ "$n" = 20 ] && break
  sleep 0.2
done
[ "$n" = 20 ] || { echo "the comparison counts $n shadowed requests, not 20"; exit 1; }
# The stats are cached two seconds: let the figures with every copy in them come.
sleep 2.1
"$here/run.sh" "$base" sk-admin-dash "$screenshot"
