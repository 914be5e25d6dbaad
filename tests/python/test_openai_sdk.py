"""The real openai Python SDK against the gateway: every call a client makes."""

import json

import openai
import pydantic
import pytest

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
            "required": ["city"],
        },
    },
}


# `auto` reaches an OpenAI-dialect backend; `claude` an Anthropic-dialect one.
BACKENDS = pytest.mark.parametrize("model", ["auto", "claude"])


@pytest.fixture()
def client(gateway):
    return openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0, timeout=30)


def test_models_list(client):
    ids = [m.id for m in client.models.list()]
    assert ids == ["auto", "claude", "flaky", "local"]


def test_stored_responses_are_not_kept(client):
    with pytest.raises(openai.NotFoundError) as missing:
        client.responses.retrieve("resp_123")
    assert missing.value.code == "responses_not_stored"


def test_models_retrieve(client):
    assert client.models.retrieve("auto").id == "auto"
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("no-such-model")
    assert missing.value.code == "model_not_found"


def test_chat(client):
    raw = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "Say hi"}], max_tokens=20
    )
    assert raw.headers["x-switchyard-route"] == "auto"
    assert raw.headers["x-switchyard-backend"] == "local"
    completion = raw.parse()
    assert completion.choices[0].message.content.startswith("[sim]")
    assert completion.model == "sim-local"
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens


def test_chat_n_logprobs_and_json_mode(client):
    completion = client.chat.completions.create(
        model="local",
        messages=[{"role": "user", "content": "Give JSON"}],
        n=2,
        logprobs=True,
        top_logprobs=2,
        response_format={"type": "json_object"},
        seed=3,
    )
    assert len(completion.choices) == 2
    assert json.loads(completion.choices[0].message.content)["simulated"] is True
    assert len(completion.choices[0].logprobs.content[0].top_logprobs) == 2


def test_seed_stop_max_tokens_and_n_behave_as_the_api_does(client):
    ask = dict(model="local", messages=[{"role": "user", "content": "Tell me about routing"}], max_tokens=40)
    first = client.chat.completions.create(**ask, seed=11)
    assert client.chat.completions.create(**ask, seed=11).choices[0].message.content == first.choices[0].message.content
    assert client.chat.completions.create(**ask, seed=12).choices[0].message.content != first.choices[0].message.content
    cut = client.chat.completions.create(**{**ask, "max_tokens": 5}, seed=11)
    assert (cut.choices[0].finish_reason, cut.usage.completion_tokens) == ("length", 5)
    # The text ends before the stop sequence, which is not returned.
    text = first.choices[0].message.content
    word = text.split()[4]
    stopped = client.chat.completions.create(**ask, seed=11, stop=["never said", " " + word])
    assert stopped.choices[0].message.content == text[: text.index(" " + word)]
    assert stopped.choices[0].finish_reason == "stop"
    assert stopped.usage.completion_tokens < first.usage.completion_tokens
    several = client.chat.completions.create(**ask, n=3)
    assert [c.index for c in several.choices] == [0, 1, 2]
    legacy = client.completions.create(model="local", prompt="Once", max_tokens=40, seed=3)
    word = legacy.choices[0].text.split()[3]
    stopped = client.completions.create(model="local", prompt="Once", max_tokens=40, seed=3, stop=" " + word)
    assert stopped.choices[0].text == legacy.choices[0].text[: legacy.choices[0].text.index(" " + word)]


@BACKENDS
def test_chat_with_tools_round_trip(client, model):
    messages = [{"role": "user", "content": "Weather in Oslo?"}]
    first = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER_TOOL])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert "city" in json.loads(call.function.arguments)
    messages += [choice.message.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": call.id, "content": "12 C"}]
    second = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER_TOOL])
    assert second.choices[0].finish_reason in ("stop", "length")
    assert second.choices[0].message.content


@BACKENDS
def test_chat_streaming_with_usage(client, model):
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Stream"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("[sim]")
    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens > 0


def test_chat_streaming_without_usage_has_none(client):
    chunks = list(client.chat.completions.create(model="auto", messages=[{"role": "user", "content": "x"}], stream=True))
    assert all(c.usage is None for c in chunks)
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")


def test_streaming_tool_call_deltas(client):
    stream = client.chat.completions.create(
        model="local",
        messages=[{"role": "user", "content": "Weather?"}],
        tools=[WEATHER_TOOL],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        stream=True,
    )
    name, arguments, finish = "", "", None
    for chunk in stream:
        for call in chunk.choices[0].delta.tool_calls or []:
            name += call.function.name or ""
            arguments += call.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert name == "get_weather"
    assert json.loads(arguments)["unit"] == "c"
    assert finish == "tool_calls"


def test_stream_helper_accumulates(client):
    with client.chat.completions.stream(model="local", messages=[{"role": "user", "content": "hi"}]) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.content.startswith("[sim]")


def test_completions(client):
    completion = client.completions.create(model="auto", prompt="Once upon a time", max_tokens=5)
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage.completion_tokens == 5
    streamed = "".join(c.choices[0].text for c in client.completions.create(model="auto", prompt="Once", stream=True) if c.choices)
    assert streamed.startswith("[sim]")


def test_embeddings_float_and_base64(client):
    as_float = client.embeddings.create(model="local", input=["hello world"], encoding_format="float")
    # The SDK asks for base64 by default and decodes it back to floats.
    as_base64 = client.embeddings.create(model="local", input=["hello world"])
    assert len(as_float.data[0].embedding) == 256
    assert as_base64.data[0].embedding == pytest.approx(as_float.data[0].embedding, abs=1e-6)
    assert as_float.usage.prompt_tokens == 2


def test_errors_raise_the_sdk_exceptions(client):
    with pytest.raises(openai.NotFoundError) as not_found:
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
    assert "auto" in str(not_found.value)
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="auto", messages=[])
    assert bad.value.body["param"] == "messages"
    with pytest.raises(openai.InternalServerError) as upstream:
        client.chat.completions.create(model="flaky", messages=[{"role": "user", "content": "x"}])
    assert upstream.value.status_code == 502


def test_mid_stream_reset_raises(client):
    stream = client.chat.completions.create(model="flaky", messages=[{"role": "user", "content": "x"}], stream=True)
    with pytest.raises(openai.APIError) as cut:
        for _ in stream:
            pass
    assert "closed the connection" in str(cut.value)


def test_parallel_tool_calls(client):
    time_tool = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}}}
    both = client.chat.completions.create(model="local", messages=[{"role": "user", "content": "Weather and time?"}], tools=[WEATHER_TOOL, time_tool])
    assert [c.function.name for c in both.choices[0].message.tool_calls] == ["get_weather", "get_time"]
    one = client.chat.completions.create(
        model="local", messages=[{"role": "user", "content": "Weather and time?"}], tools=[WEATHER_TOOL, time_tool], parallel_tool_calls=False
    )
    assert len(one.choices[0].message.tool_calls) == 1


RESPONSES_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


class Address(pydantic.BaseModel):
    city: str


class Person(pydantic.BaseModel):
    name: str
    age: int
    nickname: str | None
    addresses: list[Address]


def test_structured_output_follows_the_requested_schema(client):
    """The SDK's parse helpers send the model's strict JSON schema (chat
    `response_format`, Responses `text.format`); the simulator's answer
    must validate against it."""
    completion = client.chat.completions.parse(
        model="auto", messages=[{"role": "user", "content": "Describe someone"}], response_format=Person
    )
    person = completion.choices[0].message.parsed
    assert isinstance(person, Person) and person.addresses
    response = client.responses.parse(model="auto", input="Describe someone", text_format=Person)
    assert isinstance(response.output_parsed, Person)


@BACKENDS
def test_responses(client, model):
    response = client.responses.create(model=model, input="Say hi", instructions="Be brief", max_output_tokens=64)
    assert response.output_text.startswith("[sim]")
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0


def test_responses_with_a_function_tool(client):
    first = client.responses.create(model="auto", input="Weather in Oslo?", tools=[RESPONSES_TOOL])
    call = next(item for item in first.output if item.type == "function_call")
    assert call.name == "get_weather"
    assert "city" in json.loads(call.arguments)
    second = client.responses.create(
        model="auto",
        tools=[RESPONSES_TOOL],
        input=[
            {"role": "user", "content": "Weather in Oslo?"},
            {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
            {"type": "function_call_output", "call_id": call.call_id, "output": "12 C"},
        ],
    )
    assert second.output_text


@BACKENDS
def test_responses_streaming(client, model):
    stream = client.responses.create(model=model, input="Stream it", max_output_tokens=40, stream=True)
    deltas, completed = [], None
    for event in stream:
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
        elif event.type in ("response.completed", "response.incomplete"):
            completed = event.response
    assert "".join(deltas).startswith("[sim]")
    assert completed.output_text == "".join(deltas)
    assert completed.usage.output_tokens > 0


def test_responses_streaming_function_call(client):
    with client.responses.stream(model="auto", input="Weather?", tools=[RESPONSES_TOOL]) as stream:
        final = stream.get_final_response()
    call = next(item for item in final.output if item.type == "function_call")
    assert isinstance(json.loads(call.arguments)["city"], str)


def test_responses_refuses_what_it_cannot_translate(client):
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model="auto", input="x", previous_response_id="resp_123")
    assert bad.value.body["param"] == "previous_response_id"
