"""The vertex backend against a loopback Vertex AI stand-in (standins.Vertex):
its token endpoint checks each service-account JWT with google-auth and
issues short-lived tokens; its model paths need a good token. The stand-in
is first checked with google-genai's and anthropic's own Vertex clients."""

import json
import os
import shutil
import tempfile
import time
import urllib.request

import anthropic
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types
from google.oauth2 import service_account

import standins
from conftest import environment, serve, start_gateway

CLAUDE = "claude-sonnet-4-5@20250929"
GEMINI = "gemini-2.5-flash"


@pytest.fixture(scope="module")
def folder():
    path = tempfile.mkdtemp(prefix="switchyard-vertex-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def vertex(folder):
    stand_in = standins.Vertex(folder)
    yield stand_in
    stand_in.stop()


def config(vertex, extra=""):
    return f"""
backends:
  gemini-vertex:
    tier: cloud
    model: {GEMINI}
    vertex: {{project: {standins.VERTEX_PROJECT}, location: {standins.VERTEX_LOCATION}, endpoint: "{vertex.url}"{extra}}}
  claude-vertex:
    tier: cloud
    model: "{CLAUDE}"
    vertex: {{project: {standins.VERTEX_PROJECT}, location: {standins.VERTEX_LOCATION}, endpoint: "{vertex.url}"{extra}}}
"""


@pytest.fixture(scope="module")
def gateway(vertex):
    yield from serve(config(vertex, f', credentials_file: "{vertex.key_file}"'))


def client(gateway):
    return openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0, timeout=30)


def ask(text):
    return [{"role": "user", "content": text}]


def ready(gateway):
    with urllib.request.urlopen(gateway.url + "/readyz", timeout=10) as response:
        return {b["name"]: b for b in json.load(response)["backends"]}


def test_the_stand_in_serves_googles_and_anthropics_own_vertex_clients(vertex):
    credentials = service_account.Credentials.from_service_account_file(
        vertex.key_file, scopes=["https://www.googleapis.com/auth/cloud-platform"])
    google = genai.Client(vertexai=True, project=standins.VERTEX_PROJECT, location=standins.VERTEX_LOCATION,
                          credentials=credentials,
                          http_options=genai_types.HttpOptions(base_url=vertex.url, api_version="v1"))
    answer = google.models.generate_content(model=GEMINI, contents="hello")
    assert answer.text == "Gemini answers: hello"
    vertex.sdk_gemini_path = vertex.last().raw_path
    token = credentials.token
    assert token in vertex.issued, "google-auth's JWT was taken by the stand-in's token endpoint"
    claude = anthropic.AnthropicVertex(region=standins.VERTEX_LOCATION, project_id=standins.VERTEX_PROJECT,
                                       access_token=token, base_url=vertex.url + "/v1", max_retries=0)
    message = claude.messages.create(model=CLAUDE, max_tokens=50, messages=ask("hi"))
    assert message.content[0].text == "Claude on Vertex answers: hi"
    vertex.sdk_claude_path = vertex.last().raw_path


def test_gemini_and_claude_models_answer_whole_and_streamed(gateway, vertex):
    sdk = client(gateway)
    before = vertex.token_requests
    answer = sdk.chat.completions.create(model="gemini-vertex", messages=ask("hello"))
    assert answer.choices[0].message.content == "Gemini answers: hello"
    seen = vertex.last()
    # The path as sent, byte for byte google-genai's.
    assert seen.raw_path == vertex.sdk_gemini_path == (
        f"/v1/projects/{standins.VERTEX_PROJECT}/locations/{standins.VERTEX_LOCATION}"
        f"/publishers/google/models/{GEMINI}:generateContent")
    text = "".join(c.choices[0].delta.content or "" for c in sdk.chat.completions.create(
        model="gemini-vertex", messages=ask("stream"), stream=True) if c.choices)
    assert text == "Gemini answers: stream"
    answer = sdk.chat.completions.create(model="claude-vertex", messages=ask("hello"), max_tokens=50)
    assert answer.choices[0].message.content == "Claude on Vertex answers: hello"
    seen = vertex.last()
    # The path as sent, byte for byte AnthropicVertex's.
    assert seen.raw_path == vertex.sdk_claude_path
    assert seen.raw_path.endswith(f"/publishers/anthropic/models/{CLAUDE}:rawPredict")
    assert seen.body["anthropic_version"] == "vertex-2023-10-16" and "model" not in seen.body
    with anthropic.Anthropic(base_url=gateway.url, api_key="unused", max_retries=0).messages.stream(
            model="claude-vertex", max_tokens=50, messages=ask("stream")) as events:
        message = events.get_final_message()
    assert message.content[0].text.strip() == "Claude on Vertex answers: stream"
    assert vertex.last().path.endswith(":streamRawPredict")
    # Each backend fetched one token, and reused it.
    assert vertex.token_requests - before <= 2
    states = {name: b["credentials"] for name, b in ready(gateway).items()}
    assert states["claude-vertex"]["state"] == "fresh"
    assert states["claude-vertex"]["source"] == "service_account"


def test_vertex_throttling_reaches_each_dialect_as_a_429(gateway):
    with pytest.raises(openai.RateLimitError):
        client(gateway).chat.completions.create(model="claude-vertex", messages=ask(standins.THROTTLED))
    with pytest.raises(anthropic.RateLimitError) as caught:
        anthropic.Anthropic(base_url=gateway.url, api_key="unused", max_retries=0).messages.create(
            model="claude-vertex", max_tokens=50, messages=ask(standins.THROTTLED))
    assert caught.value.body["error"]["type"] == "rate_limit_error"
    google = genai.Client(api_key="unused", http_options=genai_types.HttpOptions(
        base_url=gateway.url, api_version="v1beta", retry_options=genai_types.HttpRetryOptions(attempts=1)))
    with pytest.raises(genai_errors.ClientError) as caught:
        google.models.generate_content(model="gemini-vertex", contents=standins.THROTTLED)
    assert (caught.value.code, caught.value.status) == (429, "RESOURCE_EXHAUSTED")


def test_tokens_refresh_early_and_a_failing_token_endpoint_keeps_the_old_one_until_it_expires(folder):
    os.makedirs(folder + "/short", exist_ok=True)
    vertex = standins.Vertex(folder + "/short", expires_in=4)
    bearer = lambda: next(s for s in reversed(vertex.seen) if s.path.startswith("/v1/")).headers["authorization"]
    gateway = start_gateway(config(vertex, f', credentials_file: "{vertex.key_file}"'))
    try:
        sdk = client(gateway)
        sdk.chat.completions.create(model="gemini-vertex", messages=ask("one"))
        assert vertex.token_requests == 1
        first = bearer()
        # Past half its life: the request is served with the old token
        # while a new one is fetched behind it.
        time.sleep(2.5)
        sdk.chat.completions.create(model="gemini-vertex", messages=ask("two"))
        assert bearer() == first
        for _ in range(50):
            if vertex.token_requests == 2:
                break
            time.sleep(0.05)
        assert vertex.token_requests == 2
        # The new token is held once the stand-in's answer is read: the
        # next request (soon) carries it.
        for _ in range(50):
            sdk.chat.completions.create(model="gemini-vertex", messages=ask("three"))
            if bearer() != first:
                break
            time.sleep(0.05)
        second = bearer()
        assert second != first
        assert vertex.token_requests == 2, "one refresh, not one per request"
        # The token endpoint fails: the token held serves until it expires.
        vertex.failing = True
        time.sleep(2.5)
        sdk.chat.completions.create(model="gemini-vertex", messages=ask("four"))
        assert bearer() == second
        time.sleep(0.3)
        credentials = ready(gateway)["gemini-vertex"]["credentials"]
        assert credentials["state"] == "stale", credentials
        assert "HTTP 400" in credentials["last_error"]
        time.sleep(2)
        with pytest.raises(openai.APIStatusError) as caught:
            sdk.chat.completions.create(model="gemini-vertex", messages=ask("five"))
        assert caught.value.status_code == 502
        assert "no valid credentials" in caught.value.body["message"]
        assert ready(gateway)["gemini-vertex"]["credentials"]["state"] == "expired"
    finally:
        gateway.stop()
        shutil.rmtree(gateway.config_folder, ignore_errors=True)
        vertex.stop()


def test_tokens_come_from_the_metadata_server_without_a_key_file(folder, vertex):
    with environment(GOOGLE_APPLICATION_CREDENTIALS=None, GCE_METADATA_HOST=vertex.url.removeprefix("http://")):
        gateway = start_gateway(config(vertex))
    try:
        answer = client(gateway).chat.completions.create(model="claude-vertex", messages=ask("metadata"),
                                                         max_tokens=50)
        assert answer.choices[0].message.content == "Claude on Vertex answers: metadata"
        assert ready(gateway)["claude-vertex"]["credentials"]["source"] == "metadata"
    finally:
        gateway.stop()
        shutil.rmtree(gateway.config_folder, ignore_errors=True)
