#!/usr/bin/env bash
# Real agent CLIs against running gateways: Claude Code over Anthropic
# Messages, Codex CLI over the Responses API and Gemini CLI over Gemini's
# generateContent, each served once by a chat backend (the embedded
# default's simulators) and once through a second gateway in front of the
# first (an Anthropic-dialect backend, or a Gemini-dialect one); then
# the Vercel AI SDK's structured output against the embedded default.
# The packages are installed from the npm registry with `npm ci` against the
# pinned lockfile (its integrity hashes verify every package) into a cache
# folder outside the checkout, reinstalled only when the lockfile changes.
#   usage: tests/clients/run.sh PATH_TO_SWITCHYARD_BINARY
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$1"
cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}/npm"
stamp="$cache/.lock.sha256"
want=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
if [ ! -x "$cache/node_modules/.bin/claude" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "== installing Claude Code, Codex CLI and Gemini CLI into $cache"
  mkdir -p "$cache"
  cp "$here/package.json" "$here/package-lock.json" "$cache/"
  (cd "$cache" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" > "$stamp"
fi

work=$(mktemp -d)
trap 'kill "${gateway:-}" "${front:-}" "${tools:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/gateway" "$work/front" "$work/home" "$work/project"

# Starts `switchyard serve` in its own directory (its ledger lands there)
# and prints the address it bound.
serve() {
  local name="$1"
  shift
  (cd "$work/$name" && exec "$bin" serve --listen 127.0.0.1:0 "$@") >"$work/$name.out" 2>"$work/$name.log" &
  echo $!
}
address_of() {
  for _ in $(seq 100); do grep -q http:// "$work/$1.out" && break; sleep 0.1; done
  grep -o 'http://[0-9.:]*' "$work/$1.out"
}

gateway=$(serve gateway)
addr=$(address_of gateway)
cat > "$work/front.yaml" <<YAML
backends:
  claude:
    tier: cloud
    model: large
    anthropic: {base_url: "$addr/v1"}
    price: {input_per_mtok: 3, output_per_mtok: 15}
  gemini:
    tier: cloud
    model: large
    gemini: {base_url: "$addr", api_key: env:SWITCHYARD_FRONT_GEMINI_KEY}
    price: {input_per_mtok: 0.3, output_per_mtok: 2.5}
YAML
front=$(SWITCHYARD_FRONT_GEMINI_KEY=test serve front --config "$work/front.yaml")
front_addr=$(address_of front)

check_claude() {
  python3 -c '
import json, sys
result = json.loads(sys.stdin.read().strip().splitlines()[-1])
assert result["is_error"] is False, result
assert result["result"].startswith("[sim]"), result["result"]
assert result["usage"]["output_tokens"] > 0
print("claude: ok,", result["num_turns"], "turns,", result["usage"]["output_tokens"], "output tokens")
'
}

# Claude Code asks for max_tokens 32000, which the `large` simulator's
# context fits. Its prompt carries tools, so the simulator first answers
# with a tool call and Claude Code sends the result back: a full agent turn.
run_claude() {
  local addr="$1" model="$2"
  echo "== Claude Code (claude -p) through $addr, model $model"
  (cd "$work/project" && HOME="$work/home" ANTHROPIC_BASE_URL="$addr" ANTHROPIC_AUTH_TOKEN=test \
    ANTHROPIC_SMALL_FAST_MODEL="$model" DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 DISABLE_AUTOUPDATER=1 \
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
    timeout 180 "$cache/node_modules/.bin/claude" -p "Say hello" --output-format json --model "$model") | check_claude
}

# run_codex ADDR MODEL PROMPT [CODEX ARGS...]
run_codex() {
  local addr="$1" model="$2" prompt="$3" home
  shift 3
  home=$(mktemp -d "$work/codex-XXXX")
  echo "== Codex CLI (codex exec, wire_api = responses) through $addr, model $model: $prompt"
  cat > "$home/config.toml" <<TOML
model = "$model"
model_provider = "switchyard"

[model_providers.switchyard]
name = "Switchyard"
base_url = "$addr/v1"
wire_api = "responses"
env_key = "SWITCHYARD_KEY"
TOML
  local out
  out=$(cd "$work/project" && CODEX_HOME="$home" SWITCHYARD_KEY=test \
    timeout 180 "$cache/node_modules/.bin/codex" exec --skip-git-repo-check "$@" "$prompt" 2>/dev/null)
  echo "$out" | grep -q '^\[sim\]' || { echo "codex gave no answer: $out"; exit 1; }
  echo "codex: ok"
}

# Gemini CLI takes GOOGLE_GEMINI_BASE_URL with the API-key auth type chosen
# in its settings (its env-only "gateway" type fails its own non-interactive
# check in this release); usage statistics, telemetry and updates off.
mkdir -p "$work/gemini-home/.gemini"
cat > "$work/gemini-home/.gemini/settings.json" <<JSON
{"security": {"auth": {"selectedType": "gemini-api-key"}},
 "privacy": {"usageStatisticsEnabled": false}, "telemetry": {"enabled": false},
 "general": {"disableAutoUpdate": true, "disableUpdateNag": true}}
JSON
run_gemini() {
  local addr="$1" model="$2"
  echo "== Gemini CLI (gemini -p) through $addr, model $model"
  (cd "$work/project" && HOME="$work/gemini-home" GEMINI_API_KEY=test GOOGLE_GEMINI_BASE_URL="$addr" \
    GEMINI_CLI_TRUST_WORKSPACE=true \
    timeout 180 "$cache/node_modules/.bin/gemini" -p "Say hello" -m "$model" --output-format json 2>/dev/null) |
    python3 -c '
import json, sys
result = json.loads(sys.stdin.read())
assert "error" not in result, result.get("error")
assert result["response"].startswith("[sim]"), result["response"]
# Stats are kept per model the answers name.
apis = [m["api"] for m in result["stats"]["models"].values()]
requests = sum(a["totalRequests"] for a in apis)
assert requests > 0 and all(a["totalErrors"] == 0 for a in apis), apis
print("gemini: ok,", requests, "requests")
'
}

run_claude "$addr" large
run_codex "$addr" large "Say hello"
run_claude "$front_addr" claude
run_codex "$front_addr" claude "Say hello"
run_gemini "$addr" large
run_gemini "$front_addr" gemini

# Claude Code with the gateway as its MCP server (`claude mcp add
# --transport http`): a gateway over the test FastMCP server (stdio, run
# by the SDK suites' venv) serves its tools at /mcp; with no built-in tools,
# the simulator's answer calls the MCP ones, and each call is a ledger row.
python="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}/venv/bin/python"
mkdir -p "$work/tools" "$work/mcp-home" "$work/mcp-project"
cp "$here/../../gateway/src/state/default.yaml" "$work/tools.yaml"
cat >> "$work/tools.yaml" <<YAML
mcp:
  servers:
    tools: {command: ["$python", "$here/../python/mcp_servers/tools.py", "stdio"]}
YAML
tools=$(serve tools --config "$work/tools.yaml")
tools_addr=$(address_of tools)
echo "== Claude Code (claude -p) using the gateway's /mcp as its MCP server, through $tools_addr"
(cd "$work/mcp-project" && HOME="$work/mcp-home" "$cache/node_modules/.bin/claude" mcp add --transport http gw "$tools_addr/mcp" >/dev/null)
(cd "$work/mcp-project" && HOME="$work/mcp-home" ANTHROPIC_BASE_URL="$tools_addr" ANTHROPIC_AUTH_TOKEN=test \
  ANTHROPIC_SMALL_FAST_MODEL=large DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 DISABLE_AUTOUPDATER=1 \
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
  timeout 180 "$cache/node_modules/.bin/claude" -p "Add 2 and 3" --model large --tools "" \
    --allowedTools mcp__gw__tools_add --output-format json) | check_claude
sleep 0.5  # one group commit of the ledger
python3 - "$work/tools/switchyard-ledger.db" <<'PY'
import sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute(
    "SELECT backend, tool, status FROM requests WHERE kind = 'tool'").fetchall()
assert ("tools", "add", "ok") in rows, rows
print("claude mcp: ok, tool calls recorded:", rows)
PY

# Codex CLI with the gateway as both its model provider and its MCP server
# (`mcp_servers.gw.url`): it offers its MCP tools in a namespace (`mcp__gw`),
# which the gateway gives the simulator as `mcp__gw__tools_add` and hands
# back under the namespace; the prompt names the tool, so the simulator
# calls it rather than Codex's built-ins. The tool call lands in the
# ledger in the same session as Codex's model calls (its `_meta.sessionId`
# and its `session-id` header).
run_codex "$tools_addr" large "Use tools_add to add 2 and 3." \
  -c "mcp_servers.gw.url=\"$tools_addr/mcp\"" -c 'mcp_servers.gw.default_tools_approval_mode="approve"'
sleep 0.5  # one group commit of the ledger
python3 - "$work/tools/switchyard-ledger.db" <<'PY'
import sqlite3, sys
ledger = sqlite3.connect(sys.argv[1])
tools = ledger.execute("SELECT session FROM requests WHERE kind = 'tool' AND tool = 'add' "
                       "AND status = 'ok' AND session IS NOT NULL").fetchall()
models = ledger.execute("SELECT DISTINCT session FROM requests WHERE kind IS NULL").fetchall()
shared = {s for (s,) in tools} & {s for (s,) in models}
assert shared, (tools, models)
print("codex mcp: ok, tool call in the session of its model calls:", shared)
PY

# Structured output through the Vercel AI SDK. The script runs from the
# cache folder, where its packages are.
echo "== Vercel AI SDK generateObject and streamObject through $addr"
cp "$here/structured_output.mjs" "$cache/"
timeout 120 node "$cache/structured_output.mjs" "$addr"

echo "requests served: $(grep -c 'switchyard::request' "$work/gateway.log") by the first gateway, $(grep -c 'switchyard::request' "$work/front.log") by the front one"
kill -TERM "$front" "$gateway" "$tools"  # started in subshells: not ours to wait for

echo "clients: passed"
