"""Loopback stand-ins for managed clouds and provider APIs the tests cannot
reach: they speak each provider's wire as its own SDK writes and reads it,
record what they were sent, and fail on request in the provider's own error
shapes. Each test first checks a stand-in against the provider's SDK, so
what the gateway is tested against is what the SDK would meet."""

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.genai import types as genai_types

# Prompts that make a stand-in fail the way its provider does.
FILTERED = "please filter me"
THROTTLED = "please throttle me"
BROKEN = "please break the stream"


class Seen:
    """One request as a stand-in received it."""

    def __init__(self, method, path, query, headers, body):
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body


class StandIn:
    """A ThreadingHTTPServer on 127.0.0.1:0 running `handler` in a thread."""

    def __init__(self, handler):
        self.seen = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                self._serve()

            def do_POST(self):
                self._serve()

            def _serve(self):
                url = urllib.parse.urlsplit(self.path)
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                seen = Seen(self.command, url.path, dict(urllib.parse.parse_qsl(url.query)),
                            {k.lower(): v for k, v in self.headers.items()}, body)
                stand_in.seen.append(seen)
                handler(self, seen)

            def reply(self, status, body, headers=()):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def sse(self, events, cut=False, done=False):
                """`data:` events, the body closed after them; `cut` ends it
                in the middle of the last one, `done` adds OpenAI's
                `[DONE]`."""
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                for i, event in enumerate(events):
                    frame = f"data: {json.dumps(event)}\n\n".encode()
                    if cut and i == len(events) - 1:
                        frame = frame[: len(frame) // 2]
                    self.wfile.write(frame)
                    self.wfile.flush()
                if done and not cut:
                    self.wfile.write(b"data: [DONE]\n\n")
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def last(self):
        return self.seen[-1]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def last_user_text(messages_or_contents):
    """The text of the last user turn, in either dialect's shape."""
    for turn in reversed(messages_or_contents):
        if turn.get("role") != "user":
            continue
        content = turn.get("content", turn.get("parts"))
        if isinstance(content, str):
            return content
        return " ".join(p.get("text", "") for p in content or [] if isinstance(p, dict))
    return ""


# --- Azure OpenAI ---------------------------------------------------------

AZURE_KEY = "azure-test-key"
AZURE_TOKEN = "entra-test-token"


def azure(deployment="gpt-4o-prod"):
    """Azure OpenAI's two surfaces for one deployment: the dated
    `/openai/deployments/{d}/chat/completions?api-version=` and `/openai/v1/`."""

    def handle(h, seen):
        dated = f"/openai/deployments/{deployment}/chat/completions"
        if seen.path == dated:
            if "api-version" not in seen.query:
                return h.reply(404, {"error": {"code": "404", "message": "Resource not found"}})
        elif seen.path != "/openai/v1/chat/completions":
            return h.reply(404, {"error": {"code": "404", "message": "Resource not found"}})
        if seen.headers.get("api-key") != AZURE_KEY and seen.headers.get("authorization") != f"Bearer {AZURE_TOKEN}":
            return h.reply(401, {"error": {"code": "401", "message": "Access denied due to invalid subscription key."}})
        prompt = last_user_text(seen.body["messages"])
        if FILTERED in prompt:
            # The shape of Azure's content-filter refusal, from its docs.
            return h.reply(400, {"error": {
                "message": "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
                "type": None, "param": "prompt", "code": "content_filter", "status": 400,
                "innererror": {"code": "ResponsibleAIPolicyViolation", "content_filter_result": {
                    "hate": {"filtered": True, "severity": "high"},
                    "self_harm": {"filtered": False, "severity": "safe"},
                    "sexual": {"filtered": False, "severity": "safe"},
                    "violence": {"filtered": False, "severity": "safe"}}}}})
        if THROTTLED in prompt:
            return h.reply(429, {"error": {"code": "429", "message": "Requests to the ChatCompletions_Create Operation have exceeded the rate limit."}},
                           headers=[("retry-after", "7"), ("retry-after-ms", "7000")])
        model = "gpt-4o-2024-11-20"
        text = f"Azure answers: {prompt}"
        usage = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17,
                 "prompt_tokens_details": {"cached_tokens": 0}}
        if not seen.body.get("stream"):
            return h.reply(200, {
                "id": "chatcmpl-azure1", "object": "chat.completion", "created": 1733300000, "model": model,
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text},
                             "content_filter_results": {"hate": {"filtered": False, "severity": "safe"}}}],
                "usage": usage,
                "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}],
            })
        base = {"id": "chatcmpl-azure1", "object": "chat.completion.chunk", "created": 1733300000, "model": model}
        events = [
            # Azure opens with its prompt filter's verdict: no choices.
            {"id": "", "object": "", "created": 0, "model": "", "choices": [],
             "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}]},
            {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
        ]
        for word in text.split(" "):
            events.append({**base, "choices": [{"index": 0, "delta": {"content": word + " "}, "finish_reason": None}]})
        events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if (seen.body.get("stream_options") or {}).get("include_usage"):
            events.append({**base, "choices": [], "usage": usage})
        h.sse(events, cut=BROKEN in prompt, done=True)

    return StandIn(handle)


# --- the Gemini API -------------------------------------------------------

GEMINI_KEY = "gemini-test-key"
GEMINI_USAGE = genai_types.GenerateContentResponseUsageMetadata(
    prompt_token_count=120, candidates_token_count=6, cached_content_token_count=100,
    thoughts_token_count=4, total_token_count=130)

# The top-level fields of a generateContent request, and the SDK type each
# must parse as (the types forbid unknown fields, so a misspelt key fails).
GEMINI_REQUEST = {
    "contents": None,
    "systemInstruction": genai_types.Content,
    "tools": genai_types.Tool,
    "toolConfig": genai_types.ToolConfig,
    "generationConfig": genai_types.GenerationConfig,
    "safetySettings": genai_types.SafetySetting,
    "cachedContent": None,
}


def check_gemini_request(body):
    """Parses a generateContent body with the SDK's own types; returns the
    problems found."""
    problems = [f"unknown field {k}" for k in body if k not in GEMINI_REQUEST]
    try:
        for content in body["contents"]:
            genai_types.Content.model_validate(content)
        for field, kind in GEMINI_REQUEST.items():
            if kind is None or field not in body:
                continue
            value = body[field]
            for item in value if isinstance(value, list) else [value]:
                kind.model_validate(item)
    except Exception as err:  # pydantic's ValidationError, KeyError
        problems.append(f"{type(err).__name__}: {err}")
    return problems


def dump(response):
    """An SDK object as the wire carries it: camelCase, nothing unset."""
    return response.model_dump(mode="json", by_alias=True, exclude_none=True)


def gemini():
    """The Gemini API's generateContent and streamGenerateContent (SSE) for
    any model, answered with objects built from the SDK's own types."""

    def handle(h, seen):
        path = seen.path
        if not path.startswith("/v1beta/models/") or ":" not in path:
            return h.reply(404, {"error": {"code": 404, "message": f"no such path {path}", "status": "NOT_FOUND"}})
        model, method = path[len("/v1beta/models/"):].rsplit(":", 1)
        if seen.headers.get("x-goog-api-key") != GEMINI_KEY:
            return h.reply(400, {"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                                           "status": "INVALID_ARGUMENT"}})
        problems = check_gemini_request(seen.body)
        if problems:
            return h.reply(400, {"error": {"code": 400, "message": "; ".join(problems), "status": "INVALID_ARGUMENT"}})
        prompt = last_user_text(seen.body["contents"])
        if THROTTLED in prompt:
            # At times Google wraps its error in an array.
            return h.reply(429, [{"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).",
                                            "status": "RESOURCE_EXHAUSTED"}}])
        declared = [d for tool in seen.body.get("tools", []) for d in tool.get("functionDeclarations", [])]
        answered = seen.body["contents"][-1]["parts"][0].get("functionResponse")
        if declared and not answered:
            parts = [genai_types.Part(function_call=genai_types.FunctionCall(
                name=declared[0]["name"], args={"city": "Paris"}), thought_signature=b"sig-1")]
        elif answered:
            parts = [genai_types.Part(text=f"The tool said {json.dumps(answered['response'])}")]
        else:
            parts = [genai_types.Part(text="Thinking about it.", thought=True),
                     genai_types.Part(text=f"Gemini answers: {prompt}")]
        if method == "generateContent":
            return h.reply(200, dump(genai_types.GenerateContentResponse(
                candidates=[genai_types.Candidate(content=genai_types.Content(role="model", parts=parts),
                                                  finish_reason=genai_types.FinishReason.STOP, index=0)],
                usage_metadata=GEMINI_USAGE, model_version=model, response_id="resp-1")))
        if method != "streamGenerateContent" or seen.query.get("alt") != "sse":
            return h.reply(400, {"error": {"code": 400, "message": f"bad method {method}", "status": "INVALID_ARGUMENT"}})
        events = []
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            words = part.text.split(" ") if part.text and not part.thought else [None]
            for j, word in enumerate(words):
                piece = part if word is None else genai_types.Part(text=word + ("" if j == len(words) - 1 else " "))
                final = last and j == len(words) - 1
                events.append(dump(genai_types.GenerateContentResponse(
                    candidates=[genai_types.Candidate(
                        content=genai_types.Content(role="model", parts=[piece]), index=0,
                        finish_reason=genai_types.FinishReason.STOP if final else None)],
                    usage_metadata=GEMINI_USAGE if final else None, model_version=model, response_id="resp-1")))
        h.sse(events, cut=BROKEN in prompt)

    return StandIn(handle)
