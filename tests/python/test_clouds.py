"""Managed clouds and native provider APIs as backends, each against a
loopback stand-in that speaks the provider's wire (tests/python/standins.py).
Every stand-in is first checked against the provider's own SDK; then the
gateway is driven by the OpenAI and Anthropic SDKs in front of it, and what
the stand-in received is compared with what the provider's SDK sends."""

import base64
import os

import anthropic
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

import standins
from conftest import serve

os.environ["SWITCHYARD_TEST_AZURE_KEY"] = standins.AZURE_KEY
os.environ["SWITCHYARD_TEST_AZURE_TOKEN"] = standins.AZURE_TOKEN
os.environ["SWITCHYARD_TEST_GEMINI_KEY"] = standins.GEMINI_KEY


@pytest.fixture(scope="module")
def azure():
    stand_in = standins.azure()
    yield stand_in
    stand_in.stop()


@pytest.fixture(scope="module")
def gemini():
    stand_in = standins.gemini()
    yield stand_in
    stand_in.stop()


@pytest.fixture(scope="module")
def gateway(azure, gemini):
    config = f"""
backends:
  azure-dated:
    tier: cloud
    model: gpt-4o
    azure: {{endpoint: "{azure.url}", deployment: gpt-4o-prod, api_version: 2024-10-21, api_key: env:SWITCHYARD_TEST_AZURE_KEY}}
  azure-v1:
    tier: cloud
    model: gpt-4o
    azure: {{endpoint: "{azure.url}", deployment: gpt-4o-prod, api_version: v1, entra_token: env:SWITCHYARD_TEST_AZURE_TOKEN}}
  gemini:
    tier: cloud
    model: gemini-2.5-flash
    gemini: {{base_url: "{gemini.url}", api_key: env:SWITCHYARD_TEST_GEMINI_KEY}}
"""
    yield from serve(config)


def openai_client(gateway):
    return openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0, timeout=30)


def anthropic_client(gateway):
    return anthropic.Anthropic(base_url=gateway.url, api_key="unused", max_retries=0, timeout=30)


def gemini_client(gateway):
    """A google-genai client of the gateway's Gemini ingress (hold it: a
    dropped client closes its connections)."""
    return genai.Client(api_key="unused", http_options=genai_types.HttpOptions(
        base_url=gateway.url, api_version="v1beta", retry_options=genai_types.HttpRetryOptions(attempts=1)))


def ask(text):
    return [{"role": "user", "content": text}]


# --- Azure OpenAI ---------------------------------------------------------

def test_the_azure_stand_in_answers_the_azure_sdk_on_both_surfaces(azure):
    dated = openai.AzureOpenAI(azure_endpoint=azure.url, api_version="2024-10-21", api_key=standins.AZURE_KEY,
                               azure_deployment="gpt-4o-prod", max_retries=0)
    answer = dated.chat.completions.create(model="gpt-4o-prod", messages=ask("hello"))
    assert answer.choices[0].message.content == "Azure answers: hello"
    sdk = azure.last()
    assert (sdk.path, sdk.query, sdk.headers["api-key"]) == (
        "/openai/deployments/gpt-4o-prod/chat/completions", {"api-version": "2024-10-21"}, standins.AZURE_KEY)
    v1 = openai.OpenAI(base_url=azure.url + "/openai/v1/", api_key=standins.AZURE_TOKEN, max_retries=0)
    text = "".join(c.choices[0].delta.content or "" for c in
                   v1.chat.completions.create(model="gpt-4o-prod", messages=ask("hi"), stream=True) if c.choices)
    assert text.strip() == "Azure answers: hi"
    assert azure.last().path == "/openai/v1/chat/completions"
    assert azure.last().query == {}


def test_a_dated_azure_deployment_is_reached_as_the_azure_sdk_reaches_it(gateway, azure):
    openai.AzureOpenAI(azure_endpoint=azure.url, api_version="2024-10-21", api_key=standins.AZURE_KEY,
                       azure_deployment="gpt-4o-prod", max_retries=0).chat.completions.create(
        model="gpt-4o-prod", messages=ask("reference"))
    sdk = azure.last()
    answer = openai_client(gateway).chat.completions.create(model="azure-dated", messages=ask("hello"))
    ours = azure.last()
    assert answer.choices[0].message.content == "Azure answers: hello"
    assert answer.usage.prompt_tokens == 12
    assert (ours.path, ours.query) == (sdk.path, sdk.query)
    assert ours.headers["api-key"] == sdk.headers["api-key"]
    assert "authorization" not in ours.headers
    assert ours.body["model"] == "gpt-4o-prod"


def test_the_v1_surface_streams_with_an_entra_token(gateway, azure):
    stream = openai_client(gateway).chat.completions.create(
        model="azure-v1", messages=ask("stream please"), stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    seen = azure.last()
    assert seen.path == "/openai/v1/chat/completions" and seen.query == {}
    assert seen.headers["authorization"] == f"Bearer {standins.AZURE_TOKEN}"
    assert "api-key" not in seen.headers
    assert seen.body["model"] == "gpt-4o-prod"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip() == "Azure answers: stream please"
    assert chunks[-1].usage.total_tokens == 17
    # Azure's opening prompt-filter chunk (no choices, no usage) is not relayed.
    assert all(c.choices or c.usage for c in chunks)


def test_an_azure_content_filter_refusal_reaches_each_dialect_as_a_400(gateway):
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client(gateway).chat.completions.create(model="azure-dated", messages=ask(standins.FILTERED))
    error = caught.value.body
    assert caught.value.status_code == 400
    assert (error["code"], error["param"]) == ("content_filter", "prompt")
    assert "content filter" in error["message"]
    with pytest.raises(anthropic.BadRequestError) as caught:
        anthropic_client(gateway).messages.create(model="azure-dated", max_tokens=50,
                                                  messages=ask(standins.FILTERED))
    assert caught.value.body["error"]["type"] == "invalid_request_error"
    gemini = gemini_client(gateway)
    with pytest.raises(genai_errors.ClientError) as caught:
        gemini.models.generate_content(model="azure-dated", contents=standins.FILTERED)
    assert (caught.value.code, caught.value.status) == (400, "INVALID_ARGUMENT")


def test_azure_throttling_is_a_429_that_says_when_to_come_back(gateway):
    with pytest.raises(openai.RateLimitError) as caught:
        openai_client(gateway).chat.completions.create(model="azure-dated", messages=ask(standins.THROTTLED))
    assert caught.value.response.headers["retry-after"] == "7"
    with pytest.raises(anthropic.RateLimitError) as caught:
        anthropic_client(gateway).messages.create(model="azure-dated", max_tokens=50,
                                                  messages=ask(standins.THROTTLED))
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.body["error"]["type"] == "rate_limit_error"
    gemini = gemini_client(gateway)
    with pytest.raises(genai_errors.ClientError) as caught:
        gemini.models.generate_content(model="azure-dated", contents=standins.THROTTLED)
    assert (caught.value.code, caught.value.status) == (429, "RESOURCE_EXHAUSTED")


# --- the Gemini API -------------------------------------------------------

WEATHER = {"type": "function", "function": {"name": "weather", "description": "The weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def test_the_gemini_stand_in_answers_the_google_genai_sdk(gemini):
    client = genai.Client(api_key=standins.GEMINI_KEY,
                          http_options=genai_types.HttpOptions(base_url=gemini.url, api_version="v1beta"))
    config = genai_types.GenerateContentConfig(system_instruction="Be brief.", temperature=0.1, max_output_tokens=50)
    answer = client.models.generate_content(model="gemini-2.5-flash", contents="hello", config=config)
    assert answer.text == "Gemini answers: hello"
    assert answer.usage_metadata.cached_content_token_count == 100
    streamed = "".join(c.text or "" for c in client.models.generate_content_stream(
        model="gemini-2.5-flash", contents="hello there", config=config))
    assert streamed == "Gemini answers: hello there"
    sdk = gemini.last()
    assert sdk.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    assert sdk.query == {"alt": "sse"}
    assert standins.check_gemini_request(sdk.body) == []


def test_a_gemini_backend_answers_with_its_usage_in_the_ledgers_kinds(gateway, gemini):
    answer = openai_client(gateway).chat.completions.create(
        model="gemini", messages=[{"role": "system", "content": "Be brief."}, *ask("hello")], max_tokens=50)
    seen = gemini.last()
    assert seen.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert seen.headers["x-goog-api-key"] == standins.GEMINI_KEY
    assert seen.body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert seen.body["generationConfig"]["maxOutputTokens"] == 50
    assert answer.choices[0].message.content == "Gemini answers: hello"
    assert answer.choices[0].finish_reason == "stop"
    usage = answer.usage
    # promptTokenCount includes the cached tokens; thoughts are output.
    assert (usage.prompt_tokens, usage.completion_tokens) == (120, 10)
    assert usage.prompt_tokens_details.cached_tokens == 100
    assert usage.completion_tokens_details.reasoning_tokens == 4


def test_a_gemini_backend_streams_to_openai_and_anthropic_callers(gateway):
    stream = openai_client(gateway).chat.completions.create(
        model="gemini", messages=ask("stream this"), stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Gemini answers: stream this"
    assert chunks[-1].usage.prompt_tokens == 120
    with anthropic_client(gateway).messages.stream(model="gemini", max_tokens=50, messages=ask("and this")) as s:
        message = s.get_final_message()
    assert "".join(b.text for b in message.content if b.type == "text") == "Gemini answers: and this"
    assert message.usage.output_tokens == 10


def test_a_gemini_function_call_round_trips_with_its_thought_signature(gateway, gemini):
    client = openai_client(gateway)
    first = client.chat.completions.create(model="gemini", messages=ask("weather in Paris?"), tools=[WEATHER])
    call = first.choices[0].message.tool_calls[0]
    assert first.choices[0].finish_reason == "tool_calls"
    assert (call.function.name, call.function.arguments) == ("weather", '{"city":"Paris"}')
    assert gemini.last().body["tools"][0]["functionDeclarations"][0]["name"] == "weather"
    assistant = first.choices[0].message.model_dump(exclude_none=True)
    second = client.chat.completions.create(model="gemini", tools=[WEATHER], messages=[
        *ask("weather in Paris?"), assistant,
        {"role": "tool", "tool_call_id": call.id, "content": '{"temp": 21}'}])
    assert second.choices[0].message.content == 'The tool said {"temp": 21}'
    turns = gemini.last().body["contents"]
    model_turn, result_turn = turns[1], turns[2]
    assert model_turn["role"] == "model"
    assert model_turn["parts"][0]["functionCall"] == {"name": "weather", "args": {"city": "Paris"}}
    assert model_turn["parts"][0]["thoughtSignature"] == base64.b64encode(b"sig-1").decode()
    # Gemini sent the call without an id: the one made up for it is not sent back.
    assert call.id.startswith("call_gemini_")
    assert result_turn == {"role": "user", "parts": [
        {"functionResponse": {"name": "weather", "response": {"temp": 21}}}]}


def test_gemini_throttling_is_a_429_in_each_dialect(gateway):
    with pytest.raises(openai.RateLimitError) as caught:
        openai_client(gateway).chat.completions.create(model="gemini", messages=ask(standins.THROTTLED))
    assert caught.value.response.headers["retry-after"] == "1"
    with pytest.raises(anthropic.RateLimitError):
        anthropic_client(gateway).messages.create(model="gemini", max_tokens=50, messages=ask(standins.THROTTLED))
    gemini = gemini_client(gateway)
    with pytest.raises(genai_errors.ClientError) as caught:
        gemini.models.generate_content(model="gemini", contents=standins.THROTTLED)
    assert (caught.value.code, caught.value.status) == (429, "RESOURCE_EXHAUSTED")


def test_a_gemini_stream_cut_mid_event_ends_with_an_error_event(gateway):
    stream = openai_client(gateway).chat.completions.create(
        model="gemini", messages=ask(standins.BROKEN), stream=True)
    # The stream's own error event, not a dropped connection.
    with pytest.raises(openai.APIError) as caught:
        for _ in stream:
            pass
    assert type(caught.value) is openai.APIError
    assert caught.value.body["code"] == "upstream_reset"
    with pytest.raises(anthropic.APIStatusError) as caught:
        with anthropic_client(gateway).messages.stream(model="gemini", max_tokens=50,
                                                       messages=ask(standins.BROKEN)) as events:
            events.get_final_message()
    assert caught.value.body["error"]["type"] == "api_error"
    gemini = gemini_client(gateway)
    with pytest.raises(genai_errors.APIError) as caught:
        for _ in gemini.models.generate_content_stream(model="gemini", contents=standins.BROKEN):
            pass
    assert caught.value.code == 502
