#!/usr/bin/env bash
# What a router can learn of task families it never saw: the recorded
# routing-quality answers (docs/routing-quality/answers.jsonl.gz, or the
# file given: scripts/routing-research.sh [ANSWERS]), scored
# held out as routing_quality_report.py scores them, by hand-made prompt
# features, a MiniLM embedding of the prompt, pairwise and per-tier
# objectives, kNN, and a cluster-then-rank router; with the ceilings that
# family identity alone gives. No model server: the answers are recorded.
# Installs its pinned Python packages (torch among them, several GB) into
# a venv under ~/.cache/switchyard once. Takes about ten minutes on 2 cores.
# Figures: docs/src/benchmarks/2026-12-04-routing-held-out-levers.md (600
# tasks) and 2026-12-06-routing-24-families.md (1,176).
set -euo pipefail
# ANSWERS, the first argument, is read from where the caller is.
answers=$(realpath -m "${1:-$(dirname "$0")/../docs/routing-quality/answers.jsonl.gz}")
cd "$(dirname "$0")/.."
cache=$(realpath -m "${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}")
venv="$cache/venv-routing-research"
requirements=scripts/routing_research/requirements.txt
want=$(sha256sum "$requirements" | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" != "$want" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
  echo "$want" > "$venv/.requirements.sha256"
fi
# Absolute: the steps below run from scripts/routing_research.
RQ_WORK=$(realpath -m "${RQ_WORK:-$cache/routing-research}")
export RQ_WORK HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$RQ_WORK"
# The recorded answers, or ANSWERS (JSONL, gzipped or not) instead.
case "$answers" in
  *.gz) gunzip -c "$answers" > "$RQ_WORK/answers.jsonl" ;;
  *) cp "$answers" "$RQ_WORK/answers.jsonl" ;;
esac
rm -f "$RQ_WORK/data.pkl"
cd scripts/routing_research
py="$venv/bin/python"
echo "== embeddings and encode time (one thread)"
THREADS=1 "$py" embed.py
echo "== prompt-only routers, held out"
"$py" experiments.py
echo "== cluster-then-rank, and with the true families as clusters"
"$py" cluster.py
"$py" cluster_truth.py
echo "== family-centred training, single cues, one family left out"
"$py" more.py
echo "== what family identity explains; seen families; within-family AUC; cascades"
"$py" family_ceiling.py
"$py" diagnose.py
echo "== within-family direction of the cues; the features' decision cost"
"$py" signs.py
