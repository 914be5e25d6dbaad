"""Wire conformance of the Anthropic shapes: every Messages answer, stream
event, token count, model listing and error body parses with the anthropic
SDK's own types in strict mode (no type coercion, every field the type
requires present, and no field the type does not declare), both from an
Anthropic-dialect backend and translated from an OpenAI-dialect one."""

import json

import anthropic.types as types
import httpx2 as httpx
import pydantic
import pytest
from anthropic._models import BaseModel as SdkModel
from anthropic.types.shared import ErrorResponse

HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "unused"}
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def undeclared(value, path="(top)"):
    """Fields the SDK's types do not declare, anywhere in a parsed value
    (its models allow extra fields; strict mode here does not)."""
    if isinstance(value, SdkModel):
        found = [f"{path}.{name}" for name in (value.__pydantic_extra__ or {})]
        for name in type(value).model_fields:
            found += undeclared(getattr(value, name), f"{path}.{name}")
        return found
    if isinstance(value, (list, tuple)):
        return [field for i, item in enumerate(value) for field in undeclared(item, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [field for key, item in value.items() for field in undeclared(item, f"{path}.{key}")]
    return []


class StrictWire:
    """Posts to one gateway in the Anthropic dialect and collects every
    place an answer leaves the SDK's types."""

    def __init__(self, base_url):
        self.http = httpx.Client(base_url=base_url, headers=HEADERS, timeout=60)
        self.found = []

    def check(self, kind, text, what):
        try:
            value = pydantic.TypeAdapter(kind).validate_json(text, strict=True)
        except pydantic.ValidationError as err:
            self.found += [f"{what}: {'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors()]
            return None
        self.found += [f"{what}: undeclared field {field}" for field in undeclared(value)]
        return value

    def whole(self, path, body, kind, what, status=200):
        answer = self.http.post(path, json=body)
        assert answer.status_code == status, (what, answer.status_code, answer.text)
        return self.check(kind, answer.text, what)

    def stream(self, body, what):
        """Every event of a Messages stream; `ping` is not in the SDK's
        event union (its stream reader skips it), so it is checked as itself."""
        names = []
        with self.http.stream("POST", "/v1/messages", json={**body, "stream": True}) as answer:
            assert answer.status_code == 200, (what, answer.status_code, answer.read())
            name = None
            for line in answer.iter_lines():
                if line.startswith("event: "):
                    name = line[len("event: "):]
                elif line.startswith("data: "):
                    data = line[len("data: "):]
                    names.append(name)
                    assert json.loads(data)["type"] == name, (what, name, data)
                    if name == "ping":
                        assert json.loads(data) == {"type": "ping"}, data
                    elif name == "error":
                        self.check(ErrorResponse, data, f"{what} {name}")
                    else:
                        self.check(types.RawMessageStreamEvent, data, f"{what} {name}")
        return names

    def assert_conformant(self):
        assert not self.found, "\n".join(self.found)


@pytest.fixture()
def wire(own_gateway):
    strict = StrictWire(own_gateway.url)
    yield strict
    strict.http.close()


def ask(model, text, **more):
    return {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": text}], **more}


# `local` is an OpenAI-dialect backend (answers translated), `claude` an
# Anthropic-dialect one.
@pytest.mark.parametrize("model", ["local", "claude"])
def test_messages_follow_the_sdk_types_strictly(wire, model):
    plain = wire.whole("/v1/messages", ask(model, "Say hi", system="Be brief"), types.Message, f"{model} message")
    assert plain is not None and plain.stop_reason == "end_turn"
    cut = wire.whole("/v1/messages", ask(model, "Tell a long story", max_tokens=3), types.Message, f"{model} cut")
    assert cut is not None and cut.stop_reason == "max_tokens"
    tools = ask(model, "Weather in Oslo?", tools=[WEATHER_TOOL], tool_choice={"type": "any"})
    called = wire.whole("/v1/messages", tools, types.Message, f"{model} tool use")
    assert called is not None and called.stop_reason == "tool_use"
    names = wire.stream(ask(model, "Say hi"), f"{model} stream")
    assert names[0] == "message_start" and names[-1] == "message_stop", names
    names = wire.stream(tools, f"{model} tool use stream")
    assert "content_block_delta" in names, names
    wire.whole("/v1/messages/count_tokens", {"model": model, "messages": [{"role": "user", "content": "hello"}]},
               types.MessageTokensCount, f"{model} count_tokens")
    wire.assert_conformant()


def test_models_and_errors_follow_the_sdk_types_strictly(wire):
    listed = wire.http.get("/v1/models")
    assert listed.status_code == 200
    page = listed.json()
    # The SDK's page reads these beside `data`.
    assert page["has_more"] is False and page["first_id"] == page["data"][0]["id"], page
    assert page["last_id"] == page["data"][-1]["id"], page
    for i, model in enumerate(page["data"]):
        wire.check(types.ModelInfo, json.dumps(model), f"models list [{i}]")
    wire.check(types.ModelInfo, wire.http.get("/v1/models/local").text, "model retrieved")
    wire.whole("/v1/messages", ask("no-such-model", "x"), ErrorResponse, "unknown model", status=404)
    wire.whole("/v1/messages", {"model": "local", "messages": []}, ErrorResponse, "no max_tokens", status=400)
    wire.whole("/v1/messages", ask("local", [{"type": "document", "source": {}}]), ErrorResponse,
               "a block it cannot translate", status=400)
    names = wire.stream(ask("flaky", "x"), "a stream cut mid-way")
    assert names[-1] == "error", names
    wire.assert_conformant()
