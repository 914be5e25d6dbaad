#!/usr/bin/env bash
# Instructions per request with each optional feature on and off, counted
# by callgrind (scripts/count-instructions.sh) in one run, beside the bare
# hyper hop's, so a change in the total names the feature it came from.
# The rows:
#   as benchmarked   the overhead benchmark's set: a key with rate limits, a
#                    split route, the SQLite ledger, metrics
#   - rate limits    the key without requests/tokens per minute
#   - auth           no keys at all (and so no limits)
#   + telemetry      OTLP traces of every request to a collector on loopback
#   + sensitive      the route scans for sensitive data and masks it
#   + response cache the route keeps an exact cache (these requests sample,
#                    so each one is looked up and none is served from it)
#   + all three      telemetry, sensitive and the response cache together
# The ledger has no off switch (every request has its row); its share is
# in the profile: scripts/count-instructions.sh with CALLGRIND_KEEP.
# Needs valgrind and release builds of the gateway and the bare hop, each
# built on its own as scripts/instructions-guard.sh builds them (cargo build
# --release -p switchyard; cargo build --release -p switchyard-examples
# --bin bare-hop). Takes about eight minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
# One tokio worker, as the guard counts: the rows then differ by what the
# features cost, not by how the workers happened to park.
export TOKIO_WORKER_THREADS=1
work=$(mktemp -d)
collector_port=19103
# A collector that takes every export and answers 200, as a real one would.
python3 - "$collector_port" > "$work/collector.log" 2>&1 <<'PY' &
import http.server, sys
class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # connections kept, as a real collector keeps them
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
PY
collector=$!
trap 'kill "$collector" 2>/dev/null; rm -rf "$work"' EXIT
route='/strategy: {split:/a\    '
telemetry="telemetry: {otlp: {endpoint: 'http://127.0.0.1:$collector_port'}}"
count() { # count LABEL [VAR=VALUE ...]
  local label=$1; shift
  local n
  n=$(env "$@" scripts/count-instructions.sh | awk '{print $1}')
  printf '%s\t%s\n' "$label" "$n" >> "$work/rows"
  echo "$label: $n"
}
n=$(scripts/count-instructions.sh bare | awk '{print $1}')
printf 'bare hop\t%s\n' "$n" > "$work/rows"
echo "bare hop: $n"
count "as benchmarked"
count "- rate limits" COUNT_SED='s/, requests_per_minute: [0-9]*, tokens_per_minute: [0-9]*//'
count "- auth" COUNT_SED='/^auth:/,/^ledger:/{/^ledger:/!d}'
count "+ telemetry" COUNT_EXTRA="$telemetry"
count "+ sensitive" COUNT_SED="${route}sensitive: {action: mask}"
count "+ response cache" COUNT_SED="${route}response_cache: {ttl_s: 300}"
count "+ all three" COUNT_EXTRA="$telemetry" \
  COUNT_SED="${route}sensitive: {action: mask}
${route}response_cache: {ttl_s: 300}"
echo
echo "| configuration | instructions per request | over the bare hop | over as benchmarked |"
echo "|---|---|---|---|"
# Thousands with commas (mawk's printf has no %'d).
awk -F'\t' 'function commas(n,  s, out) { s = sprintf("%d", n); out = ""
    while (length(s) > 3) { out = "," substr(s, length(s) - 2) out; s = substr(s, 1, length(s) - 3) }
    return s out }
  NR == 1 { bare = $2; printf "| %s | %s | 1.00x | |\n", $1, commas($2); next }
  NR == 2 { base = $2 }
  { printf "| %s | %s | %.2fx | %+.1f%% |\n", $1, commas($2), $2 / bare, ($2 / base - 1) * 100 }' "$work/rows"
