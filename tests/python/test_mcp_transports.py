"""/mcp over every kind of upstream: npm's @modelcontextprotocol/server-everything
(over stdio, started by the gateway), and FastMCP over stdio, streamable HTTP
and the older HTTP+SSE transport; progress relayed as it comes, from each;
and cancellation, by the caller or by the gateway's deadline, carried to
each server."""

import http.client
import json
import os
import pathlib
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

import pytest
from mcp.shared.exceptions import McpError

from conftest import serve
from test_mcp import TOOLS, free_port, post, run, text, wait_for_port, with_session

EVERYTHING = pathlib.Path(os.environ.get(
    "MCP_SERVER_EVERYTHING",
    pathlib.Path.home() / ".cache/switchyard/npm-mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js"))


@pytest.fixture(scope="module")
def servers():
    """FastMCP over streamable HTTP and over HTTP+SSE, each its own process."""
    ports = {"http": free_port(), "sse": free_port()}
    procs = [subprocess.Popen([sys.executable, str(TOOLS), kind, str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for kind, port in ports.items()]
    for port in ports.values():
        wait_for_port(port)
    yield {"http": f"http://127.0.0.1:{ports['http']}/mcp", "sse": f"http://127.0.0.1:{ports['sse']}/sse"}
    for proc in procs:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def gateway(servers):
    if not EVERYTHING.exists():
        pytest.fail(f"{EVERYTHING} is missing: scripts/test.sh installs it from npm (or set MCP_SERVER_EVERYTHING)")
    config = f"""
backends:
  sim:
    tier: small
    sim: {{preset: small}}
mcp:
  timeout_ms: 3000
  servers:
    everything: {{command: ["node", "{EVERYTHING}", "stdio"]}}
    tools: {{command: ["{sys.executable}", "{TOOLS}", "stdio"]}}
    remote: {{url: "{servers['http']}"}}
    old: {{url: "{servers['sse']}", transport: sse}}
"""
    yield from serve(config)


def test_server_everything_behind_the_gateway(gateway):
    async def work(session):
        tools = {t.name for t in (await session.list_tools()).tools}
        prompts = {p.name for p in (await session.list_prompts()).prompts}
        resources = {str(r.uri) for r in (await session.list_resources()).resources}
        echo = await session.call_tool("everything_echo", {"message": "through the gateway"})
        total = await session.call_tool("everything_get-sum", {"a": 2, "b": 3})
        # It notifies progress only to a caller that asks (see below).
        long = await session.call_tool("everything_trigger-long-running-operation", {"duration": 0.4, "steps": 2})
        prompt = await session.get_prompt("everything_simple-prompt")
        doc = await session.read_resource("demo://resource/static/document/features.md")
        return tools, prompts, resources, echo, total, long, prompt, doc
    tools, prompts, resources, echo, total, long, prompt, doc = run(with_session(gateway, work))
    assert {"everything_echo", "everything_get-sum", "tools_add", "remote_add", "old_add"} <= tools
    assert "everything_simple-prompt" in prompts
    assert "demo://resource/static/document/features.md" in resources
    assert text(echo) == "Echo: through the gateway"
    assert text(total) == "The sum of 2 and 3 is 5."
    assert "Long running operation completed" in text(long)
    assert prompt.messages[0].content.text == "This is a simple prompt without arguments."
    assert doc.contents[0].text.startswith("# Everything Server - Features")


def test_the_older_sse_transport(gateway):
    async def work(session):
        added = await session.call_tool("old_add", {"a": 20, "b": 22})
        slow = await session.call_tool("old_slow_add", {"a": 1, "b": 2, "seconds": 0.1})
        note = await session.read_resource("notes://today")
        return added, slow, note
    added, slow, note = run(with_session(gateway, work))
    assert text(added) == "42" and text(slow) == "3"
    assert note.contents[0].text == "Buy milk."


@pytest.mark.parametrize("server", ["everything", "tools", "remote", "old"])
def test_progress_is_relayed_as_it_comes(gateway, server):
    """A call with a progress callback (the SDK sends a progressToken and
    takes SSE) gets the server's progress under its own token before the
    answer, over every transport."""
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total, time.monotonic()))

    name, arguments = (("everything_trigger-long-running-operation", {"duration": 1.8, "steps": 3})
                       if server == "everything" else (f"{server}_steps", {"count": 3, "seconds": 0.6}))

    async def work(session):
        result = await session.call_tool(name, arguments, progress_callback=on_progress)
        return result, time.monotonic()
    result, answered = run(with_session(gateway, work))
    assert not result.isError, text(result)
    assert [(p, t) for p, t, _ in seen] == [(1, 3), (2, 3), (3, 3)], seen
    # Steps of 0.6 s: the first came about 1.2 s before the answer.
    assert seen[0][2] < answered - 0.6, "the first step came as it happened, not with the answer"


def initialize(gateway):
    status, headers, body = post(gateway, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
    assert status == 200, body
    session = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]
    post(gateway, {"jsonrpc": "2.0", "method": "notifications/initialized"}, {"mcp-session-id": session})
    return {"mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}


def until(check, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    return check()


def cancelled_rows(gateway, server):
    with sqlite3.connect(os.path.join(gateway.dir, "switchyard-ledger.db")) as ledger:
        return ledger.execute("SELECT duration_ms FROM requests WHERE kind = 'tool' AND backend = ? "
                              "AND tool = 'wait' AND status = 'cancelled'", (server,)).fetchall()


@pytest.mark.parametrize("server", ["tools", "remote", "old"])
def test_a_cancelled_call_is_cancelled_at_its_server(gateway, server):
    """The caller's notifications/cancelled stops its call at once and is
    carried to the server (over stdio, streamable HTTP and HTTP+SSE alike),
    whose tool sees the cancellation."""
    auth = initialize(gateway)
    marker = pathlib.Path(tempfile.mkdtemp()) / "cancelled"
    answer = {}

    def call():
        answer["at"] = post(gateway, {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": f"{server}_wait", "arguments": {"marker": str(marker), "seconds": 30}}}, auth)
    thread = threading.Thread(target=call)
    thread.start()
    assert until(pathlib.Path(str(marker) + ".started").exists), "the tool began"
    cancelled = time.monotonic()
    status, _, body = post(gateway, {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                     "params": {"requestId": 7, "reason": "the user pressed Esc"}}, auth)
    assert (status, body) == (202, b"")
    thread.join(timeout=10)
    # The deadline is 3 s: an answer well before it came from the cancel.
    assert time.monotonic() - cancelled < 2.0, "the call stopped when cancelled, not at the deadline"
    status, _, body = answer["at"]
    assert status == 200 and json.loads(body)["error"]["code"] == -32800
    assert until(lambda: marker.exists() and marker.read_text() == "cancelled"), \
        "the server's tool saw the cancellation"
    rows = until(lambda: cancelled_rows(gateway, server))
    assert len(rows) == 1, rows


def test_a_call_past_the_deadline_is_cancelled_at_its_server_too(gateway):
    marker = pathlib.Path(tempfile.mkdtemp()) / "cancelled"

    async def work(session):
        with pytest.raises(McpError) as caught:
            await session.call_tool("tools_wait", {"marker": str(marker), "seconds": 30})
        return caught.value.error
    error = run(with_session(gateway, work))
    assert "did not answer within 3000 ms" in error.message
    assert until(lambda: marker.exists() and marker.read_text() == "cancelled"), "the server was told to stop"


def test_a_caller_that_leaves_mid_call_has_it_cancelled_and_recorded(gateway):
    """The caller's connection closes during a call: the call is cancelled
    at its server and still has its ledger row."""
    auth = initialize(gateway)
    before = len(cancelled_rows(gateway, "old"))
    marker = pathlib.Path(tempfile.mkdtemp()) / "cancelled"
    host, port = gateway.url.removeprefix("http://").split(":")
    body = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "old_wait", "arguments": {"marker": str(marker), "seconds": 30}}})
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("POST", "/mcp", body, {"content-type": "application/json",
                                               "accept": "application/json, text/event-stream", **auth})
    assert until(pathlib.Path(str(marker) + ".started").exists), "the tool began"
    connection.close()
    assert until(lambda: marker.exists() and marker.read_text() == "cancelled"), \
        "the server was told to stop"
    assert until(lambda: len(cancelled_rows(gateway, "old")) > before), "the call has its row"
