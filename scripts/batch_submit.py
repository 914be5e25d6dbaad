"""Submits the benchmark's batch through the openai SDK, or waits for it.

  batch_submit.py BASE_URL LINES INPUT.jsonl   -> prints the batch id
  batch_submit.py BASE_URL --wait BATCH_ID     -> prints the ended batch as JSON
"""
import json
import sys
import time

import openai

TOPICS = ["rivers", "glaciers", "volcanoes", "deserts", "forests", "tides", "storms", "caves"]


def main():
    base, what = sys.argv[1], sys.argv[2]
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused")
    if what == "--wait":
        while True:
            batch = client.batches.retrieve(sys.argv[3])
            if batch.status in ("completed", "failed", "cancelled", "expired"):
                print(batch.model_dump_json())
                return
            time.sleep(1)
    lines, path = int(what), sys.argv[3]
    with open(path, "w") as f:
        for i in range(lines):
            topic = TOPICS[i % len(TOPICS)]
            body = {"model": "interactive", "max_tokens": 64, "temperature": 0,
                    "messages": [{"role": "user", "content": f"Item {i}: write three sentences about {topic}."}]}
            f.write(json.dumps({"custom_id": f"item-{i}", "method": "POST",
                                "url": "/v1/chat/completions", "body": body}) + "\n")
    with open(path, "rb") as f:
        file = client.files.create(file=f, purpose="batch")
    batch = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions",
                                  completion_window="24h")
    print(batch.id)


if __name__ == "__main__":
    main()
