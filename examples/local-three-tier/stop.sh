#!/usr/bin/env bash
# Stops the servers start.sh started (by their recorded PIDs only).
#   examples/local-three-tier/stop.sh [DIR]
set -euo pipefail
dir="${1:-${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}/local-three-tier}"
for pidfile in "$dir"/run/*.pid; do
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null && echo "stopped $(basename "$pidfile" .pid) (pid $pid)"
  rm -f "$pidfile"
done
