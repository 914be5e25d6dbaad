"""The Gemini ingress, driven by the google-genai SDK (v1beta, and the v1 its
3.x release writes by default): whole answers, streams, function calling,
system instructions, countTokens and models, parsed by the SDK and checked
field by field with its strict types; and a `gemini:` backend pointed at a
second gateway's Gemini ingress, so the gateway's Gemini egress meets its
own ingress."""

import hashlib
import json
import os
import urllib.error
import urllib.request

import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from conftest import FAST, KEY, serve, start_gateway, start_sim

os.environ["SWITCHYARD_TEST_FRONT_KEY"] = KEY
DIGEST = hashlib.sha256(KEY.encode()).hexdigest()
WEATHER = types.Tool(function_declarations=[types.FunctionDeclaration(
    name="get_weather", description="The weather in a city",
    parameters=types.Schema(type=types.Type.OBJECT, properties={"city": types.Schema(type=types.Type.STRING)},
                            required=["city"]))])


@pytest.fixture(scope="module")
def inner():
    """A keyed gateway over a simulator: what the SDK and the front talk to."""
    sim = start_sim()
    config = f"""
backends:
  local:
    tier: small
    model: sim-local
    openai: {{base_url: "{sim.url}/v1"}}
routes:
  auto:
    retries: 0
    strategy: {{split: {{weights: {{local: 1}}}}}}
auth:
  keys:
    - {{name: tester, hash: "sha256:{DIGEST}"}}
"""
    yield from serve(config, sim)


@pytest.fixture(scope="module")
def front(inner):
    """A gateway whose backend `front` speaks Gemini to `inner`."""
    config = f"""
backends:
  front:
    tier: cloud
    model: auto
    price: {{input_per_mtok: 1, output_per_mtok: 2}}
    gemini: {{base_url: "{inner.url}", api_key: env:SWITCHYARD_TEST_FRONT_KEY}}
"""
    yield from serve(config)


def client(gateway, version="v1beta", key=KEY):
    options = types.HttpOptions(base_url=gateway.url, api_version=version) if version else \
        types.HttpOptions(base_url=gateway.url)
    return genai.Client(api_key=key, http_options=options)


@pytest.mark.parametrize("version", ["v1beta", None])
def test_generate_content_answers_the_sdk(inner, version):
    sdk = client(inner, version)  # held: a dropped client closes its connection pool
    answer = sdk.models.generate_content(
        model="auto", contents="Say hi", config=types.GenerateContentConfig(
            system_instruction="Be brief.", max_output_tokens=40, temperature=0.2))
    assert answer.text.startswith("[sim]")
    assert answer.candidates[0].finish_reason in (types.FinishReason.STOP, types.FinishReason.MAX_TOKENS)
    usage = answer.usage_metadata
    assert usage.prompt_token_count > 0 and usage.candidates_token_count > 0
    assert usage.total_token_count == usage.prompt_token_count + usage.candidates_token_count


def test_a_stream_matches_the_whole_answer(inner):
    sdk = client(inner)
    config = types.GenerateContentConfig(max_output_tokens=48, seed=7)
    whole = sdk.models.generate_content(model="auto", contents="Stream the same answer", config=config)
    chunks = list(sdk.models.generate_content_stream(model="auto", contents="Stream the same answer", config=config))
    assert "".join(c.text or "" for c in chunks) == whole.text
    last = chunks[-1]
    assert last.candidates[0].finish_reason == whole.candidates[0].finish_reason
    assert last.usage_metadata.candidates_token_count == whole.usage_metadata.candidates_token_count


def raw(gateway, path, body=None, headers=None):
    request = urllib.request.Request(gateway.url + path, data=json.dumps(body).encode() if body is not None else None,
                                     headers={"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_answers_and_stream_events_parse_with_the_sdks_strict_types(inner):
    """The SDK itself drops unknown fields; its types forbid them, so a
    misspelt camelCase key fails here."""
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "generationConfig": {"maxOutputTokens": 16}}
    status, text = raw(inner, "/v1beta/models/auto:generateContent", body, {"x-goog-api-key": KEY})
    assert status == 200, text
    types.GenerateContentResponse.model_validate(json.loads(text))
    status, text = raw(inner, "/v1beta/models/auto:streamGenerateContent?alt=sse", body, {"x-goog-api-key": KEY})
    events = [line[len("data: "):] for line in text.splitlines() if line.startswith("data: ")]
    assert status == 200 and len(events) >= 2
    for event in events:
        types.GenerateContentResponse.model_validate(json.loads(event))
    assert json.loads(events[-1])["candidates"][0]["finishReason"] in ("STOP", "MAX_TOKENS")
    status, text = raw(inner, f"/v1beta/models/auto:countTokens?key={KEY}", {"contents": body["contents"]})
    assert status == 200, text
    assert types.CountTokensResponse.model_validate(json.loads(text)).total_tokens > 0


def test_a_function_call_round_trip(inner):
    sdk = client(inner)
    config = types.GenerateContentConfig(tools=[WEATHER], max_output_tokens=64)
    question = types.Content(role="user", parts=[types.Part(text="Weather in Oslo?")])
    first = sdk.models.generate_content(model="auto", contents=[question], config=config)
    call = first.function_calls[0]
    assert call.name == "get_weather" and isinstance(call.args["city"], str)
    result = types.Part.from_function_response(name="get_weather", response={"output": "12 C and clear"})
    second = sdk.models.generate_content(model="auto", config=config, contents=[
        question, first.candidates[0].content, types.Content(role="user", parts=[result])])
    assert second.text and not second.function_calls


def test_count_tokens_and_models(inner):
    sdk = client(inner)
    assert sdk.models.count_tokens(model="auto", contents="hello world").total_tokens > 0
    names = [m.name for m in sdk.models.list()]
    assert "models/auto" in names and "models/local" in names
    assert sdk.models.get(model="auto").name == "models/auto"


def test_errors_raise_the_sdks_exceptions_with_googles_statuses(inner):
    sdk, stranger = client(inner), client(inner, key="wrong")
    with pytest.raises(genai_errors.ClientError) as caught:
        sdk.models.generate_content(model="no-such-model", contents="x")
    assert (caught.value.code, caught.value.status) == (404, "NOT_FOUND")
    with pytest.raises(genai_errors.ClientError) as caught:
        stranger.models.generate_content(model="auto", contents="x")
    assert (caught.value.code, caught.value.status) == (401, "UNAUTHENTICATED")
    status, text = raw(inner, "/v1beta/models/auto:streamGenerateContent",
                       {"contents": [{"parts": [{"text": "x"}]}]}, {"x-goog-api-key": KEY})
    assert status == 400 and json.loads(text)["error"]["status"] == "INVALID_ARGUMENT"
    assert "alt=sse" in json.loads(text)["error"]["message"]
    status, text = raw(inner, "/v1beta/models/auto:generateContent",
                       {"contents": [{"parts": [{"fileData": {"fileUri": "gs://b/f.pdf"}}]}]}, {"x-goog-api-key": KEY})
    assert status == 400 and "fileData" in json.loads(text)["error"]["message"]


def test_a_gemini_backend_reaches_another_gateways_gemini_ingress(front, inner):
    sdk = client(front)
    answer = sdk.models.generate_content(model="front", contents="Say hi",
                                         config=types.GenerateContentConfig(max_output_tokens=30))
    assert answer.text.startswith("[sim]")
    streamed = "".join(c.text or "" for c in sdk.models.generate_content_stream(
        model="front", contents="Say hi", config=types.GenerateContentConfig(max_output_tokens=30)))
    assert streamed.startswith("[sim]")
    config = types.GenerateContentConfig(tools=[WEATHER], max_output_tokens=64)
    first = sdk.models.generate_content(model="front", contents="Weather in Oslo?", config=config)
    assert first.function_calls[0].name == "get_weather"
