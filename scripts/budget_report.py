#!/usr/bin/env python3
"""Sums up a latency-budget benchmark run (scripts/bench-budgets.sh): the
client-side lines workload-replay wrote for each policy, and the gateway's
ledger for cost and predictions. Prints a Markdown report.

    budget_report.py LEDGER.db RUN.jsonl [RUN.jsonl ...]

A request is within budget when its first token came within its profile's
budget (docs/src/routing/profiles.md; RAG's grows by a second per 2,000 prompt tokens)
and, when it had more than one output token, it decoded at least at the
profile's rate, both as the client measured them."""

import json
import sqlite3
import statistics
import sys
from collections import Counter, defaultdict

# profile: (first-token budget in ms or None, minimum decode tokens/s)
BUDGETS = {
    "chat": (1000, 20),
    "code": (1500, 40),
    "agentic": (2000, 60),
    "rag": (1000, 10),
    "batch": (None, 0),
}
INTERACTIVE = ("chat", "code", "agentic")


def quantile(values, q):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def within(row):
    if row["status"] != 200 or row["error"] or row["ttft_ms"] is None:
        return False
    ttft_budget, min_rate = BUDGETS[row["profile"]]
    if ttft_budget is not None:
        if row["profile"] == "rag":
            ttft_budget += row["prompt_tokens"] / 2000 * 1000
        if row["ttft_ms"] > ttft_budget:
            return False
    rate = row["decode_tokens_per_s"]
    return rate is None or rate >= min_rate


def fmt(value, digits=0):
    return "-" if value is None else f"{value:,.{digits}f}"


def main():
    ledger, runs = sys.argv[1], sys.argv[2:]
    db = sqlite3.connect(ledger)
    costs = {
        request_id: (cost or 0.0, predicted, measured)
        for request_id, cost, predicted, measured in db.execute(
            "SELECT request_id, cost_usd, predicted_ttft_ms, ttft_ms FROM requests"
        )
    }
    requests, tasks = defaultdict(list), defaultdict(list)
    for path in runs:
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                (tasks if "task" in row else requests)[row["policy"]].append(row)
    policies = list(requests)
    cost = {p: sum(costs.get(r["request_id"], (0.0,))[0] for r in requests[p]) for p in policies}
    baseline = cost.get("all-cloud")

    print("| policy | profile | requests | within budget | first token p50 / p90 (ms) | decode p50 (tok/s) | backends |")
    print("|---|---|---|---|---|---|---|")
    for policy in policies:
        by_profile = defaultdict(list)
        for row in requests[policy]:
            by_profile[row["profile"]].append(row)
        for profile in BUDGETS:
            rows = by_profile.get(profile, [])
            if not rows:
                continue
            share = sum(within(r) for r in rows) / len(rows)
            ttfts = [r["ttft_ms"] for r in rows]
            rates = [r["decode_tokens_per_s"] for r in rows]
            mix = Counter(r["backend"] or "error" for r in rows)
            mix = ", ".join(f"{b} {n * 100 // len(rows)}%" for b, n in mix.most_common())
            print(f"| {policy} | {profile} | {len(rows)} | {share:.0%} | {fmt(quantile(ttfts, 0.5))} / "
                  f"{fmt(quantile(ttfts, 0.9))} | {fmt(quantile(rates, 0.5), 1)} | {mix} |")
    print()
    print("| policy | chat, code, agentic within budget | agent task p50 / p90 (s) | cost (USD) | against all-cloud |")
    print("|---|---|---|---|---|")
    for policy in policies:
        rows = [r for r in requests[policy] if r["profile"] in INTERACTIVE]
        share = sum(within(r) for r in rows) / max(1, len(rows))
        done = [t["task_ms"] / 1000 for t in tasks[policy] if not t["failed"]]
        ratio = f"{cost[policy] / baseline:.2f}x" if baseline else "-"
        print(f"| {policy} | {share:.1%} ({len(rows)}) | {fmt(quantile(done, 0.5), 1)} / {fmt(quantile(done, 0.9), 1)} | "
              f"{cost[policy]:.4f} | {ratio} |")
    print()
    print("First-token prediction error on the `budget` route (measured minus predicted, streamed calls):")
    print()
    print("| backend | calls | median error (ms) | median abs error (ms) | p90 abs error (ms) |")
    print("|---|---|---|---|---|")
    errors = defaultdict(list)
    for row in requests.get("budget", []):
        _, predicted, measured = costs.get(row["request_id"], (0.0, None, None))
        if predicted is not None and measured is not None:
            errors[row["backend"]].append(measured - predicted)
    for backend, values in sorted(errors.items()):
        absolute = [abs(v) for v in values]
        print(f"| {backend} | {len(values)} | {fmt(statistics.median(values))} | {fmt(statistics.median(absolute))} | "
              f"{fmt(quantile(absolute, 0.9))} |")


if __name__ == "__main__":
    main()
