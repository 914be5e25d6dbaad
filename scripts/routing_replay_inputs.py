"""Turns the benchmark's recorded answers into the inputs of the gateway's
own tools (issue #27), one set per seed:

- `requests-SEED.jsonl` for `switchyard replay`: each task's chat request
  and every tier's answer as an OpenAI chat response (the reply, its finish
  reason and its mean token logprob), so a cascade's checks run on what the
  tier really answered;
- `train-SEED-fail.jsonl` and `train-SEED-gain.jsonl` for `switchyard
  train-router`: each task's request, labelled `fail` (the small tier's
  answer was wrong) or `gain` (wrong where the large tier's was right:
  RouteLLM's "the strong model wins").

    python3 scripts/routing_replay_inputs.py answers.jsonl --out DIR \\
        --small small --large large

Grades are taken again from the raw replies. Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import routing_collect as rc  # noqa: E402
import routing_quality_report as rq  # noqa: E402
import routing_tasks as rt  # noqa: E402


def chat_response(row: dict) -> dict:
    """A recorded answer as the chat response a cascade would have checked.
    The recorded mean logprob stands as one token's: the mean is the same."""
    logprobs = None
    if row.get("mean_logprob") is not None:
        logprobs = {"content": [{"token": "", "logprob": row["mean_logprob"], "bytes": None, "top_logprobs": []}]}
    return {
        "id": f"recorded-{row['model']}",
        "object": "chat.completion",
        "created": 0,
        "model": row["model"],
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": row.get("reply", "")},
            "finish_reason": row.get("finish_reason"),
            "logprobs": logprobs,
        }],
    }


def seed_of(task_id: str) -> str:
    """Task ids start `s<seed>-`."""
    return task_id.split("-", 1)[0][1:]


def write(rows: dict, small: str, large: str, out: str) -> dict[str, int]:
    """Writes the files per seed; returns the tasks per seed."""
    tiers = list(rows)
    # In the order the tasks were asked (the generator's shuffled order):
    # target-share windows and online learning see them in that order.
    ids = [i for i in rows[small] if all(i in rows[t] for t in tiers)]
    by_seed: dict[str, list[str]] = {}
    for i in ids:
        by_seed.setdefault(seed_of(i), []).append(i)
    os.makedirs(out, exist_ok=True)
    for seed, seed_ids in by_seed.items():
        with open(os.path.join(out, f"requests-{seed}.jsonl"), "w") as requests, \
                open(os.path.join(out, f"train-{seed}-fail.jsonl"), "w") as fail, \
                open(os.path.join(out, f"train-{seed}-gain.jsonl"), "w") as gain:
            for i in seed_ids:
                task = rt.Task.from_json(rows[small][i]["task"])
                body = rc.request_body(task, small)
                answers = {t: chat_response(rows[t][i]) for t in tiers}
                requests.write(json.dumps({"id": i, "request": body, "answers": answers}) + "\n")
                wrong = not rows[small][i]["correct"]
                fail.write(json.dumps({"request": body, "failed": wrong}) + "\n")
                gain.write(json.dumps({"request": body, "failed": wrong and rows[large][i]["correct"]}) + "\n")
    return {seed: len(seed_ids) for seed, seed_ids in by_seed.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("answers", nargs="+")
    parser.add_argument("--small", required=True)
    parser.add_argument("--large", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    counts = write(rq.load(args.answers), args.small, args.large, args.out)
    print(", ".join(f"seed {s}: {n} tasks" for s, n in sorted(counts.items())))


if __name__ == "__main__":
    main()
