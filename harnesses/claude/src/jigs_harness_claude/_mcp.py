"""The step's MCP servers in Claude Code's ``--mcp-config`` shape, credentials resolved.

The result is the agent's whole MCP universe (jigs always adds ``--strict-mcp-config``): an empty
descriptor list still yields ``{"mcpServers": {}}``. Credential values come from the agent's
environment by the names the descriptor declares; a missing one raises
:class:`DescriptorError` naming the variable (the MCP probe checks catch it earlier; this is
the last line).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jigs.errors import DescriptorError
from jigs.mcp import McpHttpServer, McpStdioServer

__all__ = ["disallowed_mcp_tools", "mcp_config"]


def _value(env: Mapping[str, str], name: str, server: str) -> str:
    value = env.get(name)
    if value is None:
        raise DescriptorError(
            f"MCP server {server!r} needs {name}, which is not set in the step's environment; "
            f"set it where the service runs",
            kind="claude",
            key="mcp_servers",
        )
    return value


def mcp_config(
    servers: Mapping[str, McpStdioServer | McpHttpServer], env: Mapping[str, str]
) -> dict[str, Any]:
    """``{"mcpServers": {...}}`` for ``servers`` with every credential name resolved in ``env``."""
    out: dict[str, Any] = {}
    for name, server in servers.items():
        if isinstance(server, McpStdioServer):
            out[name] = {
                "type": "stdio",
                "command": server.command,
                "args": list(server.args),
                "env": {child: _value(env, src, name) for child, src in server.env.items()},
            }
        else:
            headers = {h: _value(env, src, name) for h, src in server.headers.items()}
            if server.bearer_token_env:
                headers["Authorization"] = f"Bearer {_value(env, server.bearer_token_env, name)}"
            out[name] = {"type": "http", "url": server.url, "headers": headers}
    return {"mcpServers": out}


def disallowed_mcp_tools(servers: Mapping[str, McpStdioServer | McpHttpServer]) -> list[str]:
    """Claude Code tool names for every server's ``disabled_tools``."""
    return [
        f"mcp__{name}__{tool}" for name, server in servers.items() for tool in server.disabled_tools
    ]
