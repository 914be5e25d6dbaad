"""Turns the benchmark's recorded answers into the inputs of the gateway's
own tools (issues #27, #45), one set per half of the task families:

- `requests-SEED.jsonl` for `switchyard replay`: each task's chat request
  and every tier's answer as an OpenAI chat response (the reply, its finish
  reason and its mean token logprob), so a cascade's checks run on what the
  tier really answered;
- `train-SEED-fail.jsonl` and `train-SEED-gain.jsonl` for `switchyard
  train-router`: each task's request, labelled `fail` (the small tier's
  answer was wrong) or `gain` (wrong where the large tier's was right:
  RouteLLM's "the strong model wins").

    python3 scripts/routing_replay_inputs.py answers.jsonl --out DIR \\
        --small small --large large --fold-seed 1

A router is measured on families it never trained on: `--fold-seed S`
splits the families in two halves, `a` and `b` (three of the first six
families, three of the six more and six of the twelve wide ones in each,
drawn with seed S), and writes
`requests-S-a.jsonl`, `train-S-a-fail.jsonl` and `train-S-a-gain.jsonl`
for half a's tasks (of every task seed), and the same for half b. Weights
trained on one half are replayed over the other. `--fold-seed 0` splits by
task seed instead (half a the first seed's tasks, half b the second's,
every family in both): the figure for families the router has seen.
Grades are taken again from the raw replies. Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import random
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


def halves(kinds: list[str], fold_seed: int) -> dict[str, str]:
    """Each family's half (`a` or `b`) for a fold seed: the first six
    families, the six more and the twelve wide ones are each split in two
    equal parts, so both halves hold some of each (the wide group is drawn
    last, so the first two groups split as they did before it came)."""
    rng = random.Random(fold_seed)
    half = {}
    for group in (rt.CORE_KINDS, rt.more.KINDS, rt.wide.KINDS):
        present = sorted(k for k in group if k in kinds)
        rng.shuffle(present)
        for i, kind in enumerate(present):
            half[kind] = "a" if i < len(present) // 2 else "b"
    return half


def write(rows: dict, small: str, large: str, out: str, fold_seed: int) -> dict[str, list[str]]:
    """Writes the files per half; returns the families of each half."""
    tiers = list(rows)
    # In the order the tasks were asked (the generator's shuffled order):
    # target-share windows and online learning see them in that order.
    ids = [i for i in rows[small] if all(i in rows[t] for t in tiers)]
    kinds = {i: rows[small][i]["task"]["kind"] for i in ids}
    half_of = halves(sorted(set(kinds.values())), fold_seed)
    seeds = sorted({seed_of(i) for i in ids}, key=int)
    by_half: dict[str, list[str]] = {}
    for i in ids:
        half = half_of[kinds[i]] if fold_seed else "a" if seed_of(i) == seeds[0] else "b"
        by_half.setdefault(half, []).append(i)
    os.makedirs(out, exist_ok=True)
    for half, half_ids in by_half.items():
        name = f"{fold_seed}-{half}"
        with open(os.path.join(out, f"requests-{name}.jsonl"), "w") as requests, \
                open(os.path.join(out, f"train-{name}-fail.jsonl"), "w") as fail, \
                open(os.path.join(out, f"train-{name}-gain.jsonl"), "w") as gain:
            for i in half_ids:
                task = rt.Task.from_json(rows[small][i]["task"])
                body = rc.request_body(task, small)
                answers = {t: chat_response(rows[t][i]) for t in tiers}
                requests.write(json.dumps({"id": i, "request": body, "answers": answers}) + "\n")
                wrong = not rows[small][i]["correct"]
                fail.write(json.dumps({"request": body, "failed": wrong}) + "\n")
                gain.write(json.dumps({"request": body, "failed": wrong and rows[large][i]["correct"]}) + "\n")
    if not fold_seed:
        return {h: [f"seed {seed}"] for h, seed in zip("ab", seeds)}
    return {h: sorted(k for k, v in half_of.items() if v == h) for h in sorted(by_half)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("answers", nargs="+")
    parser.add_argument("--small", required=True)
    parser.add_argument("--large", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--fold-seed", type=int, default=1, help="the seed that splits the families in halves")
    args = parser.parse_args()
    families = write(rq.load(args.answers), args.small, args.large, args.out, args.fold_seed)
    print("; ".join(f"fold {args.fold_seed}, half {h}: {', '.join(k)}" for h, k in families.items()))


if __name__ == "__main__":
    main()
