"""The real anthropic Python SDK against the gateway's Messages endpoint.

Run under anthropic 2.x (Bearer auth) and 1.x (x-api-key auth): each
version's client is built the way that version's users (and Claude Code)
authenticate."""

import anthropic
import pytest

from conftest import KEY

MAJOR = int(anthropic.__version__.split(".")[0])

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@pytest.fixture()
def client(keyed_gateway):
    if MAJOR >= 2:
        # Authorization: Bearer (ANTHROPIC_AUTH_TOKEN style).
        return anthropic.Anthropic(base_url=keyed_gateway.url, auth_token=KEY, api_key=None, max_retries=0, timeout=30)
    # x-api-key (ANTHROPIC_API_KEY style).
    return anthropic.Anthropic(base_url=keyed_gateway.url, api_key=KEY, max_retries=0, timeout=30)


def ask(text):
    return [{"role": "user", "content": text}]


# `auto` reaches an OpenAI-dialect backend; `claude` an Anthropic-dialect one.
BACKENDS = pytest.mark.parametrize("model", ["auto", "claude"])


@BACKENDS
def test_messages(client, model):
    raw = client.messages.with_raw_response.create(model=model, max_tokens=64, messages=ask("Say hi"))
    assert raw.headers["x-switchyard-backend"] == ("local" if model == "auto" else "claude")
    message = raw.parse()
    assert message.role == "assistant"
    assert message.content[0].type == "text"
    assert message.content[0].text.startswith("[sim]")
    assert message.stop_reason in ("end_turn", "max_tokens")
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0


@BACKENDS
def test_tool_use_round_trip(client, model):
    messages = ask("Weather in Oslo?")
    first = client.messages.create(model=model, max_tokens=256, messages=messages, tools=[WEATHER_TOOL])
    assert first.stop_reason == "tool_use"
    call = next(block for block in first.content if block.type == "tool_use")
    assert call.name == "get_weather" and "city" in call.input
    messages += [
        {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "12 C and clear"}]},
    ]
    second = client.messages.create(model=model, max_tokens=256, messages=messages, tools=[WEATHER_TOOL])
    assert second.content[0].type == "text"
    assert second.stop_reason in ("end_turn", "max_tokens")


@BACKENDS
def test_stream_text_matches_whole_usage(client, model):
    request = dict(model=model, max_tokens=48, messages=ask("Stream the same answer"))
    whole = client.messages.create(**request)
    with client.messages.stream(**request) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == whole.content[0].text
    assert final.usage.input_tokens == whole.usage.input_tokens
    assert final.usage.output_tokens == whole.usage.output_tokens


@BACKENDS
def test_stream_with_tools(client, model):
    with client.messages.stream(model=model, max_tokens=256, messages=ask("Weather?"), tools=[WEATHER_TOOL]) as stream:
        final = stream.get_final_message()
    call = next(block for block in final.content if block.type == "tool_use")
    assert call.name == "get_weather"
    assert isinstance(call.input["city"], str)
    assert final.stop_reason == "tool_use"


def test_count_tokens_and_models(client):
    counted = client.messages.count_tokens(model="auto", messages=ask("hello world"))
    assert counted.input_tokens > 0
    ids = [model.id for model in client.models.list()]
    assert "auto" in ids and "local" in ids
    assert client.models.retrieve("local").id == "local"


def test_errors_raise_the_sdk_exceptions(client, keyed_gateway):
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(model="no-such-model", max_tokens=8, messages=ask("x"))
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(model="auto", max_tokens=8, messages=[{"role": "user", "content": [{"type": "document", "source": {}}]}])
    assert "document" in str(bad.value)
    stranger = anthropic.Anthropic(base_url=keyed_gateway.url, api_key="sk-wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        stranger.messages.create(model="auto", max_tokens=8, messages=ask("x"))


def test_a_stream_cut_mid_way_raises(client):
    with pytest.raises(anthropic.APIError):
        with client.messages.stream(model="flaky", max_tokens=64, messages=ask("x")) as stream:
            for _ in stream.text_stream:
                pass
