"""A FastMCP server for the /mcp tests: a tool, a slow tool, one that
hangs, one that kills its own process, a prompt and a resource. Run it as
`python tools.py stdio`, or `python tools.py http PORT`."""

import asyncio
import os
import sys

from mcp.server.fastmcp import FastMCP

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
    mcp.run(transport="streamable-http" if sys.argv[1:2] == ["http"] else "stdio")
