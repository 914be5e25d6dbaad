"""The routing-quality report (issue #27): from the answers
`routing_collect.py` recorded, each policy's accuracy, share of large-tier
calls, cost and first-token time, RouteLLM's APGR and CPT for the policies
that sweep a threshold, and a plot.

    python3 scripts/routing_quality_report.py results.jsonl \\
        --small small --mid mid --large large \\
        --price large=0.15/0.60 --routes auto --out report/

The tiers' rows (every task asked of each tier) give the fixed policies
(all-small, all-mid, all-large), random routing between small and large
(swept over its share, averaged over 20 seeds) and the oracle (the
cheapest tier that solves each task; small when none does). Rows of the
routes named in `--routes` were routed live by the gateway: their
`x-switchyard-backend` receipts say where each task went. Grades are taken
again from the raw replies, so a changed grader needs no model run.
Prices are USD per million input/output tokens per tier (default 0).
Writes report.md, plot.svg and summary.json into `--out`. Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import routing_metrics as rm  # noqa: E402
import routing_tasks as rt  # noqa: E402

RANDOM_SEEDS = 20


def read_jsonl(paths: list[str]):
    """Every line of every file, parsed, in order."""
    for path in paths:
        with open(path) as f:
            for line in f:
                yield json.loads(line)


def load(paths: list[str]) -> dict[str, dict[str, dict]]:
    """Rows by model name, then task id, graded again from the replies."""
    rows: dict[str, dict[str, dict]] = {}
    for row in read_jsonl(paths):
        task = rt.Task.from_json(row["task"])
        row["correct"] = row.get("status") == 200 and rt.grade(task, row.get("reply", ""))
        rows.setdefault(row["model"], {})[task.id] = row
    return rows


def cost(row: dict, prices: dict[str, tuple[float, float, float]], tier: str) -> float:
    """A call's cost: per token, and per hour of the machine while it ran
    (a local tier's `usd_per_hour`, with the call alone on the machine)."""
    usage = row.get("usage") or {}
    price_in, price_out, hourly = prices.get(tier, (0.0, 0.0, 0.0))
    tokens = (usage.get("prompt_tokens", 0) * price_in + usage.get("completion_tokens", 0) * price_out) / 1e6
    return tokens + hourly * (row.get("total_ms") or 0) / 3.6e6


def parse_price(item: str) -> tuple[str, tuple[float, float, float]]:
    """`TIER=IN/OUT` (USD per million input/output tokens) or `TIER=RATE/h`
    (USD per hour)."""
    tier, value = item.split("=", 1)
    if value.endswith("/h"):
        return tier, (0.0, 0.0, float(value[:-2]))
    price_in, price_out = value.split("/", 1)
    return tier, (float(price_in), float(price_out), 0.0)


def percentile(values: list[float], q: float) -> float | None:
    values = sorted(v for v in values if v is not None)
    return rm.quantile(values, q) if values else None


# The chat profile's latency budget (policies/src/profiles.rs): first
# token within 1 s, then at least 20 tokens/s.
BUDGET_TTFT_MS, BUDGET_TOKENS_PER_S = 1000.0, 20.0


def decode_rate(row: dict) -> float | None:
    tokens = (row.get("usage") or {}).get("completion_tokens") or 0
    if row.get("ttft_ms") is None or row.get("total_ms") is None or tokens < 2:
        return None
    seconds = (row["total_ms"] - row["ttft_ms"]) / 1000
    return (tokens - 1) / seconds if seconds > 0 else None


def within_budget(ttft_ms: float | None, row: dict) -> bool:
    rate = decode_rate(row)
    return ttft_ms is not None and ttft_ms <= BUDGET_TTFT_MS and (rate is None or rate >= BUDGET_TOKENS_PER_S)


def summarise(name: str, chosen: list[dict], large_share: float, prices, tier_of, costs=None, ttfts=None) -> dict:
    """A policy's figures from the rows it would have served. `costs` and
    `ttfts` replace each row's own when the policy called more than one
    tier for a task (a cascade pays both, and its caller waits for both)."""
    n = len(chosen)
    costs = costs if costs is not None else [cost(r, prices, tier_of(r)) for r in chosen]
    ttfts = ttfts if ttfts is not None else [r.get("ttft_ms") for r in chosen]
    return {
        "policy": name,
        "accuracy": sum(r["correct"] for r in chosen) / n,
        "large_share": large_share,
        "cost_usd": sum(costs),
        "ttft_p50_ms": percentile(ttfts, 0.5),
        "ttft_p90_ms": percentile(ttfts, 0.9),
        "within_budget": sum(within_budget(t, r) for t, r in zip(ttfts, chosen)) / n,
    }


def replayed_policy(route: str, decisions: dict[str, dict], rows, ids, large: str, prices) -> dict:
    """A route `switchyard replay` decided, composed from the tiers'
    recorded answers: the tiers it called, what they cost together, and the
    first token its caller waited for: each checked answer is collected
    whole before the next backend is tried or anything is sent, so the
    caller waits for every checked answer, then for the served one's first
    token unless it was checked too)."""
    chosen, costs, ttfts, large_calls = [], [], [], 0
    missing = {t for i in ids for t in decisions[i]["tried"] if t not in rows}
    if missing:
        # The run did not ask those tiers (--tiers): nothing to compose from.
        return {"policy": f"route {route}", "skipped": f"it calls {', '.join(sorted(missing))}, which this run did not ask"}
    for i in ids:
        d = decisions[i]
        tried = d["tried"]
        served = rows[d["served"]][i]
        large_calls += large in tried
        chosen.append(served)
        costs.append(sum(cost(rows[t][i], prices, t) for t in tried))
        waited = sum(rows[t][i].get("total_ms") or 0 for t in tried[:-1])
        served_checked = d["checked"] and tried[-1] != d["targets"][-1]
        ttfts.append(waited + ((served.get("total_ms") if served_checked else served.get("ttft_ms")) or 0))
    policy = summarise(f"route {route}", chosen, large_calls / len(ids), prices, None, costs, ttfts)
    policy["strategy"] = decisions[ids[0]].get("strategy")
    return policy


# The two trivial rankers (issue #45): the prompt's length in characters,
# and the complexity score of a target-share route that names no predictor
# (untrained; the router's own `score`).
LENGTH_BASELINE = "baseline: prompt length"
COMPLEXITY_BASELINE = "baseline: complexity score"

# Checks a cascade escalates on whatever its logprob threshold.
FORCED_CHECKS = ("length", "empty", "refusal", "invalid_tool_json")


def swept_scores(decisions: dict[str, dict[str, dict]], rows, ids, small: str) -> dict[str, list[float]]:
    """The score each replayed policy ranks tasks by, for RouteLLM's sweep:
    the prompt's length and a target share's complexity score (the
    baselines), learned routes by their predicted
    failure, the cascade by its small answer's mean logprob (lower escalates
    sooner; a failed length/empty/refusal check escalates at any threshold).
    A target share ranking by a predictor is a point: the learned route of
    the same predictor sweeps its scores."""
    # The trivial ranker every router must beat: longer prompts are harder.
    scores = {LENGTH_BASELINE: [float(len(rows[small][i]["task"]["prompt"])) for i in ids]}
    for route, by_id in decisions.items():
        first = by_id[ids[0]]
        if first["strategy"] == "learned":
            scores[f"{route} (predicted failure)"] = [by_id[i]["predicted_fail"] for i in ids]
        elif first["strategy"] == "target_share" and first["predicted_fail"] is None:
            scores[COMPLEXITY_BASELINE] = [by_id[i]["score"] for i in ids]
        elif first["strategy"] == "cascade":
            values = []
            for i in ids:
                mean = rows[small][i].get("mean_logprob")
                if by_id[i]["failed_check"] in FORCED_CHECKS:
                    values.append(1e9)
                else:
                    values.append(-1e9 if mean is None else -mean)
            scores[f"{route} (small's mean logprob)"] = values
    return scores


def report(rows, small: str, mid: str | None, large: str, routes: list[str], prices, replayed=None) -> dict:
    tiers = [t for t in (small, mid, large) if t and (t in rows or t != mid)]
    ids = sorted(set.intersection(*(set(rows[t]) for t in tiers)))
    replayed = replayed or {}
    for decisions in replayed.values():
        # Only tasks every replayed route decided.
        ids = [i for i in ids if i in decisions]
    if not ids:
        raise SystemExit("no task was answered by every tier (and replayed by every route)")
    weak = [rows[small][i]["correct"] for i in ids]
    strong = [rows[large][i]["correct"] for i in ids]
    acc_weak, acc_strong = sum(weak) / len(ids), sum(strong) / len(ids)

    def tier_row(tier):
        return lambda r: tier

    policies = []
    for tier in tiers:
        share = 1.0 if tier == large else 0.0
        policies.append(summarise(f"all {tier}", [rows[tier][i] for i in ids], share, prices, tier_row(tier)))
    # The oracle: the cheapest tier that solves the task, small when none does.
    oracle_rows, oracle_large = [], 0
    for i in ids:
        tier = next((t for t in tiers if rows[t][i]["correct"]), small)
        oracle_large += tier == large
        oracle_rows.append(dict(rows[tier][i], tier=tier))
    policies.append(summarise("oracle", oracle_rows, oracle_large / len(ids), prices, lambda r: r["tier"]))
    # Routes the gateway routed live.
    for route in routes:
        served = [rows.get(route, {}).get(i) for i in ids]
        served = [r for r in served if r is not None]
        if not served:
            continue
        backend = lambda r: (r.get("receipts") or {}).get("backend") or ""  # noqa: E731
        share = sum(backend(r) == large for r in served) / len(served)
        policies.append(summarise(f"route {route}", served, share, prices, backend))
    skipped = []
    for route, decisions in replayed.items():
        policy = replayed_policy(route, decisions, rows, ids, large, prices)
        (skipped if "skipped" in policy else policies).append(policy)
    for p in policies:
        gap = acc_strong - acc_weak
        p["pgr"] = (p["accuracy"] - acc_weak) / gap if gap else None

    # Random routing between small and large, swept as RouteLLM sweeps it.
    curves = []
    for seed in range(RANDOM_SEEDS):
        curves.append(rm.sweep(rm.random_scores(len(ids), seed), weak, strong))
    gap = acc_strong != acc_weak
    random_summary = {
        "apgr": statistics.mean(rm.apgr(c, acc_weak, acc_strong) for c in curves) if gap else None,
        "cpt50": _mean_or_none([rm.cpt(c, 0.5, acc_weak, acc_strong) for c in curves]) if gap else None,
        "cpt80": _mean_or_none([rm.cpt(c, 0.8, acc_weak, acc_strong) for c in curves]) if gap else None,
    }
    oracle_curve = [(x / 10, rm.oracle_accuracy(x / 10, weak, strong)) for x in range(11)]
    sweeps = []
    curves_out = {"random (seed 0)": curves[0], "best possible": oracle_curve}
    for name, scores in swept_scores(replayed, rows, ids, small).items():
        curve = rm.sweep(scores, weak, strong)
        curves_out[name] = curve
        sweeps.append({
            "policy": name,
            "apgr": rm.apgr(curve, acc_weak, acc_strong) if gap else None,
            "cpt50": rm.cpt(curve, 0.5, acc_weak, acc_strong) if gap else None,
            "cpt80": rm.cpt(curve, 0.8, acc_weak, acc_strong) if gap else None,
            "curve": curve,
        })
    return {
        "skipped": skipped,
        "sweeps": sweeps,
        "against_cascade": against_cascade(policies, sweeps, acc_weak, acc_strong),
        "tasks": len(ids),
        "accuracy": {"small": acc_weak, "large": acc_strong},
        "policies": policies,
        "random": random_summary,
        "oracle_apgr": rm.apgr(oracle_curve, acc_weak, acc_strong) if gap else None,
        "oracle_cpt50": rm.cpt(oracle_curve, 0.5, acc_weak, acc_strong) if gap else None,
        "oracle_cpt80": rm.cpt(oracle_curve, 0.8, acc_weak, acc_strong) if gap else None,
        "curves": curves_out,
    }


def combine(summaries: list[dict]) -> dict:
    """One summary from the summaries of several fold seeds (each over every
    task, scored by weights that never saw its family): each policy's and
    each sweep's figures the mean over the folds, the folds' own sweep
    figures kept beside them. Tiers, the oracle and random are the same in
    every fold; curves are the first fold's."""
    if len(summaries) == 1:
        return summaries[0]
    first = dict(summaries[0])

    def mean_of(items: list[dict], keys) -> dict:
        out = dict(items[0])
        for key in keys:
            out[key] = _mean_or_none([item.get(key) for item in items])
        return out

    numbers = ("accuracy", "large_share", "cost_usd", "ttft_p50_ms", "ttft_p90_ms", "within_budget", "pgr")
    first["policies"] = [
        mean_of([next(p for p in s["policies"] if p["policy"] == policy["policy"]) for s in summaries], numbers)
        for policy in summaries[0]["policies"]
    ]
    sweeps = []
    for sweep in summaries[0]["sweeps"]:
        folds = [next(w for w in s["sweeps"] if w["policy"] == sweep["policy"]) for s in summaries]
        combined = mean_of(folds, ("apgr", "cpt50", "cpt80"))
        combined["folds"] = [{k: f[k] for k in ("apgr", "cpt50", "cpt80")} for f in folds]
        sweeps.append(combined)
    first["sweeps"] = sweeps
    first["against_cascade"] = [
        mean_of([s["against_cascade"][i] for s in summaries], ("sweep_large_share",))
        for i in range(len(summaries[0]["against_cascade"]))
    ]
    first["folds"] = len(summaries)
    return first


def against_cascade(policies, sweeps, acc_weak: float, acc_strong: float) -> list[dict]:
    """For each cascade route and each predictor's sweep: the large-tier
    share the sweep needs to be as accurate as the cascade (first
    crossing), against the share the cascade used."""
    out = []
    if acc_strong == acc_weak:
        return out
    for cascade in (p for p in policies if p.get("strategy") == "cascade"):
        fraction = (cascade["accuracy"] - acc_weak) / (acc_strong - acc_weak)
        for sweep in (s for s in sweeps if "predicted failure" in s["policy"]):
            out.append({
                "cascade": cascade["policy"],
                "sweep": sweep["policy"],
                "accuracy": cascade["accuracy"],
                "cascade_large_share": cascade["large_share"],
                "sweep_large_share": rm.cpt(sweep["curve"], fraction, acc_weak, acc_strong),
            })
    return out


def live_check(path: str, replayed: dict[str, dict[str, dict]], rows) -> dict:
    """How often a route asked live served from the backend its replay
    says, and answered with the text that backend's recorded answer has
    (llama.cpp at temperature 0 with one slot should repeat itself)."""
    live = list(read_jsonl([path]))
    same_backend = same_text = compared = 0
    route = None
    for row in live:
        route = row["model"]
        decided = replayed.get(route, {}).get(row["task"]["id"])
        if decided is None:
            continue
        compared += 1
        same_backend += (row.get("receipts") or {}).get("backend") == decided["served"]
        recorded = rows.get(decided["served"], {}).get(row["task"]["id"], {})
        same_text += row.get("reply") == recorded.get("reply")
    return {"route": route, "compared": compared, "same_backend": same_backend, "same_text": same_text}


def load_replay(paths: list[str]) -> dict[str, dict[str, dict]]:
    """`switchyard replay` lines by route, then task id, in file order."""
    replayed: dict[str, dict[str, dict]] = {}
    for row in read_jsonl(paths):
        replayed.setdefault(row["route"], {})[row["id"]] = row
    return replayed


def _percent(share):
    return None if share is None else share * 100


def _mean_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.mean(values) if values else None


def markdown(summary: dict) -> str:
    def fmt(value, pattern="{:.3f}"):
        return "n/a" if value is None else pattern.format(value)

    lines = [
        f"Tasks: {summary['tasks']}; small tier right on {summary['accuracy']['small']:.1%}, "
        f"large tier on {summary['accuracy']['large']:.1%}.",
        "",
        "| policy | accuracy | large-tier calls | cost (USD) | first token p50 / p90 (ms) | within chat budget | PGR |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in summary["policies"]:
        lines.append(
            f"| {p['policy']} | {p['accuracy']:.1%} | {p['large_share']:.1%} | {p['cost_usd']:.4f} | "
            f"{fmt(p['ttft_p50_ms'], '{:.0f}')} / {fmt(p['ttft_p90_ms'], '{:.0f}')} | {p['within_budget']:.0%} | "
            f"{fmt(p['pgr'], '{:.2f}')} |"
        )
    if summary.get("sweeps"):
        folds = summary.get("folds", 1)
        lines += [
            "",
            "Swept over their thresholds as RouteLLM sweeps them (10 bins)"
            + (f", the mean of {folds} fold seeds" if folds > 1 else "")
            + "; CPT in percent of tasks sent to the large tier:",
            "",
            "| policy | APGR | CPT(50%) | CPT(80%) |",
            "|---|---|---|---|",
        ]
        r = summary["random"]
        rows = [("oracle", summary["oracle_apgr"], summary.get("oracle_cpt50"), summary.get("oracle_cpt80")),
                ("random", r["apgr"], r["cpt50"], r["cpt80"])]
        rows += [(s["policy"], s["apgr"], s["cpt50"], s["cpt80"]) for s in summary["sweeps"]]
        for name, apgr, cpt50, cpt80 in rows:
            lines.append(
                f"| {name} | {fmt(apgr, '{:.2f}')} | {fmt(_percent(cpt50), '{:.0f}')} | {fmt(_percent(cpt80), '{:.0f}')} |"
            )
        if folds > 1:
            lines += ["", "Each fold seed apart (APGR / CPT(50%) / CPT(80%)):", ""]
            lines += ["| policy | " + " | ".join(f"fold {i + 1}" for i in range(folds)) + " |",
                      "|---|" + "---|" * folds]
            for s in summary["sweeps"]:
                cells = [f"{fmt(f['apgr'], '{:.2f}')} / {fmt(_percent(f['cpt50']), '{:.0f}')} / "
                         f"{fmt(_percent(f['cpt80']), '{:.0f}')}" for f in s["folds"]]
                lines.append(f"| {s['policy']} | " + " | ".join(cells) + " |")
    for c in summary.get("against_cascade", []):
        lines.append(
            f"\nAs accurate as {c['cascade']} ({c['accuracy']:.1%}, {c['cascade_large_share']:.0%} large-tier calls), "
            f"{c['sweep']} needs {fmt(c['sweep_large_share'], '{:.0%}')} large-tier calls."
        )
    for s in summary.get("skipped", []):
        lines.append(f"\n{s['policy']}: not reported, {s['skipped']}.")
    live = summary.get("live_check")
    if live:
        lines.append(
            f"\nLive check: route {live['route']} asked live on {live['compared']} tasks served from the backend "
            f"its replay names on {live['same_backend']}, with the text that backend answered alone on "
            f"{live['same_text']}."
        )
    r = summary["random"]
    lines += [
        "",
        f"Random routing between small and large (mean of {RANDOM_SEEDS} seeds): APGR {fmt(r['apgr'], '{:.2f}')}, "
        f"CPT(50%) {fmt(r['cpt50'], '{:.0%}')}, CPT(80%) {fmt(r['cpt80'], '{:.0%}')}. "
        f"The oracle curve (the ceiling): APGR {fmt(summary['oracle_apgr'], '{:.2f}')}, "
        f"CPT(50%) {fmt(summary.get('oracle_cpt50'), '{:.0%}')}, CPT(80%) {fmt(summary.get('oracle_cpt80'), '{:.0%}')}.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+")
    parser.add_argument("--small", required=True)
    parser.add_argument("--mid")
    parser.add_argument("--large", required=True)
    parser.add_argument("--routes", nargs="*", default=[])
    parser.add_argument("--price", action="append", default=[],
                        help="TIER=IN/OUT, USD per million tokens, or TIER=RATE/h, USD per hour")
    parser.add_argument("--replay", nargs="+", action="append", default=[],
                        help="switchyard replay output (JSONL) of one fold seed, its files covering every task; "
                             "repeated for each fold seed")
    parser.add_argument("--live", help="a route's answers asked live (routing_collect.py), to compare with its replay")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    prices = dict(parse_price(item) for item in args.price)
    rows = load(args.results)
    folds = [load_replay(paths) for paths in args.replay] or [{}]
    summary = combine([report(rows, args.small, args.mid, args.large, args.routes, prices, f) for f in folds])
    if args.live:
        summary["live_check"] = live_check(args.live, folds[0], rows)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(markdown(summary))
    markers = {p["policy"]: (p["large_share"], p["accuracy"]) for p in summary["policies"]}
    with open(os.path.join(args.out, "plot.svg"), "w") as f:
        f.write(rm.svg_plot(summary["curves"], markers, summary["accuracy"]["small"], summary["accuracy"]["large"]))
    print(markdown(summary))


if __name__ == "__main__":
    main()
