#!/usr/bin/env bash
# Soak test (not part of CI, issue #38): two release gateway replicas under
# steady mixed load for MINUTES (default 30), sharing a ledger in their own
# PostgreSQL (group durability) and budgets and rate limits in their own
# Redis, in front of two `switchyard sim` servers priced as cloud backends,
# with faults injected on a schedule. Load comes from examples/soak-load:
# streams opened, read, abandoned half-way and connections replaced all the
# time, round-robin over both replicas, every request with a unique
# `x-request-id`; beside it one worker spends a key with a small daily
# budget down, one request at a time.
#
# Faults: sim a resets 1% of its connections (mid-stream when streaming)
# and sim b answers 1% of requests with a 500 all along; and, as the
# timeline it prints says, at about 25% of the run sim b is replaced by a
# simulator answering every request with a 500 (a burst of 5xx) for 30 s,
# at 40% PostgreSQL stops (`pg_ctl stop -m fast`) for 15 s, at 55% sim a is
# stalled (SIGSTOP, then SIGCONT) for 20 s, and at 70% Redis is killed and
# started again empty on its port 10 s later. (Shorter runs scale those
# down, to 5 s at least.) Routes make no retries, fallbacks or hedges, so
# each request is one backend call and one ledger row.
#
# It passes when:
# - every request that got an HTTP status (answered, refused or failed) has
#   exactly one row in PostgreSQL under its `client_request_id`, no id has
#   two, and neither replica counted a row lost, once both replicas' ledgers
#   have drained (`/readyz` `ledger.pending_rows` 0);
# - the small key's spend on each (UTC) day in the ledger is at most its
#   daily limit plus one request's worst-case reservation (printed), and the
#   budget was actually reached (some requests refused `budget_exhausted`);
# - for each replica, after WARMUP minutes (default 5), resident memory
#   stays within 10% (max/min <= 1.10), and open descriptors do not drift:
#   their mean over the last third of the minute samples is within 10% of
#   the mean over the first third, and at rest after the load (100 s after
#   it stops, once idle upstream connections have closed) no more are open
#   (two spare) than at rest before it, not counting its pooled connections
#   to PostgreSQL and Redis, of which there are at most `pool_size`
#   (4) to PostgreSQL. (One sample's descriptors move with the connections
#   open at that instant: 16 clients, pools replaced and streams dropped all
#   the time.)
# It ends with a summary in Markdown. Exit status 1 when it does not pass;
# the work directory (configs, logs, the request ids, the samples) is then
# kept and named.
#
#   scripts/soak.sh [MINUTES] [REQUESTS_PER_SECOND] [WARMUP]
#
# Needs redis-server and redis-cli, PostgreSQL's server binaries under
# /usr/lib/postgresql/*/bin (Debian's `redis-server` and `postgresql`
# packages; run as root, PostgreSQL runs as the `postgres` user) and curl.
# Environment: SOAK_NO_BUILD=1 skips the release build and uses the
# binaries in SOAK_BIN_DIR (default target/release) as they are; SOAK_KEEP=1
# keeps the work directory after a pass too; SOAK_ON_UNAVAILABLE=local runs
# the replicas with `state.redis.on_unavailable: local` instead of
# `fail_closed` (with `local`, each replica spends its share of a budget
# from its own count while Redis is away, so the budget check may fail by
# design). A run needs at least WARMUP + 3 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-30}"
rate="${2:-40}"
warmup="${3:-5}"
on_unavailable="${SOAK_ON_UNAVAILABLE:-fail_closed}"

bin_dir="${SOAK_BIN_DIR:-$PWD/target/release}"
if [ -z "${SOAK_NO_BUILD:-}" ]; then
  cargo build --release --locked -p switchyard -p switchyard-examples --bin switchyard --bin soak-load
fi
bin=$bin_dir/switchyard
load_bin=$bin_dir/soak-load
pg_bin=$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin 2>/dev/null | sort -V | tail -1)
for need in "$bin" "$load_bin" "$pg_bin/initdb" "$pg_bin/pg_ctl" "$pg_bin/psql"; do
  [ -x "$need" ] || { echo "soak: $need is missing" >&2; exit 2; }
done
for need in redis-server redis-cli curl; do
  command -v "$need" >/dev/null || { echo "soak: $need is not installed" >&2; exit 2; }
done

# Prices of both sims (USD per million tokens), the largest output a request
# asks for, and the keys' daily budgets.
price_in=10
price_out=30
max_tokens=48
small_budget=0.50
big_budget=100000
redis_pool=2
pg_pool=4

work=$(mktemp -d)
mkdir -p "$work/run" "$work/redis" "$work/pg"
keep_work="${SOAK_KEEP:-}"
# PostgreSQL refuses to run as root: as root, its tools run as `postgres`,
# who needs to reach its directory.
as_pg=()
if [ "$(id -u)" = 0 ]; then
  as_pg=(runuser -u postgres --)
  chmod 755 "$work"
  chown postgres: "$work/pg"
fi

# Pid files hold "PID START" (the start time from /proc/PID/stat), so a pid
# is only ever signalled while it is still the process this script started.
starttime() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $20}'; }
remember() { echo "$2 $(starttime "$2")" >"$work/$1.pid"; }
pid_of() {
  local pid start state
  [ -f "$work/$1.pid" ] || return 1
  read -r pid start <"$work/$1.pid"
  [ -n "$pid" ] && [ -n "$start" ] && [ "$(starttime "$pid")" = "$start" ] || return 1
  state=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{print $1}')
  [ "$state" != Z ] || return 1
  echo "$pid"
}
signal() {
  local pid
  pid=$(pid_of "$2") || return 0
  kill "-$1" "$pid" 2>/dev/null || true
}
# Sends SIGNAL to NAME and waits (at most 15 s) until it is gone.
stop() {
  signal "$1" "$2"
  for _ in $(seq 150); do pid_of "$2" >/dev/null || return 0; sleep 0.1; done
  return 1
}

pg_ctl() { "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$work/pg/data" -l "$work/pg/log" "$@"; }
pg_up() {
  # fsync off: the run restarts PostgreSQL cleanly, never loses power.
  pg_ctl -w -t 60 -o "-c listen_addresses=127.0.0.1 -p $pg_port -k $work/pg -c fsync=off -c max_connections=100" start >/dev/null
}
sql() {
  "$pg_bin/psql" -h 127.0.0.1 -p "$pg_port" -U switchyard -d soak -v ON_ERROR_STOP=1 -Atc "$1"
}

faults_pid=
cleanup() {
  local status=$?
  set +e
  [ -n "$faults_pid" ] && kill "$faults_pid" 2>/dev/null
  signal TERM load
  for f in "$work"/*.pid; do
    [ -e "$f" ] || continue
    name=$(basename "$f" .pid)
    signal CONT "$name"
    signal TERM "$name"
  done
  sleep 1
  for f in "$work"/*.pid; do [ -e "$f" ] && signal KILL "$(basename "$f" .pid)"; done
  pg_ctl status >/dev/null 2>&1 && pg_ctl -m immediate stop >/dev/null 2>&1
  # Kept after a failure, and after an error in this script too.
  if [ -n "$keep_work" ] || [ "$status" != 0 ]; then echo "logs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A loopback port nobody listens on now.
free_port() {
  local port
  for _ in $(seq 100); do
    port=$((20000 + RANDOM % 30000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  return 1
}

# Starts a process in the background in a directory of its own (its
# stdout and stderr in NAME.out and NAME.err); `address NAME` then waits
# for the address its first stdout line names and prints it.
start() {
  local name="$1"
  shift
  mkdir -p "$work/run/$name"
  (cd "$work/run/$name" && exec "$@") >"$work/$name.out" 2>"$work/$name.err" &
  remember "$name" $!
  # Not a job of this shell: no notice when a fault kills it.
  disown $!
}
address() {
  for _ in $(seq 300); do grep -q http:// "$work/$1.out" && break; sleep 0.1; done
  grep -m1 -o 'http://[0-9.:]*' "$work/$1.out" || {
    echo "soak: $1 did not start; its log:" >&2
    tail -20 "$work/$1.err" >&2
    return 1
  }
}

redis_up() {
  start "redis$1" redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no --dir "$work/redis"
  for _ in $(seq 100); do
    [ "$(redis-cli -h 127.0.0.1 -p "$redis_port" ping 2>/dev/null)" = PONG ] && return 0
    sleep 0.1
  done
  echo "soak: redis-server did not start; its log:" >&2
  tail -20 "$work/redis$1.out" >&2
  return 1
}

# PostgreSQL and Redis of our own, on free loopback ports.
pg_port=$(free_port)
"${as_pg[@]}" "$pg_bin/initdb" -D "$work/pg/data" -A trust -U switchyard -E UTF8 --no-sync >"$work/initdb.log"
pg_up
"$pg_bin/psql" -h 127.0.0.1 -p "$pg_port" -U switchyard -d postgres -qc "CREATE DATABASE soak"
pg_url="postgres://switchyard@127.0.0.1:$pg_port/soak"
redis_port=$(free_port)
redis_up 1

# Two simulators standing in for cloud APIs (hence their concurrency).
sim() {
  local name="$1" profile="$2" listen="$3"
  shift 3
  local sets=()
  for s in "$@"; do sets+=(--set "$s"); done
  start "$name" "$bin" sim --listen "$listen" --preset "$profile" --set max_concurrency=16 "${sets[@]}"
}
sim_a_sets=(decode_tokens_per_s=400 base_ttft_ms=20 faults.reset_rate=0.01)
sim_b_sets=(decode_tokens_per_s=200 base_ttft_ms=40 faults.error_rate=0.01)
sim sim-a small 127.0.0.1:0 "${sim_a_sets[@]}"
sim sim-b mid 127.0.0.1:0 "${sim_b_sets[@]}"
sim_a=$(address sim-a)
sim_b=$(address sim-b)
sim_b_listen=${sim_b#http://}

load_key="sk-soak-load-$RANDOM$RANDOM$RANDOM"
small_key="sk-soak-small-$RANDOM$RANDOM$RANDOM"
rpm=$(awk -v r="$rate" 'BEGIN { printf "%d", r * 60 * 4 + 600 }')
cat >"$work/soak.yaml" <<YAML
backends:
  a:
    tier: cloud
    openai: {base_url: "$sim_a/v1"}
    price: {input_per_mtok: $price_in, output_per_mtok: $price_out}
    timeouts: {first_byte_ms: 5000, idle_ms: 10000}
  b:
    tier: cloud
    openai: {base_url: "$sim_b/v1"}
    price: {input_per_mtok: $price_in, output_per_mtok: $price_out}
    timeouts: {first_byte_ms: 5000, idle_ms: 10000}
routes:
  auto:
    strategy:
      split:
        weights: {a: 80, b: 20}
    # One backend call per request, so one ledger row per request.
    retries: 0
auth:
  keys:
    - name: load
      hash: '$("$bin" key-hash "$load_key")'
      budget: {daily_usd: $big_budget}
      requests_per_minute: $rpm
      tokens_per_minute: $((rpm * 200))
    - name: small
      hash: '$("$bin" key-hash "$small_key")'
      budget: {daily_usd: $small_budget}
ledger:
  durability: group
  flush_ms: 50
  postgres: {url: '$pg_url', pool_size: $pg_pool, spool_rows: 100000, on_full: refuse}
state:
  redis: {url: 'redis://127.0.0.1:$redis_port', key_prefix: soak, pool_size: $redis_pool, timeout_ms: 250, on_unavailable: $on_unavailable, replicas: 2}
YAML
"$bin" check "$work/soak.yaml" >"$work/check.out" 2>&1 || {
  cat "$work/check.out"
  keep_work=1
  exit 1
}

replicas=(gw1 gw2)
for r in "${replicas[@]}"; do
  start "$r" "$bin" serve --config "$work/soak.yaml" --listen 127.0.0.1:0
done
declare -A url
for r in "${replicas[@]}"; do url[$r]=$(address "$r") || { keep_work=1; exit 1; }; done
echo "soak: ${minutes} min at ${rate} req/s against ${url[gw1]} (pid $(pid_of gw1)) and ${url[gw2]} (pid $(pid_of gw2)); PostgreSQL on $pg_port, Redis on $redis_port; work in $work"
alive() {
  local r
  for r in "${replicas[@]}"; do
    pid_of "$r" >/dev/null && continue
    echo "replica $r died; its log:"
    tail -50 "$work/$r.err"
    keep_work=1
    exit 1
  done
}
fds_now() { find "/proc/$(pid_of "$1")/fd" -mindepth 1 -maxdepth 1 | wc -l; }
# Sockets of replica $1 connected to 127.0.0.1:$2.
conns_to() {
  local pid hex
  pid=$(pid_of "$1") || { echo 0; return; }
  hex=$(printf '%04X' "$2")
  { echo inodes; find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 -lname 'socket:*' -printf '%l\n' 2>/dev/null | tr -dc '0-9\n'; } |
    awk -v port="$hex" 'NR == FNR { mine[$1] = 1; next }
      FNR > 1 { split($3, remote, ":"); if (remote[2] == port && ($10 in mine)) n++ }
      END { print n + 0 }' - "/proc/$pid/net/tcp"
}
# At rest: the fewest descriptors of a few looks, not counting pooled
# connections to PostgreSQL and Redis (opened as they are first needed),
# as "OTHER PG REDIS".
at_rest() {
  local best='' n pg redis
  for _ in 1 2 3; do
    pg=$(conns_to "$1" "$pg_port")
    redis=$(conns_to "$1" "$redis_port")
    n=$(($(fds_now "$1") - pg - redis))
    if [ -z "$best" ] || [ "$n" -lt "${best%% *}" ]; then best="$n $pg $redis"; fi
    sleep 1
  done
  echo "$best"
}
# Once start-up's own connections (a backend's context window being read)
# have had time to finish.
sleep 5
declare -A rest_before rest_after
alive
for r in "${replicas[@]}"; do rest_before[$r]=$(at_rest "$r"); done

# The fault schedule, in seconds from the start of the load: a full-length
# run's durations, scaled down for shorter runs (to 5 s at least).
total=$((minutes * 60))
scaled() { awk -v f="$1" -v t="$total" 'BEGIN { s = f * t / 1800; if (s < 5) s = 5; if (s > f) s = f; printf "%d", s }'; }
share() { awk -v p="$1" -v t="$total" 'BEGIN { printf "%d", p * t }'; }
burst_at=$(share 0.25) burst_for=$(scaled 30)
pg_at=$(share 0.40) pg_for=$(scaled 15)
stall_at=$(share 0.55) stall_for=$(scaled 20)
redis_at=$(share 0.70) redis_for=$(scaled 10)

# The budget worker's pace: the small budget spent by about 45% of the run
# (after the PostgreSQL restart, before the Redis one), at an expected ~20
# prompt and ~40 output tokens a request.
budget_every_ms=$(awk -v b="$small_budget" -v t="$total" -v i="$price_in" -v o="$price_out" \
  'BEGIN { cost = (20 * i + 40 * o) / 1e6; n = b / cost; ms = 0.45 * t * 1000 / n; if (ms < 50) ms = 50; printf "%d", ms }')

load_start=$(date +%s)
timeline="$work/timeline"
: >"$timeline"
mark() {
  local s=$(($(date +%s) - load_start))
  printf 'T+%02d:%02d %s\n' $((s / 60)) $((s % 60)) "$*" | tee -a "$timeline"
}
# A fault's window, in seconds since the load started: `window NAME start|end`.
window() { echo "$1 $2 $(($(date +%s) - load_start))" >>"$work/windows"; }
fault_failed() {
  mark "FAULT STEP FAILED: $*"
  touch "$work/fault_failed"
}

# A function run in the background: each fault at its time.
faults() {
  local nap=
  trap '[ -n "$nap" ] && kill "$nap" 2>/dev/null; exit 0' TERM
  set +e
  nap_until() {
    local wait=$((load_start + $1 - $(date +%s)))
    [ "$wait" -gt 0 ] || return 0
    sleep "$wait" &
    nap=$!
    wait "$nap"
  }
  nap_until "$burst_at"
  mark "5xx burst: sim b killed, a simulator answering every request with 500 on its port for ${burst_for}s"
  window "5xx-burst" start
  stop KILL sim-b || fault_failed "sim b did not stop"
  sim sim-b-burst mid "$sim_b_listen" "${sim_b_sets[@]}" faults.error_rate=1
  address sim-b-burst >/dev/null || fault_failed "the bursting sim did not start"
  nap_until $((burst_at + burst_for))
  stop KILL sim-b-burst || fault_failed "the bursting sim did not stop"
  sim sim-b-after mid "$sim_b_listen" "${sim_b_sets[@]}"
  address sim-b-after >/dev/null || fault_failed "sim b did not start again"
  window "5xx-burst" end
  mark "5xx burst over: sim b back"

  nap_until "$pg_at"
  mark "PostgreSQL stopped (pg_ctl stop -m fast) for ${pg_for}s"
  window "postgres-restart" start
  pg_ctl -m fast stop >/dev/null || fault_failed "pg_ctl stop"
  nap_until $((pg_at + pg_for))
  pg_up || fault_failed "pg_ctl start"
  window "postgres-restart" end
  mark "PostgreSQL started again"

  nap_until "$stall_at"
  mark "sim a stalled (SIGSTOP) for ${stall_for}s"
  signal STOP sim-a
  window "stall" start
  nap_until $((stall_at + stall_for))
  signal CONT sim-a
  window "stall" end
  mark "sim a resumed (SIGCONT)"

  nap_until "$redis_at"
  mark "Redis killed (SIGKILL), down for ${redis_for}s"
  stop KILL redis1 || fault_failed "Redis did not stop"
  window "redis-restart" start
  nap_until $((redis_at + redis_for))
  redis_up 2 || fault_failed "Redis did not start again"
  window "redis-restart" end
  mark "Redis started again, empty, on the same port"
}

ids="$work/ids"
: >"$ids"
: >"$work/windows"
# A minute longer than the sampling, so the last sample is taken under load.
SOAK_IDS="$ids" SOAK_KEY="$load_key" SOAK_BUDGET_KEY="$small_key" SOAK_BUDGET_EVERY_MS="$budget_every_ms" \
  SOAK_MAX_TOKENS="$max_tokens" "$load_bin" "${url[gw1]},${url[gw2]}" "$((minutes + 1))" "$rate" >"$work/load.out" 2>"$work/load.err" &
load=$!
remember load "$load"
faults &
faults_pid=$!
mark "load started: ${rate} req/s over both replicas, the budget worker one request every ${budget_every_ms} ms"

samples="$work/samples"
for minute in $(seq "$minutes"); do
  sleep 60
  alive
  line="$minute"
  report="minute $minute:"
  for r in "${replicas[@]}"; do
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$(pid_of "$r")/status")
    fds=$(fds_now "$r")
    line="$line $rss $fds"
    report="$report $r RSS ${rss} kB, ${fds} fds;"
  done
  echo "$line" >>"$samples"
  echo "$report $(tail -1 "$work/load.out")"
done
load_status=0
wait "$load" || load_status=$?
wait "$faults_pid" || true
faults_pid=
mark "load ended"
tail -1 "$work/load.out"
alive
load_ended=$(date +%s)

# Both ledgers drained: no row pending twice in a row (a row on its way from
# the queue into the spool is in neither count for an instant), 120 s at most.
declare -A lost
drained=1
for r in "${replicas[@]}"; do
  ok=
  for _ in $(seq 400); do
    ready=$(curl -s --max-time 5 "${url[$r]}/readyz" || true)
    pending=$(grep -o '"pending_rows":[0-9]*' <<<"$ready" | cut -d: -f2)
    if [ "$pending" = 0 ]; then
      sleep 0.3
      ready=$(curl -s --max-time 5 "${url[$r]}/readyz" || true)
      pending=$(grep -o '"pending_rows":[0-9]*' <<<"$ready" | cut -d: -f2)
      if [ "$pending" = 0 ]; then ok=1; break; fi
    fi
    sleep 0.3
  done
  lost[$r]=$(grep -o '"lost_rows":[0-9]*' <<<"$ready" | cut -d: -f2)
  if [ -z "$ok" ]; then
    echo "replica $r's ledger did not drain: $ready"
    drained=
  fi
done
mark "ledgers drained"

# Idle upstream connections stay pooled for 90 s; then they are closed.
rest_wait=$((load_ended + 100 - $(date +%s)))
[ "$rest_wait" -gt 0 ] && sleep "$rest_wait"
alive
for r in "${replicas[@]}"; do rest_after[$r]=$(at_rest "$r"); done

# Exactly once: each id with an HTTP status has one row, no id has two.
rows="$work/rows"
sql "SELECT client_request_id, count(*) FROM requests WHERE client_request_id IS NOT NULL GROUP BY 1" >"$rows"
no_id_rows=$(sql "SELECT count(*) FROM requests WHERE client_request_id IS NULL")
ledger_statuses=$(sql "SELECT status, count(*) FROM requests GROUP BY 1 ORDER BY 2 DESC" | tr '|\n' '= ' | sed 's/ $//')
eval "$(awk '
  FILENAME == ARGV[1] { split($0, f, "|"); rows[f[1]] = f[2]; next }
  {
    sent++; seen[$1]++; status[$2]++
    if ($1 ~ /^budget-/) budget_sent++
    if ($2 == "error") { if ($1 in rows) error_with_row++; next }
    answered++
    if ($2 ~ /^2/) ok++; else if ($2 == 429 || $2 == 503) refused++; else failed++
    if (!($1 in rows)) { missing++; if (missing <= 10) missing_ids = missing_ids " " $1 }
    else if (rows[$1] == 1) once++
  }
  END {
    for (id in rows) {
      total_rows += rows[id]
      if (rows[id] > 1) { duplicates++; if (duplicates <= 10) duplicate_ids = duplicate_ids " " id }
      if (!(id in seen)) unknown++
    }
    for (id in seen) if (seen[id] > 1) reused++
    n = 0
    for (s in status) list[++n] = s
    for (i = 2; i <= n; i++) for (j = i; j > 1 && list[j] < list[j - 1]; j--) { t = list[j]; list[j] = list[j - 1]; list[j - 1] = t }
    for (i = 1; i <= n; i++) by_status = by_status (i > 1 ? ", " : "") list[i] " " status[list[i]]
    printf "sent=%d budget_sent=%d answered=%d ok=%d refused=%d failed=%d no_answer=%d once=%d missing=%d duplicates=%d unknown=%d reused=%d error_with_row=%d total_rows=%d\n",
      sent, budget_sent, answered, ok, refused, failed, status["error"], once, missing, duplicates, unknown, reused, error_with_row, total_rows
    printf "by_status=\"%s\" missing_ids=\"%s\" duplicate_ids=\"%s\"\n", by_status, missing_ids, duplicate_ids
  }' "$rows" "$ids")"

# What requests got during each fault and the 10 s after it (by the
# seconds soak-load wrote beside each id).
fault_effects=$(awk '
  FILENAME == ARGV[1] { if ($2 == "start") { n++; name[n] = $1; from[n] = $3 } else for (i = 1; i <= n; i++) if (name[i] == $1) to[i] = $3; next }
  { for (i = 1; i <= n; i++) if ($3 >= from[i] && $3 <= to[i] + 10) { got[i, $2]++; seen[i, $2] = 1; total[i]++ } }
  END {
    for (i = 1; i <= n; i++) {
      line = sprintf("%s (T+%ds to T+%ds, and 10 s after): %d requests:", name[i], from[i], to[i], total[i])
      for (k in seen) { split(k, p, SUBSEP); if (p[1] == i) line = line " " p[2] " " got[i, p[2]] }
      print line
    }
  }' "$work/windows" "$ids")

# The small budget: per UTC day, spend against the limit plus one request's
# worst case: max_tokens of output and, of prompt, the longest the ledger
# saw or 64 tokens, whichever is more (the reservation counts the prompt
# by estimate).
budget_days=$(sql "SELECT ts_ms / 86400000, round(sum(cost_usd)::numeric, 6), count(*), sum(CASE WHEN status = 'budget_exhausted' THEN 1 ELSE 0 END), max(input_tokens) FROM requests WHERE \"key\" = 'small' GROUP BY 1 ORDER BY 1")
max_prompt=$(awk -F'|' '$5 > m { m = $5 } END { print (m > 64 ? m : 64) }' <<<"$budget_days")
reservation=$(awk -v p="$max_prompt" -v m="$max_tokens" -v i="$price_in" -v o="$price_out" 'BEGIN { printf "%.6f", (p * i + m * o) / 1e6 }')
budget_verdict=$(awk -F'|' -v limit="$small_budget" -v r="$reservation" '
  NF >= 4 { days++; if ($2 > spent) spent = $2; refused += $4; if ($2 > limit + r + 1e-9) over++ }
  END { printf "budget_spent=%s budget_refused=%d budget_over=%d budget_days=%d\n", spent + 0, refused, over, days }' <<<"$budget_days")
eval "$budget_verdict"
redis_counted=$(for k in $(redis-cli -h 127.0.0.1 -p "$redis_port" --scan --pattern '{soak}sp:key:small:d:*' 2>/dev/null); do
  redis-cli -h 127.0.0.1 -p "$redis_port" hget "$k" c 2>/dev/null
done | awk '{ s += $1 } END { printf "%.6f", s / 1e6 }')

# Memory and descriptors of each replica, after the warm-up.
fail=0
problems=()
declare -A rss_range fd_range
column=2
for r in "${replicas[@]}"; do
  read -r other_before pg_before redis_before <<<"${rest_before[$r]}"
  read -r other_after pg_after redis_after <<<"${rest_after[$r]}"
  verdict=$(awk -v warmup="$warmup" -v c="$column" -v before="$other_before" -v after="$other_after" \
    -v pg_after="$pg_after" -v pg_pool="$pg_pool" '
    $1 > warmup {
      n++; rss[n] = $c; fds[n] = $(c + 1)
      if (n == 1 || $c < rmin) rmin = $c; if ($c > rmax) rmax = $c
      if (n == 1 || $(c + 1) < fmin) fmin = $(c + 1); if ($(c + 1) > fmax) fmax = $(c + 1)
    }
    END {
      if (n < 3) { printf "rss=\"too few samples\" fds=\"too few samples\" problem=\"too few samples after the warm-up\"\n"; exit }
      third = int(n / 3)
      for (i = 1; i <= third; i++) { early += fds[i]; late += fds[n - third + i] }
      early /= third; late /= third
      problem = ""
      if (rmax / rmin > 1.10) problem = problem "resident memory moved more than 10%; "
      if (late / early > 1.10) problem = problem "open descriptors drifted up more than 10%; "
      # Two spare: a context-window read of a backend may be open at either look.
      if (after > before + 2) problem = problem "more descriptors open at rest after the load than before; "
      if (pg_after > pg_pool) problem = problem "more connections to PostgreSQL than its pool; "
      printf "rss=\"%d-%d kB (max/min %.3f)\" fds=\"%d-%d, mean %.1f first third, %.1f last (%.3f); at rest %d before, %d after\" problem=\"%s\"\n",
        rmin, rmax, rmax / rmin, fmin, fmax, early, late, late / early, before, after, problem
    }' "$samples")
  eval "$verdict"
  rss_range[$r]=$rss
  fd_range[$r]="$fds (+ PostgreSQL $pg_before/$pg_after, Redis $redis_before/$redis_after pooled)"
  if [ -n "$problem" ]; then problems+=("$r: $problem"); fi
  column=$((column + 2))
done
[ "$load_status" = 0 ] || problems+=("soak-load exited with status $load_status")
[ -e "$work/fault_failed" ] && problems+=("a fault step failed (see the timeline)")
[ -n "$drained" ] || problems+=("a ledger did not drain")
for r in "${replicas[@]}"; do
  [ "${lost[$r]:-x}" = 0 ] || problems+=("$r counted ${lost[$r]:-unknown} ledger rows lost")
done
[ "$missing" = 0 ] || problems+=("$missing answered requests have no row:$missing_ids")
[ "$duplicates" = 0 ] || problems+=("$duplicates request ids have more than one row:$duplicate_ids")
[ "$reused" = 0 ] || problems+=("$reused request ids were sent twice")
[ "$budget_over" = 0 ] || problems+=("the small key spent more than its limit plus one reservation")
[ "$budget_refused" -gt 0 ] || problems+=("the small budget was never reached, so the overshoot check proved nothing")
[ "${#problems[@]}" = 0 ] || fail=1

{
  echo
  echo "## Soak: $(date -u +%Y-%m-%d), ${minutes} min at ${rate} req/s over 2 replicas"
  echo
  echo "| | |"
  echo "|---|---|"
  echo "| duration | ${minutes} min of load (+1 min), warm-up ${warmup} min; on_unavailable: ${on_unavailable} |"
  echo "| requests sent | $sent ($budget_sent by the budget worker) |"
  echo "| answered (an HTTP status) | $answered: 2xx $ok, refused (429/503) $refused, other errors $failed |"
  echo "| no response | $no_answer ($error_with_row of them have a row anyway) |"
  echo "| by status | $by_status |"
  echo "| rows checked | $answered ids with a status: $once exactly once; $total_rows rows with a client id, $no_id_rows without; $unknown ids not sent by the load |"
  echo "| duplicates | $duplicates |"
  echo "| missing | $missing |"
  echo "| ledger rows lost | gw1 ${lost[gw1]:-?}, gw2 ${lost[gw2]:-?} |"
  echo "| ledger by status | $ledger_statuses |"
  echo "| small budget | spent \$$budget_spent of \$$small_budget a day (bound \$$(awk -v l="$small_budget" -v r="$reservation" 'BEGIN { printf "%.6f", l + r }'): one reservation is \$$reservation, $max_prompt prompt + $max_tokens output tokens at \$$price_in/\$$price_out per Mtok); $budget_refused refused budget_exhausted; Redis counts \$$redis_counted since its restart |"
  for r in "${replicas[@]}"; do
    echo "| RSS $r | ${rss_range[$r]} |"
    echo "| fds $r | ${fd_range[$r]} |"
  done
  if [ "$fail" = 0 ]; then echo "| result | PASS |"; else echo "| result | FAIL |"; fi
  echo
  echo "Fault timeline:"
  echo
  sed 's/^/    /' "$timeline"
  echo
  echo "What requests got during each fault (HTTP status, or error):"
  echo
  sed 's/^/    /' <<<"$fault_effects"
  echo
  for p in "${problems[@]}"; do echo "FAIL: $p"; done
} | tee "$work/summary.md"

if [ "$fail" != 0 ]; then
  keep_work=1
  exit 1
fi
echo "PASS"
