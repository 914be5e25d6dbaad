#!/usr/bin/env bash
# The routing-quality benchmark (issue #27), from one command:
#
#   scripts/bench-routing-quality.sh [--out DIR] [--tasks N] [--wide N] [--tiers "small mid large"]
#
# 1. Installs llama-server and the three models (cached and sha256-checked
#    by examples/local-three-tier/install.sh) and builds the gateway.
# 2. Runs each tier alone (two threads, one slot, nothing else on the
#    machine) behind the gateway on examples/routing-quality/local.yaml and
#    asks it every task of two seeds (A and B), recording the raw
#    answers (scripts/routing_collect.py): N/4 of the first six families and
#    N/4 of the next six per seed, and --wide (288: each level of each of
#    the twelve wide families six times) per seed. A rerun resumes where it
#    stopped, so answers recorded before the wide families came are kept.
# 3. Asks the cascade route live on LIVE_TASKS tasks (30) with small and
#    large up together, to check the replay against live routing.
# 4. scripts/routing_quality_analyse.sh: trains the learned router on each
#    half of the families and replays every route over the other half's
#    tasks (switchyard train-router, switchyard replay), then writes the report:
#    DIR/report/report.md, plot.svg and summary.json.
#
# Environment: SEED_A, SEED_B (default 1 and 2); LIVE_TASKS (0 skips the
# live check); SWITCHYARD_BIN to use a gateway binary already built.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}/routing-quality/run"
tasks=600
wide=288
tiers="small mid large"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --tasks) tasks="$2"; shift 2 ;;
    --wide) wide="$2"; shift 2 ;;
    --tiers) tiers="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
seed_a="${SEED_A:-1}"
seed_b="${SEED_B:-2}"
quarter=$((tasks / 4))
mkdir -p "$out"
out="$(cd "$out" && pwd)"
config="$PWD/examples/routing-quality/local.yaml"

# With OPENAI_API_KEY set, the large tier is a real cloud model instead of
# the local 1.5B: CLOUD_MODEL (gpt-4o-mini unless set), priced at
# CLOUD_PRICE USD per million input/output tokens (0.15/0.60). Untested
# here: this machine reaches no API.
cloud=false
large_price="2.5/10"
if [ -n "${OPENAI_API_KEY:-}" ]; then
  cloud=true
  large_price="${CLOUD_PRICE:-0.15/0.60}"
  python3 - "$config" "$out/config.yaml" "${CLOUD_MODEL:-gpt-4o-mini}" "$large_price" <<'PY'
import os, sys
source, target, model, price = sys.argv[1:]
price_in, price_out = price.split("/")
here = os.path.dirname(source)
text = open(source).read()
for old, new in [
    ("model: qwen2.5-coder-1.5b", f"model: {model}"),
    ('openai: {base_url: "http://127.0.0.1:18193/v1", engine: llamacpp, slots: 1}',
     'openai: {base_url: "https://api.openai.com/v1", api_key: env:OPENAI_API_KEY}'),
    ("price: {input_per_mtok: 2.50, cached_input_per_mtok: 1.25, output_per_mtok: 10.00}",
     f"price: {{input_per_mtok: {price_in}, output_per_mtok: {price_out}}}"),
    ("weights: small-fails.json", f"weights: {here}/small-fails.json"),
    ("weights: large-helps.json", f"weights: {here}/large-helps.json"),
]:
    assert text.count(old) == 1, old
    text = text.replace(old, new)
open(target, "w").write(text)
PY
  config="$out/config.yaml"
fi

eval "$(examples/local-three-tier/install.sh | grep -E '^(LLAMA_SERVER|MODELS)=')"
if [ -z "${SWITCHYARD_BIN:-}" ]; then
  cargo build --release --locked -p switchyard
  SWITCHYARD_BIN="$PWD/target/release/switchyard"
fi

declare -A port=([small]=18191 [mid]=18192 [large]=18193)
declare -A model=(
  [small]=smollm2-135m-instruct-q4_1.gguf
  [mid]=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
  [large]=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
)

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

# The gateway runs in the results folder, so its ledger lands there.
(cd "$out" && exec "$SWITCHYARD_BIN" serve --config "$config" --listen 127.0.0.1:0) \
  >"$out/gateway.out" 2>"$out/gateway.log" &
gateway=$!
pids+=("$gateway")
for _ in $(seq 100); do grep -q http:// "$out/gateway.out" && break; sleep 0.1; done
addr=$(grep -o 'http://[0-9.:]*' "$out/gateway.out")

start_tier() {  # TIER THREADS LOG: a llama-server for the tier, unless it is the cloud
  if [ "$1" = large ] && $cloud; then return; fi
  "$LLAMA_SERVER" --host 127.0.0.1 --port "${port[$1]}" -t "$2" -np 1 -c 4096 --no-webui --metrics \
    -m "$MODELS/${model[$1]}" >"$3" 2>&1 &
  pids+=("$!")
  for _ in $(seq 240); do curl -sf "http://127.0.0.1:${port[$1]}/health" >/dev/null && break; sleep 0.5; done
}

for tier in $tiers; do
  echo "== $tier alone (port ${port[$tier]}, or the cloud)"
  started=${#pids[@]}
  start_tier "$tier" 2 "$out/$tier.log"
  for seed in "$seed_a" "$seed_b"; do
    for mix in core more wide; do
      count=$quarter
      [ "$mix" = wide ] && count=$wide
      python3 scripts/routing_collect.py --gateway "$addr" --model "$tier" --seed "$seed" --count "$count" \
        --mix "$mix" --out "$out/answers.jsonl"
    done
  done
  # Stop what this tier started, so the next runs alone.
  for pid in "${pids[@]:$started}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  pids=("${pids[@]:0:$started}")
done

# The replay's check against live routing: small and large up together
# (one thread each), the cascade route asked live on the first tasks of
# seed B. The report compares where each went with where the replay sends it.
live_tasks="${LIVE_TASKS:-30}"
if [ "$live_tasks" -gt 0 ] && [[ " $tiers " == *" small "* && " $tiers " == *" large "* ]]; then
  echo "== live: route careful, small and large up together, $live_tasks tasks"
  start_tier small 1 "$out/small-live.log"
  start_tier large 1 "$out/large-live.log"
  python3 scripts/routing_collect.py --gateway "$addr" --model careful --seed "$seed_b" --count "$quarter" \
    --limit "$live_tasks" --out "$out/live.jsonl"
fi

cleanup
pids=()
echo "== answers in $out/answers.jsonl"
scripts/routing_quality_analyse.sh "$out" "$config" "$large_price"
