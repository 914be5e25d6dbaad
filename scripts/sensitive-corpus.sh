#!/usr/bin/env bash
# The labelled corpus for the sensitive-data detectors (router/src/sensitive):
# installs Faker (pinned, hash-checked) into a venv cached under
# ~/.cache/switchyard and writes router/tests/data/sensitive-corpus.jsonl,
# or the path given as the first argument. The output is deterministic:
# the same requirements give the same bytes.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}"
venv="$cache/venv-corpus"
requirements=scripts/requirements-corpus.txt
want=$(sha256sum "$requirements" | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" != "$want" ]; then
  echo "== installing Faker into $venv"
  rm -rf "$venv"
  mkdir -p "$cache"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --require-hashes -r "$requirements"
  echo "$want" > "$venv/.requirements.sha256"
fi
out="${1:-router/tests/data/sensitive-corpus.jsonl}"
PYTHONHASHSEED=0 "$venv/bin/python" scripts/sensitive_corpus.py "$out"
sha256sum "$out"
