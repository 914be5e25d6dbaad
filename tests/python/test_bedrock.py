"""The bedrock backend against a loopback Bedrock stand-in (standins.Bedrock)
that checks every request's SigV4 signature with botocore's signer and
writes ConverseStream's event-stream frames; the stand-in is first checked
with botocore's own bedrock-runtime client, which signs what it sends and
parses what it reads."""

import json
import os
import shutil
import sqlite3
import tempfile
import time

import anthropic
import botocore.session
import openai
import pytest
from botocore.exceptions import ClientError
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

import standins
from conftest import environment, serve, start_gateway

os.environ["SWITCHYARD_TEST_AWS_ID"], os.environ["SWITCHYARD_TEST_AWS_SECRET"] = standins.AWS_KEYS
MODEL = standins.BEDROCK_MODEL
WEATHER = {"type": "function", "function": {"name": "weather", "description": "The weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
PIXEL = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


@pytest.fixture(scope="module")
def bedrock():
    stand_in = standins.Bedrock()
    yield stand_in
    stand_in.stop()


def backend(bedrock, keys=True):
    keys = ", access_key_id: env:SWITCHYARD_TEST_AWS_ID, secret_access_key: env:SWITCHYARD_TEST_AWS_SECRET" \
        if keys else ""
    return f"""
backends:
  bedrock:
    tier: cloud
    model: "{MODEL}"
    bedrock: {{region: {standins.AWS_REGION}, endpoint: "{bedrock.url}", prompt_caching: true{keys}}}
routes:
  claude:
    retries: 0
    strategy: {{split: {{weights: {{bedrock: 1}}}}}}
"""


@pytest.fixture(scope="module")
def gateway(bedrock):
    yield from serve(backend(bedrock))


def client(gateway):
    return openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0, timeout=30)


def claude(gateway):
    return anthropic.Anthropic(base_url=gateway.url, api_key="unused", max_retries=0, timeout=30)


def ask(text):
    return [{"role": "user", "content": text}]


def test_botocores_own_client_is_served_by_the_stand_in(bedrock):
    runtime = botocore.session.get_session().create_client(
        "bedrock-runtime", region_name=standins.AWS_REGION, endpoint_url=bedrock.url,
        aws_access_key_id=standins.AWS_KEYS[0], aws_secret_access_key=standins.AWS_KEYS[1])
    answer = runtime.converse(modelId=MODEL, messages=[{"role": "user", "content": [{"text": "hi"}]}])
    assert answer["output"]["message"]["content"][0]["text"] == "Bedrock answers: hi"
    assert "%3A" in bedrock.last().raw_path, "the model id's colon is escaped as botocore escapes it"
    stream = runtime.converse_stream(modelId=MODEL, messages=[{"role": "user", "content": [{"text": "yo"}]}])
    events = list(stream["stream"])
    text = "".join(e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e)
    assert text.strip() == "Bedrock answers: yo"
    assert events[-1]["metadata"]["usage"]["outputTokens"] == 8
    with pytest.raises(ClientError) as caught:
        runtime.converse(modelId=MODEL, messages=[{"role": "user", "content": [{"text": "please reject me"}]}])
    assert caught.value.response["Error"]["Code"] == "ValidationException"
    wrong = botocore.session.get_session().create_client(
        "bedrock-runtime", region_name=standins.AWS_REGION, endpoint_url=bedrock.url,
        aws_access_key_id=standins.AWS_KEYS[0], aws_secret_access_key="not-the-secret")
    with pytest.raises(ClientError, match="signature does not match"):
        wrong.converse(modelId=MODEL, messages=[{"role": "user", "content": [{"text": "hi"}]}])


def test_signed_calls_answer_whole_and_streamed(gateway, bedrock):
    sdk = client(gateway)
    answer = sdk.chat.completions.create(model="bedrock", messages=[
        {"role": "system", "content": "Be brief."}, *ask("hello")], max_tokens=40, temperature=0.3)
    assert answer.choices[0].message.content == "Bedrock answers: hello"
    seen = bedrock.last()
    assert seen.raw_path == "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"
    assert seen.body["system"] == [{"text": "Be brief."}]
    assert seen.body["inferenceConfig"] == {"maxTokens": 40, "temperature": 0.3}
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (20, 8)
    chunks = list(sdk.chat.completions.create(model="bedrock", messages=ask("stream"), stream=True,
                                              stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).strip() == "Bedrock answers: stream"
    assert chunks[-1].usage.completion_tokens == 8
    assert bedrock.last().raw_path.endswith("/converse-stream")


def test_tools_images_and_turns_that_must_alternate(gateway, bedrock):
    sdk = client(gateway)
    picture = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}}
    messages = [{"role": "user", "content": [{"type": "text", "text": "Weather here?"}, picture]}]
    first = sdk.chat.completions.create(model="bedrock", messages=messages, tools=[WEATHER])
    call = first.choices[0].message.tool_calls[0]
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == ("tooluse_1", "weather", {"city": "Oslo"})
    seen = bedrock.last().body
    assert seen["messages"][0]["content"][1] == {"image": {"format": "png", "source": {"bytes": PIXEL}}}
    assert seen["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]["required"] == ["city"]
    # A tool result and a user turn after it: one user turn for Converse.
    second = sdk.chat.completions.create(model="bedrock", tools=[WEATHER], messages=[
        *messages, first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": '{"temp": 12}'},
        {"role": "user", "content": "And tomorrow?"}])
    assert second.choices[0].message.content.startswith("The tool said")
    turns = bedrock.last().body["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[2]["content"][0] == {"toolResult": {"toolUseId": "tooluse_1", "content": [{"json": {"temp": 12}}]}}
    # Streamed, the call's arguments arrive in pieces and are joined.
    with claude(gateway).messages.stream(model="bedrock", max_tokens=100, messages=ask("Weather?"), tools=[{
            "name": "weather", "input_schema": WEATHER["function"]["parameters"]}]) as events:
        final = events.get_final_message()
    use = next(b for b in final.content if b.type == "tool_use")
    assert (use.name, use.input) == ("weather", {"city": "Oslo"})
    assert final.stop_reason == "tool_use"


def test_cache_points_and_cached_usage_priced(gateway, bedrock):
    system = [{"type": "text", "text": "A long, stable system prompt. " * 20, "cache_control": {"type": "ephemeral"}}]
    raw = claude(gateway).messages.with_raw_response.create(model="bedrock", max_tokens=50, system=system,
                                                             messages=ask("hi"))
    message, request_id = raw.parse(), raw.headers["x-request-id"]
    sent = bedrock.last().body["system"]
    assert sent[-1] == {"cachePoint": {"type": "default"}}
    usage = message.usage
    assert (usage.input_tokens, usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (20, 1000, 500)
    # The ledger prices each kind: a cross-region profile's id is priced as
    # the model it serves (claude-sonnet-4-5: $3 input, $0.30 cache read,
    # $3.75 cache write, $15 output per million).
    expected = (20 * 3.00 + 1000 * 0.30 + 500 * 3.75 + 8 * 15.00) / 1e6
    row = None
    for _ in range(50):
        with sqlite3.connect(os.path.join(gateway.dir, "switchyard-ledger.db")) as ledger:
            row = ledger.execute("SELECT input_tokens, cached_tokens, cache_write_tokens, output_tokens, cost_usd, "
                                 "provider FROM requests WHERE request_id = ?", (request_id,)).fetchone()
        if row:
            break
        time.sleep(0.1)
    assert row[:4] == (20, 1000, 500, 8), "uncached input, cache reads, cache writes, output"
    assert abs(row[4] - expected) < 1e-12, (row[4], expected)
    assert row[5] == "aws.bedrock"


def test_bedrock_errors_reach_each_dialect_with_their_status(gateway):
    with pytest.raises(openai.BadRequestError):
        client(gateway).chat.completions.create(model="claude", messages=ask("please reject me"))
    with pytest.raises(openai.RateLimitError) as caught:
        client(gateway).chat.completions.create(model="claude", messages=ask(standins.THROTTLED))
    assert caught.value.response.headers["retry-after"] == "3"
    with pytest.raises(anthropic.RateLimitError):
        claude(gateway).messages.create(model="claude", max_tokens=50, messages=ask(standins.THROTTLED))
    google = genai.Client(api_key="unused", http_options=genai_types.HttpOptions(
        base_url=gateway.url, api_version="v1beta", retry_options=genai_types.HttpRetryOptions(attempts=1)))
    with pytest.raises(genai_errors.ClientError) as caught:
        google.models.generate_content(model="claude", contents="please reject me")
    assert (caught.value.code, caught.value.status) == (400, "INVALID_ARGUMENT")


def test_a_throttled_or_cut_stream_ends_with_an_error_event(gateway):
    # Each ends with the dialect's error event (not a dropped connection),
    # saying what happened: throttled, or the frame cut short.
    for prompt, words, kind in ((standins.THROTTLED, "rate limiting requests (HTTP 429)", "rate_limit_error"),
                                (standins.BROKEN, "closed the connection", "api_error")):
        stream = client(gateway).chat.completions.create(model="claude", messages=ask(prompt), stream=True)
        with pytest.raises(openai.APIError) as caught:
            for _ in stream:
                pass
        assert type(caught.value) is openai.APIError
        assert words in caught.value.body["message"], caught.value.body
        with pytest.raises(anthropic.APIStatusError) as caught:
            with claude(gateway).messages.stream(model="claude", max_tokens=50, messages=ask(prompt)) as events:
                events.get_final_message()
        assert caught.value.body["error"]["type"] == kind


def test_keys_from_a_web_identity_token_exchanged_at_sts(bedrock):
    folder = tempfile.mkdtemp(prefix="switchyard-aws-")
    token_file = os.path.join(folder, "token")
    with open(token_file, "w") as f:
        f.write("eyJ.web-identity.token\n")
    bedrock.web_identity_token = "eyJ.web-identity.token"
    with environment(AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None, AWS_SESSION_TOKEN=None,
                     AWS_WEB_IDENTITY_TOKEN_FILE=token_file, AWS_ROLE_ARN="arn:aws:iam::123456789012:role/gateway",
                     AWS_ENDPOINT_URL_STS=bedrock.url + "/sts"):
        gateway = start_gateway(backend(bedrock, keys=False))
    try:
        answer = client(gateway).chat.completions.create(model="bedrock", messages=ask("role"))
        assert answer.choices[0].message.content == "Bedrock answers: role"
        assert bedrock.last().headers["x-amz-security-token"] == bedrock.role_keys[2]
        assert bedrock.assumed == 1
    finally:
        bedrock.web_identity_token = None
        gateway.stop()
        shutil.rmtree(gateway.config_folder, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
