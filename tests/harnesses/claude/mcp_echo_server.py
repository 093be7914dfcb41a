"""A tiny stdio MCP server for the claude kind's tests: ``echo`` answers with its text and
whether ``ECHO_SECRET`` reached it; ``hidden`` exists to be disabled."""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("jigsecho")


@server.tool()
def echo(text: str = "ping") -> str:
    """Echo the text back."""
    return f"echo:{text} secret-set:{os.environ.get('ECHO_SECRET') == 'mcp-secret-value'}"


@server.tool()
def hidden() -> str:
    """A tool the descriptor disables."""
    return "should never be offered"


if __name__ == "__main__":
    server.run()
