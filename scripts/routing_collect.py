"""Sends routing-quality tasks to one model name of a running gateway and
records each answer (issue #27).

    python3 scripts/routing_collect.py --gateway http://127.0.0.1:8080 \\
        --model small --seed 1 --count 120 --out results.jsonl [--key sk-...]

Each task goes as a streamed chat completion (temperature 0, with
logprobs, so a cascade's `low_logprob` check can see them). One JSON line
per task records the task, the raw reply (so a changed grader re-grades
without a model run), whether it is right, the first-token and total
times measured here, the usage, and the gateway's decision receipts
(`x-switchyard-*` headers: route, backend, reason, predicted first token).
Lines are appended, so a run can be resumed: tasks already in the file for
the same model are skipped. Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import routing_tasks as rt  # noqa: E402

# Output tokens a right answer needs, by kind, with room to spare.
MAX_TOKENS = {"arithmetic": 24, "word": 256, "units": 24, "extract": 64, "python": 384, "question": 48,
              **rt.more.MAX_TOKENS, **rt.wide.MAX_TOKENS}

RECEIPTS = ("route", "backend", "reason", "predicted-ttft-ms", "cache")


def request_body(task: rt.Task, model: str) -> dict:
    """The chat request a task is asked as (`replay` and `train-router`
    see the same request)."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": task.prompt}],
        "temperature": 0,
        "max_tokens": MAX_TOKENS[task.kind],
        "stream": True,
        "stream_options": {"include_usage": True},
        "logprobs": True,
    }


def ask(gateway: str, model: str, task: rt.Task, key: str | None, timeout_s: float) -> dict:
    """One streamed request; the reply, the times and the receipts."""
    body = request_body(task, model)
    headers = {"content-type": "application/json", "x-request-id": f"rq-{model}-{task.id}"}
    if key:
        headers["authorization"] = f"Bearer {key}"
    request = urllib.request.Request(
        gateway.rstrip("/") + "/v1/chat/completions", data=json.dumps(body).encode(), headers=headers
    )
    started = time.monotonic()
    first = None
    parts: list[str] = []
    usage = None
    finish = None
    logprobs: list[float] = []
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            receipts = {name: response.headers.get(f"x-switchyard-{name}") for name in RECEIPTS}
            for raw in response:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[5:])
                usage = chunk.get("usage") or usage
                for choice in chunk.get("choices") or []:
                    text = (choice.get("delta") or {}).get("content") or ""
                    if text and first is None:
                        first = time.monotonic()
                    parts.append(text)
                    for token in (choice.get("logprobs") or {}).get("content") or []:
                        if isinstance(token.get("logprob"), (int, float)):
                            logprobs.append(token["logprob"])
                    finish = choice.get("finish_reason") or finish
        status = 200
    except urllib.error.HTTPError as err:
        status, receipts = err.code, {name: err.headers.get(f"x-switchyard-{name}") for name in RECEIPTS}
        parts = [err.read().decode("utf-8", "replace")]
    done = time.monotonic()
    reply = "".join(parts)
    return {
        "status": status,
        "reply": reply,
        "finish_reason": finish,
        # What a cascade's `low_logprob` check compares (None: none sent).
        "mean_logprob": sum(logprobs) / len(logprobs) if logprobs else None,
        "ttft_ms": None if first is None else round((first - started) * 1000, 1),
        "total_ms": round((done - started) * 1000, 1),
        "usage": usage,
        "receipts": receipts,
    }


def collect(gateway: str, model: str, tasks: list[rt.Task], out: str, key: str | None = None,
            timeout_s: float = 300.0) -> int:
    """Asks every task not yet in `out` for `model`; returns how many it asked."""
    seen = set()
    if os.path.exists(out):
        with open(out) as f:
            for line in f:
                row = json.loads(line)
                seen.add((row["model"], row["task"]["id"]))
    asked = 0
    with open(out, "a") as f:
        for task in tasks:
            if (model, task.id) in seen:
                continue
            answer = ask(gateway, model, task, key, timeout_s)
            row = {
                "model": model,
                "task": task.to_json(),
                **answer,
                "correct": answer["status"] == 200 and rt.grade(task, answer["reply"]),
            }
            f.write(json.dumps(row) + "\n")
            f.flush()
            asked += 1
    return asked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gateway", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--key")
    parser.add_argument("--limit", type=int, help="ask only the first N of the tasks")
    parser.add_argument("--mix", choices=sorted(rt.MIXES), default="core",
                        help="the task families: the first six (core), the six more, or the twelve wide")
    args = parser.parse_args()
    tasks = rt.generate(args.seed, args.count, rt.MIXES[args.mix])[: args.limit]
    asked = collect(args.gateway, args.model, tasks, args.out, args.key)
    print(f"{asked} tasks asked of {args.model}; results in {args.out}")


if __name__ == "__main__":
    main()
