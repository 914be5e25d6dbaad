# Sourced by scripts that run the gateway as the overhead benchmark does:
# one simulated backend behind a split route, a virtual key with rate
# limits, and the SQLite ledger.

# The simulated backend's settings: fast and steady (the benchmark's FAST).
BENCH_SIM_SETTINGS=(--preset small --set base_ttft_ms=1 --set jitter=0
  --set decode_tokens_per_s=20000 --set prefill_tokens_per_s=10000000)

# bench_gateway_config SWITCHYARD_BIN SIM_PORT KEY LEDGER_PATH > FILE
bench_gateway_config() {
  cat << YAML
backends:
  sim:
    tier: small
    openai: {base_url: 'http://127.0.0.1:$2/v1'}
    price: {usd_per_hour: 0.1}
routes:
  auto:
    strategy: {split: {weights: {sim: 1}}}
auth:
  keys:
    - {name: bench, hash: '$("$1" key-hash "$3")', requests_per_minute: 10000000, tokens_per_minute: 1000000000}
ledger: {path: '$4'}
YAML
}

# bench_bare_hop RELEASE_DIR: the bare hop (examples/bare-hop) built there,
# which `cargo build --release -p switchyard-examples --bin bare-hop` makes.
bench_bare_hop() {
  echo "$1/bare-hop"
}
