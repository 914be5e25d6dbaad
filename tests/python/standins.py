"""Loopback stand-ins for managed clouds and provider APIs the tests cannot
reach: they speak each provider's wire as its own SDK writes and reads it,
record what they were sent, and fail on request in the provider's own error
shapes. Each test first checks a stand-in against the provider's SDK, so
what the gateway is tested against is what the SDK would meet."""

import json
import os
import secrets
import threading
import time
import urllib.parse
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.auth import jwt as google_jwt
from google.genai import types as genai_types

# Prompts that make a stand-in fail the way its provider does.
FILTERED = "please filter me"
THROTTLED = "please throttle me"
BROKEN = "please break the stream"


class Seen:
    """One request as a stand-in received it."""

    def __init__(self, method, path, query, headers, body, raw=b"", raw_path=""):
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        # The bytes and the path exactly as sent, for signatures.
        self.raw = raw
        self.raw_path = raw_path


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
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None  # a form, read by its handler
                seen = Seen(self.command, urllib.parse.unquote(url.path), dict(urllib.parse.parse_qsl(url.query)),
                            {k.lower(): v for k, v in self.headers.items()}, body, raw, url.path)
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

            def named_sse(self, events):
                """Named events (`event:` and `data:`), as Anthropic writes them."""
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                for name, data in events:
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()
                self.close_connection = True

            def frames(self, frames, cut=False):
                """AWS event-stream frames; `cut` ends the body in the middle
                of the last."""
                self.send_response(200)
                self.send_header("content-type", "application/vnd.amazon.eventstream")
                self.send_header("connection", "close")
                self.end_headers()
                for i, frame in enumerate(frames):
                    if cut and i == len(frames) - 1:
                        frame = frame[: len(frame) // 2]
                    self.wfile.write(frame)
                    self.wfile.flush()
                self.close_connection = True

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
        gemini_answer(h, seen, model, method)

    return StandIn(handle)


def gemini_answer(h, seen, model, method):
    """A Gemini model's answer (the Gemini API's and Vertex AI's alike)."""
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


# --- Vertex AI --------------------------------------------------------------

VERTEX_PROJECT = "switchyard-test"
VERTEX_LOCATION = "us-east5"
VERTEX_EMAIL = "gateway@switchyard-test.iam.gserviceaccount.com"
GOOGLE_TOKEN_AUDIENCE = "https://oauth2.googleapis.com/token"


class Vertex(StandIn):
    """Vertex AI's token endpoint, metadata server and model paths. Tokens
    go only to a JWT signed by the service account's key (checked with
    google-auth), last `expires_in` seconds, and are refused once `failing`
    is set; model calls need a token that has not expired."""

    def __init__(self, folder, expires_in=3600):
        self.expires_in = expires_in
        self.failing = False
        self.issued = {}
        self.token_requests = 0
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.key_id = "key-1"
        public = self.key.public_key().public_bytes(serialization.Encoding.PEM,
                                                    serialization.PublicFormat.SubjectPublicKeyInfo)
        super().__init__(lambda h, seen: self.handle(h, seen, public))
        self.key_file = os.path.join(folder, "service-account.json")
        with open(self.key_file, "w") as f:
            json.dump({
                "type": "service_account", "project_id": VERTEX_PROJECT, "private_key_id": self.key_id,
                "private_key": self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                      serialization.NoEncryption()).decode(),
                "client_email": VERTEX_EMAIL, "client_id": "1", "token_uri": self.url + "/token",
            }, f)

    def issue(self, h):
        self.token_requests += 1
        if self.failing:
            return h.reply(400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."})
        token = f"ya29.{secrets.token_urlsafe(24)}"
        self.issued[token] = time.time() + self.expires_in
        h.reply(200, {"access_token": token, "expires_in": self.expires_in, "token_type": "Bearer"})

    def handle(self, h, seen, public):
        if seen.path == "/token":
            form = dict(urllib.parse.parse_qsl(seen.raw.decode()))
            if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
                return h.reply(400, {"error": "unsupported_grant_type"})
            try:
                # google-auth writes Google's fixed audience; the gateway
                # addresses the token_uri itself. Either is the endpoint.
                claims = google_jwt.decode(form["assertion"], certs={self.key_id: public},
                                           audience=[self.url + "/token", GOOGLE_TOKEN_AUDIENCE])
            except Exception as err:
                return h.reply(400, {"error": "invalid_grant", "error_description": str(err)})
            if claims.get("iss") != VERTEX_EMAIL or "cloud-platform" not in claims.get("scope", ""):
                return h.reply(400, {"error": "invalid_scope"})
            return self.issue(h)
        if seen.path == "/computeMetadata/v1/instance/service-accounts/default/token":
            if seen.headers.get("metadata-flavor") != "Google":
                return h.reply(403, {"error": "missing Metadata-Flavor"})
            return self.issue(h)
        auth = seen.headers.get("authorization", "")
        token = auth.removeprefix("Bearer ")
        if self.issued.get(token, 0) < time.time():
            return h.reply(401, {"error": {"code": 401, "message": "Request had invalid authentication credentials.",
                                           "status": "UNAUTHENTICATED"}})
        prefix = f"/v1/projects/{VERTEX_PROJECT}/locations/{VERTEX_LOCATION}/publishers/"
        if not seen.path.startswith(prefix) or ":" not in seen.path:
            return h.reply(404, {"error": {"code": 404, "message": "not found", "status": "NOT_FOUND"}})
        publisher, rest = seen.path[len(prefix):].split("/models/", 1)
        model, method = rest.rsplit(":", 1)
        if publisher == "google":
            return gemini_answer(h, seen, model, method)
        if publisher == "anthropic":
            return claude_answer(h, seen, model, method)
        h.reply(404, {"error": {"code": 404, "message": f"no publisher {publisher}", "status": "NOT_FOUND"}})


def claude_answer(h, seen, model, method):
    """Anthropic's Messages on Vertex: the model in the path, the version
    in the body."""
    body = seen.body
    if "model" in body or not body.get("anthropic_version"):
        return h.reply(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                         "message": "model belongs in the path; anthropic_version in the body"}})
    prompt = last_user_text(body["messages"])
    if THROTTLED in prompt:
        return h.reply(429, [{"error": {"code": 429, "message": "Resource exhausted. Please try again later.",
                                        "status": "RESOURCE_EXHAUSTED"}}])
    text = f"Claude on Vertex answers: {prompt}"
    usage = {"input_tokens": 11, "output_tokens": 7, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
    message = {"id": "msg_vrtx_1", "type": "message", "role": "assistant", "model": model,
               "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
               "usage": usage}
    if method == "rawPredict":
        return h.reply(200, message)
    if method != "streamRawPredict":
        return h.reply(400, {"type": "error", "error": {"type": "invalid_request_error", "message": method}})
    events = [("message_start", {"type": "message_start", "message": {**message, "content": [], "stop_reason": None,
                                                                      "usage": {**usage, "output_tokens": 1}}}),
              ("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": {"type": "text", "text": ""}})]
    for word in text.split(" "):
        events.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "text_delta", "text": word + " "}}))
    events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
               ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                  "usage": {"output_tokens": 7}}),
               ("message_stop", {"type": "message_stop"})]
    h.named_sse(events)


# --- Amazon Bedrock ---------------------------------------------------------

AWS_REGION = "us-east-1"
AWS_KEYS = ("AKIDSWITCHYARDTEST", "swItchyardTestSecretKey/0123456789abcdefgh")
BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


def frame(headers, payload):
    """One AWS event-stream message, string headers only."""
    head = b"".join(bytes([len(n)]) + n.encode() + b"\x07" + len(v).to_bytes(2, "big") + v.encode()
                    for n, v in headers.items())
    total = 16 + len(head) + len(payload)
    prelude = total.to_bytes(4, "big") + len(head).to_bytes(4, "big")
    message = prelude + zlib.crc32(prelude).to_bytes(4, "big") + head + payload
    return message + zlib.crc32(message).to_bytes(4, "big")


def event(kind, body):
    return frame({":event-type": kind, ":content-type": "application/json", ":message-type": "event"},
                 json.dumps({**body, "p": "abcdefgh"}).encode())


def verify_sigv4(seen, keys):
    """Recomputes the request's signature with botocore's signer from what
    was sent (the signed headers, the path as sent, the body's bytes)."""
    auth = seen.headers.get("authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return "no SigV4 authorization"
    fields = dict(part.strip().split("=", 1) for part in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    access_key, date, region, service, _ = fields["Credential"].split("/")
    if access_key != keys[0] or service != "bedrock" or region != AWS_REGION:
        return f"signed for {fields['Credential']}"
    signed = fields["SignedHeaders"].split(";")
    request = AWSRequest(method=seen.method, url=f"http://{seen.headers['host']}{seen.raw_path}",
                         data=seen.raw, headers={name: seen.headers[name] for name in signed})
    request.context["timestamp"] = seen.headers["x-amz-date"]
    token = keys[2] if len(keys) > 2 else None
    signer = SigV4Auth(Credentials(keys[0], keys[1], token), "bedrock", AWS_REGION)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if expected != fields["Signature"]:
        return "signature does not match"
    if token and seen.headers.get("x-amz-security-token") != token:
        return "session token missing"
    return None


class Bedrock(StandIn):
    """Bedrock's runtime API: Converse and ConverseStream for any model id,
    every request's SigV4 signature checked with botocore's signer against
    `keys` (access key, secret, and session token when temporary); also
    STS's AssumeRoleWithWebIdentity at `/sts`, which hands out `role_keys`."""

    def __init__(self, keys=AWS_KEYS):
        self.keys = keys
        self.role_keys = ("ASIASWITCHYARDROLE", "roleSecretKey/abcdefghijklmnopqrstuvwxyz0123", "role-session-token")
        self.web_identity_token = None
        self.assumed = 0
        super().__init__(self.handle)

    def aws_error(self, h, status, kind, message, headers=()):
        h.reply(status, {"message": message},
                headers=[("x-amzn-errortype", f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"),
                         *headers])

    def handle(self, h, seen):
        if seen.path.rstrip("/") == "/sts":
            return self.sts(h, seen)
        keys = self.role_keys if self.web_identity_token else self.keys
        problem = verify_sigv4(seen, keys)
        if problem:
            return self.aws_error(h, 403, "InvalidSignatureException", problem)
        if not seen.path.startswith("/model/"):
            return self.aws_error(h, 404, "UnknownOperationException", seen.path)
        model, method = seen.path[len("/model/"):].rsplit("/", 1)
        body = seen.body
        prompt = last_user_text(body.get("messages", []))
        if "messages" not in body or any(m["role"] not in ("user", "assistant") for m in body["messages"]):
            return self.aws_error(h, 400, "ValidationException", "messages are malformed")
        roles = [m["role"] for m in body["messages"]]
        if any(a == b for a, b in zip(roles, roles[1:])):
            return self.aws_error(h, 400, "ValidationException",
                                  "A conversation must alternate between user and assistant roles.")
        if "please reject me" in prompt:
            return self.aws_error(h, 400, "ValidationException", "The provided model identifier is invalid.")
        if THROTTLED in prompt and method == "converse":
            return self.aws_error(h, 429, "ThrottlingException", "Too many requests, please wait before trying again.",
                                  headers=[("retry-after", "3")])
        tools = (body.get("toolConfig") or {}).get("tools", [])
        spec = next((t["toolSpec"] for t in tools if "toolSpec" in t), None)
        last = body["messages"][-1]["content"]
        answered = next((b["toolResult"] for b in last if "toolResult" in b), None)
        cached = any("cachePoint" in b for b in body.get("system", []))
        usage = {"inputTokens": 20, "outputTokens": 8, "totalTokens": 28 + (1500 if cached else 0)}
        if cached:
            usage.update(cacheReadInputTokens=1000, cacheWriteInputTokens=500)
        if spec and not answered:
            blocks, stop = [{"toolUse": {"toolUseId": "tooluse_1", "name": spec["name"], "input": {"city": "Oslo"}}}], "tool_use"
        elif answered:
            blocks, stop = [{"text": "The tool said " + json.dumps(answered["content"])}], "end_turn"
        else:
            blocks, stop = [{"text": f"Bedrock answers: {prompt}"}], "end_turn"
        if method == "converse":
            return h.reply(200, {"output": {"message": {"role": "assistant", "content": blocks}},
                                 "stopReason": stop, "usage": usage, "metrics": {"latencyMs": 120}})
        if method != "converse-stream":
            return self.aws_error(h, 404, "UnknownOperationException", method)
        frames = [event("messageStart", {"role": "assistant"})]
        for i, block in enumerate(blocks):
            if "toolUse" in block:
                use = block["toolUse"]
                frames.append(event("contentBlockStart", {"contentBlockIndex": i, "start": {
                    "toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}}))
                text = json.dumps(use["input"])
                for piece in (text[:5], text[5:]):
                    frames.append(event("contentBlockDelta", {"contentBlockIndex": i,
                                                              "delta": {"toolUse": {"input": piece}}}))
            else:
                for word in block["text"].split(" "):
                    frames.append(event("contentBlockDelta", {"contentBlockIndex": i, "delta": {"text": word + " "}}))
            frames.append(event("contentBlockStop", {"contentBlockIndex": i}))
        if THROTTLED in prompt:
            frames.append(frame({":exception-type": "throttlingException", ":content-type": "application/json",
                                 ":message-type": "exception"},
                                json.dumps({"message": "Too many tokens, please wait before trying again."}).encode()))
        else:
            frames.append(event("messageStop", {"stopReason": stop}))
            frames.append(event("metadata", {"usage": usage, "metrics": {"latencyMs": 120}}))
        h.frames(frames, cut=BROKEN in prompt)

    def sts(self, h, seen):
        form = dict(urllib.parse.parse_qsl(seen.raw.decode()))
        if form.get("Action") != "AssumeRoleWithWebIdentity" or form.get("WebIdentityToken") != self.web_identity_token:
            return h.reply(400, {"Error": "InvalidIdentityToken"})
        self.assumed += 1
        expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
        access, secret, token = self.role_keys
        xml = (f"<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>"
               f"<AccessKeyId>{access}</AccessKeyId><SecretAccessKey>{secret}</SecretAccessKey>"
               f"<SessionToken>{token}</SessionToken><Expiration>{expires}</Expiration>"
               f"</Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>").encode()
        h.send_response(200)
        h.send_header("content-type", "text/xml")
        h.send_header("content-length", str(len(xml)))
        h.end_headers()
        h.wfile.write(xml)
