"""A small MCP server for cairn's tests, written with the official Python SDK.

    python py_server.py stdio
    python py_server.py http    # binds 127.0.0.1 on a free port, prints "PORT <n>", serves /mcp

Environment:
    CAIRN_TEST_MCP_TOOLS=N   adds N numbered tools (tool_0 ... tool_N-1)
    CAIRN_TEST_MCP_MARKS=DIR where `slow` writes "started", and "cancelled" when a client cancels it
"""

import os
import socket
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("cairn-test-server", version="1.0")


def mark(name: str) -> None:
    """Writes the file `name` in CAIRN_TEST_MCP_MARKS, when set."""
    marks = os.environ.get("CAIRN_TEST_MCP_MARKS")
    if marks:
        with open(os.path.join(marks, name), "w") as f:
            f.write(name)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
def wipe(target: str) -> str:
    """Pretend to delete everything in target."""
    return f"wiped {target}"


@server.tool()
def pid() -> str:
    """This server's process id."""
    return str(os.getpid())


@server.tool()
def read_file(path: str) -> str:
    """The text of a file, or why it cannot be read (the sandbox test reads
    inside and outside the workspace)."""
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        return f"cannot read: {e.strerror}"


@server.tool()
def env(name: str) -> str:
    """The value of an environment variable in this server, or <unset>."""
    return os.environ.get(name, "<unset>")


@server.tool()
def header(name: str, ctx: Context) -> str:
    """The value of an HTTP request header this call came with, or <none>."""
    return (ctx.headers or {}).get(name.lower(), "<none>")


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer; records its start and a cancellation."""
    mark("started")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        mark("cancelled")
        raise
    return f"slept {seconds}s"


@server.tool()
async def steps(count: int, pause: float, ctx: Context) -> str:
    """Report progress `count` times, `pause` seconds apart, then answer."""
    for i in range(count):
        await ctx.report_progress(i + 1, count, f"step {i + 1}")
        await anyio.sleep(pause)
    return f"{count} steps done"


@server.tool()
def big(chars: int) -> str:
    """A text of `chars` characters."""
    return "x" * chars


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("it broke on purpose")


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `added` and announce that the tool list changed."""

    def added() -> str:
        """A tool that appeared later."""
        return "I was added"

    server.add_tool(added, name="added")
    await ctx.session.send_tool_list_changed()
    await ctx.notify_tools_changed()
    return "grown"


def numbered_tool(i: int):
    """Tool number `i`, which repeats its argument."""

    def numbered(x: str = "") -> str:
        return f"tool {i}: {x}"

    return numbered


for i in range(int(os.environ.get("CAIRN_TEST_MCP_TOOLS", "0"))):
    server.add_tool(
        numbered_tool(i), name=f"tool_{i}", description=f"Numbered test tool {i}, which repeats x."
    )


@server.resource("memo://greeting", name="greeting", mime_type="text/plain")
def greeting() -> str:
    """A greeting kept as a resource."""
    return "hello from a resource"


@server.prompt()
def summarize(topic: str) -> str:
    """Ask for a summary of a topic."""
    return f"Summarize {topic} in one line."


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        server.run("stdio")
        return
    import logging

    import uvicorn

    # The SDK logs every session at INFO; the tests read only failures.
    logging.getLogger("mcp").setLevel(logging.WARNING)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    app = server.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning")
    anyio.run(uvicorn.Server(config).serve, [sock])


if __name__ == "__main__":
    main()
