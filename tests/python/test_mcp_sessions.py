"""An agent's task seen whole: model calls (the openai SDK) and tool calls
(the mcp SDK's client, through /mcp to a FastMCP server) in one session, and
the sessions report (`/admin/sessions` and `switchyard sessions`) giving
measured tool time apart from model time; each tool call an OpenTelemetry
CLIENT span in the caller's trace, read by a collector on loopback with
OpenTelemetry's own protobuf classes."""

import http.server
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import openai
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from conftest import BINARY, serve
from test_mcp import TOOLS, run, text, with_session

AGENT_KEY = "sk-agent-key"
OTHER_KEY = "sk-other-key"
ADMIN_KEY = "sk-admin-key"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


def key_hash(key):
    return subprocess.run([str(BINARY), "key-hash", key], capture_output=True, text=True, check=True).stdout.strip()


class Collector(http.server.BaseHTTPRequestHandler):
    """OTLP/HTTP: `POST /v1/traces` with an ExportTraceServiceRequest."""
    spans = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["content-length"]))
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                Collector.spans.extend(scope.spans)
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def collector():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def gateway(collector, tmp_path_factory):
    ledger = tmp_path_factory.mktemp("ledger") / "ledger.db"
    config = f"""
backends:
  sim:
    tier: small
    sim: {{preset: small, base_ttft_ms: 40, decode_tokens_per_s: 2000, jitter: 0}}
ledger: {{path: "{ledger}"}}
auth:
  admin_key_hash: "{key_hash(ADMIN_KEY)}"
  keys:
    - {{name: agent, hash: "{key_hash(AGENT_KEY)}", mcp: {{servers: [tools]}}}}
    - {{name: other, hash: "{key_hash(OTHER_KEY)}"}}
telemetry:
  otlp: {{endpoint: "{collector}", timeout_ms: 2000}}
mcp:
  timeout_ms: 5000
  servers:
    tools: {{command: ["{sys.executable}", "{TOOLS}", "stdio"]}}
"""
    for gateway in serve(config):
        gateway.config = config
        gateway.ledger = str(ledger)
        yield gateway


def admin_sessions(gateway):
    request = urllib.request.Request(gateway.url + "/admin/sessions?since=1h",
                                     headers={"authorization": f"Bearer {ADMIN_KEY}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def session_line(report, session):
    return next((s for s in report["sessions"] if s["session"] == session), None)


def test_measured_tool_time_in_the_sessions_report_and_spans_in_the_callers_trace(gateway):
    headers = {"x-session-id": "task-9", "authorization": f"Bearer {AGENT_KEY}"}
    model = openai.OpenAI(base_url=gateway.url + "/v1", api_key=AGENT_KEY,
                          default_headers={"x-session-id": "task-9"})

    def ask(prompt):
        model.chat.completions.create(model="sim", max_tokens=20,
                                      messages=[{"role": "user", "content": prompt}])

    async def tools(session, names):
        results = []
        for name, arguments in names:
            results.append(await session.call_tool(name, arguments))
        return results

    # The agent's loop: an answer, two tools one after the other (the
    # second needed nothing from the first), an answer, one more tool, the
    # last answer.
    ask("plan")
    first = run(with_session(gateway, lambda s: tools(s, [
        ("tools_slow_add", {"a": 1, "b": 2, "seconds": 0.3}),
        ("tools_slow_add", {"a": 3, "b": 4, "seconds": 0.2})]), headers={**headers, "traceparent": TRACEPARENT}))
    ask("next")
    second = run(with_session(gateway, lambda s: tools(s, [("tools_traceparent", {})]),
                              headers={**headers, "traceparent": TRACEPARENT}))
    ask("done")
    assert [text(r) for r in first] == ["3", "7"]

    line = None
    for _ in range(100):
        line = session_line(admin_sessions(gateway), "task-9")
        if line and line["calls"] == 3 and line["tool_calls"] == 3:
            break
        time.sleep(0.1)
    assert line and line["calls"] == 3 and line["tool_calls"] == 3, line
    assert line["key"] == "agent"
    slow = line["tools"]["tools_slow_add"]
    assert slow["calls"] == 2 and slow["ms"] >= 500, slow
    assert line["tools"]["tools_traceparent"]["calls"] == 1
    assert line["tool_ms"] == pytest.approx(sum(t["ms"] for t in line["tools"].values()))
    # The two slow_adds ran back to back with no answer between: the second
    # (the shorter, 200 ms) could have run beside the first.
    assert line["back_to_back_tool_calls"] == 1
    assert line["overlappable_ms"] >= 200
    # Model time, tool time and the rest fill the task's wall time.
    assert line["model_ms"] + line["tool_ms"] + line["gap_ms"] == pytest.approx(line["wall_ms"], abs=1.0)

    # `switchyard sessions` reads the same ledger and says the same.
    config = os.path.join(gateway.config_folder, "config.yaml")
    out = subprocess.run([str(BINARY), "sessions", "--config", config, "--since", "1h", "--format", "json"],
                         capture_output=True, text=True, check=True).stdout
    cli = session_line(json.loads(out), "task-9")
    assert cli["tool_ms"] == pytest.approx(line["tool_ms"]) and cli["tools"] == line["tools"]
    table = subprocess.run([str(BINARY), "sessions", "--config", config, "--since", "1h"],
                           capture_output=True, text=True, check=True).stdout
    header, row = table.splitlines()[0].split(), next(l for l in table.splitlines() if l.startswith("task-9")).split()
    cells = dict(zip(header, row))
    assert (cells["tool_calls"], cells["back_to_back"]) == ("3", "1")
    assert float(cells["tool_s"]) == pytest.approx(line["tool_ms"] / 1000, abs=0.001)

    # Each tool call is a CLIENT span in the caller's trace, and the call
    # carried that span's context to the tool server.
    spans = []
    for _ in range(100):
        # By span id: an export retried after a timeout may come twice.
        spans = list({s.span_id: s for s in Collector.spans if s.name.startswith("execute_tool ")}.values())
        if len(spans) >= 3:
            break
        time.sleep(0.1)
    assert len(spans) == 3, [s.name for s in Collector.spans]
    attributes = lambda span: {a.key: a.value.string_value for a in span.attributes}
    traced = next(s for s in spans if s.name == "execute_tool tools_traceparent")
    assert traced.kind == Span.SPAN_KIND_CLIENT
    assert traced.trace_id.hex() == TRACE_ID
    found = attributes(traced)
    assert found["gen_ai.operation.name"] == "execute_tool"
    assert found["gen_ai.tool.name"] == "tools_traceparent"
    assert found["mcp.method.name"] == "tools/call"
    assert found["switchyard.mcp.protocol_version"] and found["switchyard.mcp.session_id"]
    assert found["network.transport"] == "pipe"
    assert (found["switchyard.mcp.server"], found["switchyard.session"]) == ("tools", "task-9")
    sent = text(second[0]).split("-")
    assert sent[1] == TRACE_ID and sent[2] == traced.span_id.hex(), "the server got the span's own context"


def test_a_session_is_its_keys_alone(gateway):
    """Another key cannot use (or end) a key's MCP session."""
    def post(body, key, session=None):
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                   "authorization": f"Bearer {key}"}
        if session:
            headers["mcp-session-id"] = session
        request = urllib.request.Request(gateway.url + "/mcp", data=json.dumps(body).encode(), headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.headers.get("mcp-session-id")
        except urllib.error.HTTPError as err:
            return err.code, None
    status, session = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}, AGENT_KEY)
    assert status == 200 and session
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    assert post(ping, OTHER_KEY, session)[0] == 404
    assert post(ping, AGENT_KEY, session)[0] == 200
