"""Training traffic for a profile-guided build (scripts/build-pgo.sh).

A broad mix, not the benchmark's one request: OpenAI chat and Anthropic
messages, whole and streamed answers, long prompts with tool definitions,
the Responses API, malformed bodies, unknown models and missing keys; from
eight connections at once, then from one, as at low load.

usage: pgo-train.py PORT KEY REQUESTS
"""

import http.client
import json
import random
import sys
import threading
import time

PORT, KEY, REQUESTS = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
random.seed(7)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": f"tool_{i}",
            "description": "Looks something up. " * 5,
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    }
    for i in range(8)
]
PROMPTS = [
    "Write a function that merges two sorted lists in Python.",
    "Tell me about rivers and the sea.",
    "Summarize the plot of a short story about a lighthouse keeper.",
]


def chat(stream, long=False):
    messages = [
        {"role": "system", "content": "You are a helpful assistant." * (20 if long else 1)},
        {"role": "user", "content": random.choice(PROMPTS)},
    ]
    if long:
        messages += [
            {"role": "assistant", "content": "Sure. " * 50},
            {"role": "user", "content": "More detail, please. " * 10},
        ]
    body = {
        "model": random.choice(["auto", "auto", "sim"]),
        "stream": stream,
        "max_tokens": random.choice([8, 16, 64]),
        "messages": messages,
    }
    if stream and random.random() < 0.5:
        body["stream_options"] = {"include_usage": True}
    if long:
        body["tools"] = TOOLS
    return "/v1/chat/completions", json.dumps(body).encode()


def anthropic(stream):
    body = {
        "model": "auto",
        "max_tokens": 32,
        "stream": stream,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": random.choice(PROMPTS)}]}],
    }
    return "/v1/messages", json.dumps(body).encode()


def one_request():
    r = random.random()
    if r < 0.35:
        return chat(False)
    if r < 0.55:
        return chat(True)
    if r < 0.65:
        return chat(random.random() < 0.5, long=True)
    if r < 0.75:
        return anthropic(False)
    if r < 0.85:
        return anthropic(True)
    if r < 0.90:
        body = {"model": "auto", "input": random.choice(PROMPTS), "max_output_tokens": 16}
        return "/v1/responses", json.dumps(body).encode()
    if r < 0.95:
        return "/v1/chat/completions", b'{"model": "auto", "messages": ['
    return "/v1/chat/completions", b'{"model": "no-such-model", "messages": []}'


def client(count):
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    for _ in range(count):
        path, body = one_request()
        headers = {"content-type": "application/json"}
        if random.random() < 0.97:
            if path == "/v1/messages":
                headers["x-api-key"] = KEY
            else:
                headers["authorization"] = f"Bearer {KEY}"
        try:
            conn.request("POST", path, body, headers)
            conn.getresponse().read()
        except (OSError, http.client.HTTPException):
            # The server closed the connection (as after some errors): reconnect.
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)


def wait_until_up():
    for _ in range(120):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=5)
            conn.request("GET", "/health")
            conn.getresponse().read()
            return
        except OSError:
            time.sleep(0.5)
    sys.exit(f"nothing answers on port {PORT}")


wait_until_up()
threads = [threading.Thread(target=client, args=(REQUESTS // 10,)) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
client(REQUESTS // 5)
