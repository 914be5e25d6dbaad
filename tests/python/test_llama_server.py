"""A real model server behind the gateway: llama.cpp's llama-server running
SmolLM2-135M on the CPU. Skipped unless scripts/test.sh has installed it
(LLAMA_SERVER and SMOLLM2_GGUF name the binary and the model)."""

import json
import os
import socket
import sqlite3
import subprocess
import time
import urllib.request

import openai
import pytest

from conftest import start_gateway
from test_conformance import Conformance, chat_and_completions, responses

LLAMA_SERVER = os.environ.get("LLAMA_SERVER")
MODEL = os.environ.get("SMOLLM2_GGUF")

pytestmark = pytest.mark.skipif(not (LLAMA_SERVER and MODEL), reason="llama-server not installed (scripts/test.sh installs it)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama():
    port = free_port()
    proc = subprocess.Popen(
        # n-gram speculation (no draft model) and the Prometheus page.
        [LLAMA_SERVER, "-m", MODEL, "--host", "127.0.0.1", "--port", str(port), "-t", "1", "-c", "4096", "--no-webui",
         "--spec-type", "ngram-simple", "--metrics"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                if json.load(r).get("status") == "ok":
                    break
        except OSError:
            time.sleep(0.25)
    else:
        proc.kill()
        pytest.fail("llama-server did not become healthy in 60 s")
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def gateway_over(llama):
    return start_gateway(f"""
backends:
  smollm2:
    tier: small
    openai: {{base_url: "{llama}/v1", engine: llamacpp, slots: 1, metrics_interval_ms: 200}}
    max_concurrency: 1
    max_queue: 8
routes:
  local:
    strategy: {{split: {{weights: {{smollm2: 1}}}}}}
    speculative: {{n_max: 16, p_min: 0.5, min_acceptance: 0.3}}
""")


@pytest.fixture(scope="module")
def gateway(llama):
    gw = gateway_over(llama)
    yield gw
    gw.stop()


@pytest.fixture()
def own_gateway(llama):
    """A gateway of its own over the same server: the module's gateway's
    ledger is counted request by request at the end."""
    gw = gateway_over(llama)
    yield gw
    gw.stop()


def test_a_real_model_answers_through_the_gateway(gateway):
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0, timeout=120)
    raw = client.chat.completions.with_raw_response.create(
        model="smollm2", messages=[{"role": "user", "content": "Name a colour."}], max_tokens=16, temperature=0
    )
    assert raw.headers["x-switchyard-backend"] == "smollm2"
    assert int(raw.headers["x-switchyard-predicted-ttft-ms"]) >= 0
    reply = raw.parse()
    assert reply.choices[0].message.content.strip(), "real text came back"
    assert not reply.choices[0].message.content.startswith("[sim]")
    assert reply.usage.prompt_tokens > 5 and 0 < reply.usage.completion_tokens <= 16

    text = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(
            model="smollm2", messages=[{"role": "user", "content": "Count to five."}], max_tokens=24, stream=True
        )
        if c.choices
    )
    assert text.strip()

    # A long prompt twice: the second reuses llama.cpp's prefix cache.
    document = " ".join(f"Line {i}: the gateway routes requests between local and cloud models." for i in range(120))
    for _ in range(2):
        long = client.chat.completions.create(
            model="smollm2",
            messages=[{"role": "system", "content": document}, {"role": "user", "content": "Summarise in one line."}],
            max_tokens=8,
        )
    assert long.usage.prompt_tokens > 1500
    assert long.usage.prompt_tokens_details.cached_tokens > 1000


def test_answers_from_a_real_server_follow_openais_spec(own_gateway):
    """What llama-server sends (its chat, completions and Responses answers
    through the translation, whole and streamed, with logprobs, several
    choices and a JSON schema) reaches the caller in the spec's shapes."""
    wire = Conformance(own_gateway.url)
    try:
        chat_and_completions(wire, "smollm2", tools=False)
        responses(wire, "smollm2", tools=False)
    finally:
        wire.http.close()
    wire.assert_conformant()


def test_an_over_long_prompt_is_refused_before_it_reaches_the_server(gateway):
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0, timeout=120)
    too_long = "word " * 6000  # the server's context is 4,096 tokens
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": too_long}], max_tokens=4)
    assert refused.value.code == "context_length_exceeded", refused.value
    # The gateway read the window from llama-server's /props and refused it itself.
    assert "context window this model name reaches holds 4096" in str(refused.value), refused.value


def metrics(gateway):
    with urllib.request.urlopen(gateway.url + "/metrics", timeout=5) as r:
        return r.read().decode()


def sample(text, prefix):
    """The value of the first exposition line starting with `prefix`."""
    return next((float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix)), None)


def test_speculation_is_measured_per_prompt_class(gateway):
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0, timeout=120)
    # Prompts whose answers repeat themselves enough for n-gram drafts.
    code = (
        "Write a Python class Point with methods add, sub, mul and div, each returning a new Point. "
        "Then write unit tests for each method."
    )
    prose = "Tell me a short story about a cat on a boat."
    for prompt in (code, prose):
        raw = client.chat.completions.with_raw_response.create(
            model="local", messages=[{"role": "user", "content": prompt}], max_tokens=200, temperature=0
        )
        assert raw.headers["x-switchyard-route"] == "local"
        assert raw.parse().model_extra["timings"]["draft_n"] > 0, "llama-server drafted (n-gram speculation)"
    # The gateway's figures, and the engine's own read from its /metrics.
    deadline = time.time() + 10
    while time.time() < deadline:
        text = metrics(gateway)
        if sample(text, 'switchyard_engine_draft_acceptance_ratio{backend="smollm2"}') is not None:
            break
        time.sleep(0.2)
    assert sample(text, 'switchyard_draft_tokens_total{backend="smollm2",class="code"}') > 0, text
    assert sample(text, 'switchyard_draft_tokens_total{backend="smollm2",class="prose"}') > 0, text
    acceptance = sample(text, 'switchyard_draft_acceptance_ratio{backend="smollm2",class="code"}')
    assert 0 < acceptance <= 1, text
    assert 0 < sample(text, 'switchyard_engine_draft_acceptance_ratio{backend="smollm2"}') <= 1, text
    assert sample(text, 'switchyard_decode_tokens_per_second{backend="smollm2",class="code"}') > 0, text


def test_the_ledger_holds_what_the_model_server_reported(gateway):
    gateway.stop(keep_dir=True)  # flushes the ledger
    rows = sqlite3.connect(os.path.join(gateway.dir, "switchyard-ledger.db")).execute(
        "SELECT input_tokens, cached_tokens, output_tokens, estimated, ttft_ms, decode_tokens_per_s, status,"
        " prompt_class, draft_tokens, draft_accepted_tokens FROM requests ORDER BY id"
    ).fetchall()
    served = [row for row in rows if row[6] == "ok"]
    assert len(served) == 6, rows
    assert [r[7] for r in served[-2:]] == ["code", "prose"], "the router's prompt class"
    assert all(r[8] > 0 and 0 <= r[9] <= r[8] for r in served[-2:]), "drafted and accepted tokens, from timings"
    assert all(not row[3] for row in served), "usage as the model server reported it"
    assert [row[6] for row in rows if row[6] != "ok"] == ["context_length_exceeded"], "the refused prompt has its row, unbilled"
    assert served[3][1] > 1000, "the cache hit is in the ledger"
    # Only the streamed answer (the second) shows its first token; a whole
    # answer's first-token time is unknown, and none is made up for it.
    assert served[1][4] is not None and served[1][4] > 0, "time to first token measured"
    assert all(r[4] is None for i, r in enumerate(served) if i != 1), "no first-token time for whole answers"
    assert all(r[5] is not None and r[5] > 0 for r in served), "decode rate measured, or as llama-server reported it"

