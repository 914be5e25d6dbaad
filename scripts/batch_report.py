"""The batch benchmark's report (scripts/bench-batches.sh): interactive
first-token p50/p90 alone and while the batch drained, the share of those
requests that ran while it did, the batch's tokens per hour and one batch
call's time, and the verdict against the goal (p90 with the batch within
one batch call of p90 alone).

  batch_report.py ALONE.jsonl WITH_BATCH.jsonl BATCH.json LEDGER.db
"""
import json
import sqlite3
import statistics
import sys


def requests(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if "ttft_ms" in r]


def pct(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    alone, with_batch = requests(sys.argv[1]), requests(sys.argv[2])
    batch = json.load(open(sys.argv[3]))
    ledger = sqlite3.connect(sys.argv[4])
    start_s = batch["in_progress_at"]
    end_s = batch["completed_at"] or batch["cancelled_at"] or batch["expired_at"] or batch["failed_at"]
    ok = lambda rows: [r["ttft_ms"] for r in rows if r["status"] == 200 and r["ttft_ms"] is not None]
    ids = [r["request_id"] for r in with_batch if r.get("request_id")]
    during = 0
    for rid in ids:
        row = ledger.execute("SELECT ts_ms FROM requests WHERE request_id = ?", (rid,)).fetchone()
        if row and start_s * 1000 <= row[0] <= end_s * 1000:
            during += 1
    lines = ledger.execute("SELECT COUNT(*), SUM(output_tokens) FROM requests WHERE batch = ? AND status = 'ok'",
                           (batch["id"],)).fetchone()
    calls = [r[0] for r in ledger.execute(
        "SELECT duration_ms FROM requests WHERE batch = ? AND status = 'ok'", (batch["id"],))]
    hours = max(end_s - start_s, 1) / 3600
    call_p50 = statistics.median(calls) if calls else float("nan")
    a50, a90 = pct(ok(alone), 0.5), pct(ok(alone), 0.9)
    b50, b90 = pct(ok(with_batch), 0.5), pct(ok(with_batch), 0.9)
    print("| traffic | interactive requests | first token p50 (ms) | first token p90 (ms) |")
    print("|---|---|---|---|")
    print(f"| alone | {len(ok(alone))} | {a50:,.0f} | {a90:,.0f} |")
    print(f"| while the batch drained | {len(ok(with_batch))} ({during} within its run) | {b50:,.0f} | {b90:,.0f} |")
    print()
    print(f"Batch: {batch['request_counts']['completed']} of {batch['request_counts']['total']} lines answered "
          f"({batch['request_counts']['failed']} failed) in {end_s - start_s} s; {lines[1] or 0:,} output tokens, "
          f"{(lines[1] or 0) / hours:,.0f} tokens per hour; one batch call p50 {call_p50:,.0f} ms, "
          f"p90 {pct(calls, 0.9):,.0f} ms.")
    verdict = "within" if b90 <= a90 + call_p50 else "not within"
    print(f"Interactive p90 with the batch: {b90:,.0f} ms against {a90:,.0f} ms alone, "
          f"{b90 - a90:+,.0f} ms: {verdict} one batch call ({call_p50:,.0f} ms) of the idle figure.")


if __name__ == "__main__":
    main()
