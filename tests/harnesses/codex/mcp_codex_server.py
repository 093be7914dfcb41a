"""A tiny stdio MCP server for the codex kind's tests.

``lookup`` answers with its key and whether ``LOOKUP_TOKEN`` (a renamed step credential) reached
it; ``forbidden`` exists to be disabled by the descriptor.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("codexlookup")


@server.tool()
def lookup(key: str = "ping") -> str:
    """Look a key up."""
    return f"value-of-{key} token-ok:{os.environ.get('LOOKUP_TOKEN') == 'mcp-token-value-77'}"


@server.tool()
def forbidden() -> str:
    """A tool the descriptor disables."""
    return "must never be offered"


if __name__ == "__main__":
    server.run()
