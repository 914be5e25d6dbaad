"""Wire conformance of the OpenAI shapes: every whole answer, streamed chunk,
streamed event and error body the gateway sends validates against its
component schema in OpenAI's published OpenAPI document, whichever backend
answered: the simulator (OpenAI dialect) and an Anthropic-dialect upstream
translated to OpenAI shapes here, a real llama-server in
test_llama_server.py."""

import json

import httpx2 as httpx
import pytest

from openapi_spec import violations

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
RESPONSES_TOOL = {"type": "function", **WEATHER_TOOL["function"]}
PERSON = {
    "type": "json_schema",
    "json_schema": {
        "name": "person",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name", "age"],
            "additionalProperties": False,
        },
    },
}

# Where OpenAI's own answers leave its spec, and so may ours: (where it
# happens, component, path prefix, why).
ALLOWED = [
    ("stream", "CreateCompletionResponse", "choices/0/finish_reason: None",
     "OpenAI streams legacy completions as CreateCompletionResponse chunks whose finish_reason is null until the "
     "last, which the schema (not marked nullable) does not allow"),
]


def allowed(what, line):
    return any(kind in what and line.startswith(f"{component} at {path}") for kind, component, path, _ in ALLOWED)


class Conformance:
    """Posts to one gateway and collects every violation of the spec."""

    def __init__(self, base_url):
        self.http = httpx.Client(base_url=base_url, timeout=60)
        self.found = []

    def check(self, component, instance, what):
        self.found += [f"{what}: {line}" for line in violations(component, instance) if not allowed(what, line)]

    def whole(self, path, body, component, what, status=200):
        answer = self.http.post(path, json=body)
        assert answer.status_code == status, (what, answer.status_code, answer.text)
        self.check(component, answer.json(), what)
        return answer.json()

    def stream(self, path, body, component, what):
        """Every `data:` event of a stream (bar `[DONE]`) against `component`."""
        events = []
        with self.http.stream("POST", path, json={**body, "stream": True}) as answer:
            assert answer.status_code == 200, (what, answer.status_code, answer.read())
            for line in answer.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    event = json.loads(line[len("data: "):])
                    events.append(event)
                    # A chat or completions stream that fails says so in an
                    # error body (Responses streams have an `error` event).
                    shape = "ErrorResponse" if "error" in event and "choices" not in event else component
                    self.check(shape, event, f"{what} event {len(events)}")
        assert events, what
        return events

    def error(self, method, path, body, status, what):
        answer = self.http.request(method, path, json=body)
        assert answer.status_code == status, (what, answer.status_code, answer.text)
        self.check("ErrorResponse", answer.json(), what)

    def assert_conformant(self):
        assert not self.found, "\n".join(self.found)


def chat_and_completions(wire, model, tools=True, openai_only=True):
    """The chat and legacy-completions calls, whole and streamed;
    `openai_only` adds what Anthropic backends refuse plainly (`n`,
    logprobs, a response format)."""
    ask = {"model": model, "messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 24}
    wire.whole("/v1/chat/completions", ask, "CreateChatCompletionResponse", f"{model} chat")
    wire.stream("/v1/chat/completions", {**ask, "stream_options": {"include_usage": True}},
                "CreateChatCompletionStreamResponse", f"{model} chat stream")
    if openai_only:
        wire.whole("/v1/chat/completions", {**ask, "logprobs": True, "top_logprobs": 2, "n": 2},
                   "CreateChatCompletionResponse", f"{model} chat with logprobs")
        wire.stream("/v1/chat/completions", {**ask, "logprobs": True, "top_logprobs": 1},
                    "CreateChatCompletionStreamResponse", f"{model} chat stream with logprobs")
        wire.whole("/v1/chat/completions", {**ask, "response_format": PERSON, "max_tokens": 200},
                   "CreateChatCompletionResponse", f"{model} chat json_schema")
    if tools:
        weather = {**ask, "messages": [{"role": "user", "content": "Weather in Oslo?"}], "tools": [WEATHER_TOOL],
                   "max_tokens": 200}
        wire.whole("/v1/chat/completions", weather, "CreateChatCompletionResponse", f"{model} chat tool call")
        wire.stream("/v1/chat/completions", weather, "CreateChatCompletionStreamResponse",
                    f"{model} chat tool call stream")
    if not openai_only:
        return
    prompt = {"model": model, "prompt": "Once upon a time", "max_tokens": 16}
    wire.whole("/v1/completions", prompt, "CreateCompletionResponse", f"{model} completions")
    wire.whole("/v1/completions", {**prompt, "logprobs": 2}, "CreateCompletionResponse",
               f"{model} completions with logprobs")
    wire.stream("/v1/completions", prompt, "CreateCompletionResponse", f"{model} completions stream")


def responses(wire, model, tools=True, openai_only=True):
    """The Responses calls, whole and streamed, cut short and not."""
    ask = {"model": model, "input": "Say hi", "instructions": "Be brief", "max_output_tokens": 64,
           "metadata": {"ticket": "42"}, "temperature": 0.5}
    wire.whole("/v1/responses", ask, "Response", f"{model} responses")
    wire.stream("/v1/responses", ask, "ResponseStreamEvent", f"{model} responses stream")
    short = {"model": model, "input": "Tell a long story", "max_output_tokens": 3}
    cut = wire.whole("/v1/responses", short, "Response", f"{model} responses cut short")
    assert cut["status"] == "incomplete", cut
    assert cut["output"][-1]["status"] == "incomplete", cut
    wire.stream("/v1/responses", short, "ResponseStreamEvent", f"{model} responses stream cut short")
    schema = PERSON["json_schema"]
    # Bounded like the chat json_schema call: unbounded, a one-thread
    # llama-server may write into its whole window and outlast the client.
    structured = {"model": model, "input": "Describe someone", "max_output_tokens": 200,
                  "text": {"format": {"type": "json_schema", "name": schema["name"], "schema": schema["schema"],
                                      "strict": True}}}
    if openai_only:
        wire.whole("/v1/responses", structured, "Response", f"{model} responses json_schema")
    if tools:
        weather = {"model": model, "input": "Weather in Oslo?", "tools": [RESPONSES_TOOL], "tool_choice": "required",
                   "max_output_tokens": 200}
        answer = wire.whole("/v1/responses", weather, "Response", f"{model} responses tool call")
        assert answer["tools"][0]["name"] == "get_weather" and answer["tool_choice"] == "required", answer
        events = wire.stream("/v1/responses", weather, "ResponseStreamEvent", f"{model} responses tool call stream")
        done = [e for e in events if e["type"] == "response.function_call_arguments.done"]
        assert done and done[0]["name"] == "get_weather", done


def the_rest(wire):
    """Models, embeddings and errors: answered by the gateway itself."""
    listed = wire.http.get("/v1/models").json()
    wire.check("ListModelsResponse", listed, "models list")
    wire.check("Model", wire.http.get("/v1/models/auto").json(), "models retrieve")
    wire.whole("/v1/embeddings", {"model": "local", "input": ["a", "b"]}, "CreateEmbeddingResponse", "embeddings")
    wire.error("POST", "/v1/chat/completions", {"model": "auto"}, 400, "chat without messages")
    wire.error("POST", "/v1/chat/completions", {"model": "nope", "messages": [{"role": "user", "content": "x"}]},
               404, "unknown model")
    wire.error("GET", "/v1/models/nope", None, 404, "unknown model retrieved")
    wire.error("GET", "/v1/responses/resp_1", None, 404, "stored response")
    # Streams cut mid-way (the `flaky` backend resets every stream half way)
    # end with an error in the stream's own shape.
    ask = {"model": "flaky", "messages": [{"role": "user", "content": "x"}], "max_tokens": 64}
    chat = wire.stream("/v1/chat/completions", ask, "CreateChatCompletionStreamResponse", "chat stream cut")
    assert "error" in chat[-1], chat[-1]
    cut = wire.stream("/v1/responses", {"model": "flaky", "input": "x", "max_output_tokens": 64},
                      "ResponseStreamEvent", "responses stream cut")
    assert cut[-1]["type"] == "error", cut[-1]
    wire.error("POST", "/v1/responses", {"model": "auto", "input": "x", "previous_response_id": "resp_1"}, 400,
               "previous_response_id")


@pytest.fixture()
def wire(own_gateway):
    conformance = Conformance(own_gateway.url)
    yield conformance
    conformance.http.close()


@pytest.mark.parametrize("model", ["local", "claude"])
def test_chat_and_completions_follow_the_spec(wire, model):
    chat_and_completions(wire, model, openai_only=model != "claude")
    wire.assert_conformant()


@pytest.mark.parametrize("model", ["local", "claude"])
def test_responses_follow_the_spec(wire, model):
    responses(wire, model, openai_only=model != "claude")
    wire.assert_conformant()


def test_models_embeddings_and_errors_follow_the_spec(wire):
    the_rest(wire)
    wire.assert_conformant()
