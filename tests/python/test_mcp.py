"""/mcp, the MCP gateway, driven by the mcp SDK's own client over two FastMCP
servers behind it (one over stdio, started by the gateway; one over
streamable HTTP): the merged lists, calls, prompts and resources, a tool that
hangs, one that kills its server, an answer over the size bound, malformed
JSON-RPC, sessions, and each call's ledger row."""

import asyncio
import json
import os
import pathlib
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError

from conftest import serve

TOOLS = pathlib.Path(__file__).parent / "mcp_servers" / "tools.py"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port):
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)


@pytest.fixture(scope="module")
def remote():
    """The FastMCP server over streamable HTTP."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(TOOLS), "http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def gateway(remote):
    config = f"""
backends:
  sim:
    tier: small
    sim: {{preset: small}}
mcp:
  timeout_ms: 2000
  max_result_bytes: 100000
  servers:
    tools: {{command: ["{sys.executable}", "{TOOLS}", "stdio"]}}
    remote: {{url: "{remote}"}}
"""
    yield from serve(config)


def run(coro):
    return asyncio.run(coro)


async def with_session(gateway, work, headers=None):
    async with streamablehttp_client(gateway.url + "/mcp", headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await work(session)


def text(result):
    return "".join(c.text for c in result.content if c.type == "text")


def test_the_servers_tools_prompts_and_resources_as_one(gateway):
    async def work(session):
        tools = {t.name for t in (await session.list_tools()).tools}
        prompts = {p.name for p in (await session.list_prompts()).prompts}
        resources = {str(r.uri): r.name for r in (await session.list_resources()).resources}
        added = await session.call_tool("tools_add", {"a": 2, "b": 3})
        remote = await session.call_tool("remote_add", {"a": 40, "b": 2})
        prompt = await session.get_prompt("remote_greet", {"name": "Ada"})
        note = await session.read_resource("notes://today")
        return tools, prompts, resources, added, remote, prompt, note
    tools, prompts, resources, added, remote, prompt, note = run(with_session(gateway, work))
    assert {"tools_add", "tools_slow_add", "remote_add", "remote_hang"} <= tools
    assert {"tools_greet", "remote_greet"} <= prompts
    assert resources["notes://today"] in ("tools_today", "remote_today")
    assert text(added) == "5" and not added.isError
    assert text(remote) == "42"
    assert "Say hello to Ada." in prompt.messages[0].content.text
    assert note.contents[0].text == "Buy milk."


def test_a_hanging_tool_times_out_and_a_dying_server_is_an_error_result_then_comes_back(gateway):
    async def hang(session):
        with pytest.raises(McpError) as caught:
            await session.call_tool("remote_hang", {})
        return caught.value.error
    error = run(with_session(gateway, hang))
    assert "did not answer within 2000 ms" in error.message

    async def die(session):
        return await session.call_tool("tools_die", {})
    died = run(with_session(gateway, die))
    assert died.isError and "exited" in text(died)

    async def again(session):
        # Restarted with backoff: calls meanwhile wait, within their time.
        for _ in range(10):
            try:
                result = await session.call_tool("tools_add", {"a": 1, "b": 1})
            except McpError:
                continue
            if not result.isError:
                return result
        return result
    assert text(run(with_session(gateway, again))) == "2", "the stdio server was restarted"


def test_answers_past_the_bound_are_refused(gateway):
    async def work(session):
        small = await session.call_tool("remote_big", {"size": 1000})
        with pytest.raises(McpError) as caught:
            await session.call_tool("remote_big", {"size": 200000})
        return small, caught.value.error
    small, error = run(with_session(gateway, work))
    assert len(text(small)) == 1000
    assert "larger than 100000 bytes" in error.message


def post(gateway, body, headers=None, method="POST"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(gateway.url + "/mcp", data=data, method=method, headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def test_malformed_json_rpc_and_sessions(gateway):
    status, _, body = post(gateway, b"{not json")
    assert status == 400 and json.loads(body)["error"]["code"] == -32700
    status, _, body = post(gateway, {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}})
    assert status == 200 and json.loads(body)["error"]["code"] == -32601
    status, _, body = post(gateway, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert status == 400, "no session"
    status, _, body = post(gateway, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                           {"mcp-session-id": "nope"})
    assert status == 404
    status, headers, body = post(gateway, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
    session = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]
    assert json.loads(body)["result"]["protocolVersion"] == "2025-03-26"
    auth = {"mcp-session-id": session}
    status, _, body = post(gateway, {"jsonrpc": "2.0", "method": "notifications/initialized"}, auth)
    assert (status, body) == (202, b"")
    # 2025-03-26 takes batches: an invalid member fails alone.
    status, _, body = post(gateway, [{"jsonrpc": "2.0", "id": 2, "method": "ping"},
                                     {"jsonrpc": "1.0", "id": 3, "method": "ping"},
                                     {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                                      "params": {"name": "nobody_tool", "arguments": {}}}], auth)
    answers = {a["id"]: a for a in json.loads(body)}
    assert answers[2]["result"] == {}
    assert answers[3]["error"]["code"] == -32600
    assert answers[4]["error"]["code"] == -32602
    status, _, _ = post(gateway, None, auth, method="GET")
    assert status == 405
    status, _, _ = post(gateway, None, auth, method="DELETE")
    assert status == 200
    status, _, _ = post(gateway, {"jsonrpc": "2.0", "id": 5, "method": "ping"}, auth)
    assert status == 404, "the session ended"


def test_every_tool_call_is_a_ledger_row_with_its_time(gateway):
    async def work(session):
        await session.call_tool("tools_slow_add", {"a": 1, "b": 2, "seconds": 0.3})
    run(with_session(gateway, work, headers={"x-session-id": "agent-7"}))
    rows = []
    for _ in range(50):
        with sqlite3.connect(os.path.join(gateway.dir, "switchyard-ledger.db")) as ledger:
            rows = ledger.execute("SELECT backend, tool, duration_ms, status, session, bytes_in, bytes_out FROM requests "
                                  "WHERE kind = 'tool' AND tool = 'slow_add'").fetchall()
        if rows:
            break
        time.sleep(0.1)
    server, tool, ms, status, session, bytes_in, bytes_out = rows[-1]
    assert (server, tool, status, session) == ("tools", "slow_add", "ok", "agent-7")
    assert ms >= 300
    assert bytes_in > 0 and bytes_out > 0
