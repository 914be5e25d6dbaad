#!/usr/bin/env bash
# Real agent CLIs against a running gateway on the embedded default config:
# Claude Code over Anthropic Messages and Codex CLI over the Responses API.
# Both are installed from the npm registry with `npm ci` against the pinned
# lockfile (its integrity hashes verify every package) into a cache folder
# outside the checkout, reinstalled only when the lockfile changes.
#   usage: tests/clients/run.sh PATH_TO_SWITCHYARD_BINARY
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$1"
cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}/npm"
stamp="$cache/.lock.sha256"
want=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
if [ ! -x "$cache/node_modules/.bin/claude" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "== installing Claude Code and Codex CLI into $cache"
  mkdir -p "$cache"
  cp "$here/package.json" "$here/package-lock.json" "$cache/"
  (cd "$cache" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" > "$stamp"
fi

work=$(mktemp -d)
trap 'kill "$gateway" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/gateway" "$work/home" "$work/codex" "$work/project"
(cd "$work/gateway" && exec "$bin" serve --listen 127.0.0.1:0) >"$work/gateway.out" 2>"$work/gateway.log" &
gateway=$!
for _ in $(seq 50); do grep -q http:// "$work/gateway.out" && break; sleep 0.1; done
addr=$(grep -o 'http://[0-9.:]*' "$work/gateway.out")

# Claude Code sends max_tokens 32000: the `large` backend's context fits it.
# Its prompt carries tools, so the simulator answers with a tool call first
# and Claude Code sends the result back: a full agent round trip.
echo "== Claude Code (claude -p) through $addr"
out=$(cd "$work/project" && HOME="$work/home" ANTHROPIC_BASE_URL="$addr" ANTHROPIC_AUTH_TOKEN=test \
  ANTHROPIC_SMALL_FAST_MODEL=large DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 DISABLE_AUTOUPDATER=1 \
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
  timeout 180 "$cache/node_modules/.bin/claude" -p "Say hello" --output-format json --model large)
echo "$out" | python3 -c '
import json, sys
result = json.loads(sys.stdin.read().strip().splitlines()[-1])
assert result["is_error"] is False, result
assert result["result"].startswith("[sim]"), result["result"]
assert result["usage"]["output_tokens"] > 0
print("claude: ok,", result["num_turns"], "turns,", result["usage"]["output_tokens"], "output tokens")
'

echo "== Codex CLI (codex exec, wire_api = responses) through $addr"
cat > "$work/codex/config.toml" <<TOML
model = "large"
model_provider = "switchyard"

[model_providers.switchyard]
name = "Switchyard"
base_url = "$addr/v1"
wire_api = "responses"
env_key = "SWITCHYARD_KEY"
TOML
out=$(cd "$work/project" && CODEX_HOME="$work/codex" SWITCHYARD_KEY=test \
  timeout 180 "$cache/node_modules/.bin/codex" exec --skip-git-repo-check "Say hello" 2>/dev/null)
echo "$out" | grep -q '^\[sim\]' || { echo "codex gave no answer: $out"; exit 1; }
echo "codex: ok"

grep -c 'switchyard::request' "$work/gateway.log" | xargs echo "requests served:"
kill -TERM "$gateway"
wait "$gateway"
echo "clients: passed"
