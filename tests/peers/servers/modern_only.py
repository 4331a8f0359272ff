"""A Python SDK (mcp 2.3) server that speaks only MCP 2026-07-28 over stdio: `initialize`
gets UNSUPPORTED_PROTOCOL_VERSION, `server/discover` and per-request `_meta` work. The SDK
serves both eras by default; its modern loop (`mcp.server.runner._serve_modern_stream`,
private) is the modern-only server the SDK itself has, so a change there shows up here.
"""

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.runner import _serve_modern_stream
from mcp.server.stdio import stdio_server

app = MCPServer("modern-only")


@app.tool()
def shout(text: str) -> str:
    """Return the text in capitals."""
    return text.upper()


async def main() -> None:
    low = app._lowlevel_server
    async with stdio_server() as (read_stream, write_stream):
        async with low.lifespan(low) as state:
            await _serve_modern_stream(low, read_stream, write_stream, lifespan_state=state, raise_exceptions=False)


if __name__ == "__main__":
    anyio.run(main)
