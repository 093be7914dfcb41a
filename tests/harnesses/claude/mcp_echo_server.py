"""A tiny stdio MCP server for the claude kind's tests: ``echo`` answers with its text, whether
``ECHO_SECRET`` reached it and whether Claude Code's model key variables did (they must not);
``hidden`` exists to be disabled."""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("jigsecho")


@server.tool()
def echo(text: str = "ping") -> str:
    """Echo the text back."""
    secret = os.environ.get("ECHO_SECRET") == "mcp-secret-value"
    model_key = bool({"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"} & set(os.environ))
    return f"echo:{text} secret-set:{secret} model-key-set:{model_key}"


@server.tool()
def hidden() -> str:
    """A tool the descriptor disables."""
    return "should never be offered"


if __name__ == "__main__":
    server.run()
