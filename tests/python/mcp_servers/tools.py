"""A FastMCP server for the /mcp tests: a tool, a slow tool, one that
hangs, one that kills its own process, one that notes its cancellation,
one that reports progress, one that tells the trace context it was sent, a prompt and a resource. Run
it as `python tools.py stdio`, `python tools.py http PORT` (streamable HTTP
at /mcp) or `python tools.py sse PORT` (the older HTTP+SSE transport at
/sse)."""

import asyncio
import os
import pathlib
import sys

from mcp.server.fastmcp import Context, FastMCP

mcp = FastMCP("tools", host="127.0.0.1", port=int(sys.argv[2]) if len(sys.argv) > 2 else 0,
              streamable_http_path="/mcp")


@mcp.tool()
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


@mcp.tool()
async def slow_add(a: int, b: int, seconds: float = 0.3) -> int:
    """Adds two numbers, slowly (without holding up the server's other calls)."""
    await asyncio.sleep(seconds)
    return a + b


@mcp.tool()
async def hang() -> str:
    """Never answers (without holding up the server's other calls)."""
    await asyncio.sleep(3600)
    return "late"


@mcp.tool()
async def wait(marker: str, seconds: float = 30) -> str:
    """Writes `MARKER.started`, then waits; if the call is cancelled first,
    writes `cancelled` to the file `marker`."""
    pathlib.Path(marker + ".started").write_text("started")
    try:
        await asyncio.sleep(seconds)
    except BaseException:
        pathlib.Path(marker).write_text("cancelled")
        raise
    return "waited"


@mcp.tool()
async def steps(count: int, seconds: float, ctx: Context) -> str:
    """Takes `count` steps of `seconds` each, reporting progress after each."""
    for step in range(1, count + 1):
        await asyncio.sleep(seconds)
        await ctx.report_progress(step, count, f"step {step}")
    return f"{count} steps"


@mcp.tool()
def traceparent(ctx: Context) -> str:
    """The trace context the call carried in its `_meta` (empty without one)."""
    meta = ctx.request_context.meta
    return (meta.model_extra or {}).get("traceparent", "") if meta else ""


@mcp.tool()
def die() -> str:
    """Ends the server's process mid-call."""
    os._exit(3)


@mcp.tool()
def big(size: int) -> str:
    """An answer of `size` bytes."""
    return "x" * size


@mcp.prompt()
def greet(name: str) -> str:
    """A greeting."""
    return f"Say hello to {name}."


@mcp.resource("notes://today")
def today() -> str:
    """Today's note."""
    return "Buy milk."


if __name__ == "__main__":
    mcp.run(transport={"http": "streamable-http", "sse": "sse"}.get(sys.argv[1], "stdio"))
