"""The step's MCP servers in the shape of Pi's built-in MCP support (Pi 1.6+).

Pi reads MCP servers from ``mcp.json`` in its agent dir and, in trusted projects only, from
``.pi/mcp.json``. jigs runs Pi with a private agent dir (``PI_CODING_AGENT_DIR``), no project
trust (``-na``) and no extension discovery (``-ne``), and loads only the built-in MCP extension
(``-e builtin:mcp``) when the step declares servers; so the ``mcp.json`` written here is the
agent's whole MCP universe. With no servers declared, Pi runs with ``--no-mcp``.

What the file holds:

- credentials as Pi's environment references (``"${NAME}"``), never their values: Pi resolves
  them from its own environment, where the core put the step-side variables the descriptor names;
- ``exposure: "direct"`` for every server, so the model sees the tools as ordinary tools (no
  codemode or tool search, which ``-ne`` leaves unloaded), and ``autoEnableCodemode: false``;
- the variables in ``hidden_env`` (the model key's name) set to ``""`` in every stdio server's
  environment unless the server declares that child variable itself: Pi starts stdio servers
  with its own environment plus the entry's ``env``, and jigs keeps the model key from the
  agent's tools (the shell tool unsets it the same way);
- each ``disabled_tools`` entry as ``toolExposure: "hidden"`` (registered, unreachable); the
  harness also passes the Pi tool names to ``--exclude-tools``.

A descriptor ``tools`` allowlist restricts Pi's own tools; the declared servers' tools stay
available (:func:`allowed_tools` adds ``mcp__<server>__*`` for each). Pi 1.6 documents that
``--tools`` keeps MCP tools, but in a ``--mode json`` run an allowlist without ``mcp__`` entries
dropped them, so jigs names them explicitly.

Nothing here runs a command: jigs never writes a value Pi would read as ``!command``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from jigs.mcp import McpHttpServer, McpStdioServer

__all__ = ["allowed_tools", "excluded_tools", "mcp_json", "pi_tool_name"]

_NOT_NAME = re.compile(r"[^A-Za-z0-9_]")


def _ref(name: str) -> str:
    return "${" + name + "}"


def pi_tool_name(server: str, tool: str) -> str:
    """The name Pi gives a server's tool: ``mcp__<server>__<tool>``, every character other than
    letters, digits and ``_`` replaced by ``_``."""
    return f"mcp__{_NOT_NAME.sub('_', server)}__{_NOT_NAME.sub('_', tool)}"


def _entry(server: McpStdioServer | McpHttpServer, hidden_env: Collection[str]) -> dict[str, Any]:
    entry: dict[str, Any]
    if isinstance(server, McpStdioServer):
        entry = {"command": server.command, "args": list(server.args)}
        env = {name: "" for name in sorted(hidden_env) if name not in server.env}
        env.update({child: _ref(source) for child, source in server.env.items()})
        if env:
            entry["env"] = env
    else:
        headers = {header: _ref(source) for header, source in server.headers.items()}
        if server.bearer_token_env:
            headers["Authorization"] = f"Bearer {_ref(server.bearer_token_env)}"
        entry = {"type": "http", "url": server.url}
        if headers:
            entry["headers"] = headers
    entry["exposure"] = "direct"
    if server.disabled_tools:
        entry["toolExposure"] = {tool: "hidden" for tool in server.disabled_tools}
    return entry


def mcp_json(
    servers: Mapping[str, McpStdioServer | McpHttpServer], *, hidden_env: Collection[str] = ()
) -> dict[str, Any]:
    """Pi's ``mcp.json`` for ``servers`` (credential names only); ``hidden_env`` names variables
    stdio servers get empty instead of inheriting them from Pi."""
    return {
        "autoEnableCodemode": False,
        "mcpServers": {name: _entry(server, hidden_env) for name, server in servers.items()},
    }


def excluded_tools(servers: Mapping[str, McpStdioServer | McpHttpServer]) -> list[str]:
    """Pi tool names of every server's ``disabled_tools`` (for ``--exclude-tools``)."""
    return [
        pi_tool_name(name, tool)
        for name, server in servers.items()
        for tool in server.disabled_tools
    ]


def allowed_tools(
    tools: Sequence[str], servers: Mapping[str, McpStdioServer | McpHttpServer]
) -> list[str]:
    """The ``--tools`` entries for a descriptor allowlist plus every declared server's tools.

    Entries that all start with ``+`` or ``-`` change Pi's defaults (which hold the MCP tools)
    rather than replace them, and take no patterns: those are returned unchanged."""
    if tools and all(t.startswith(("+", "-")) for t in tools):
        return list(tools)
    return [*tools, *(f"mcp__{_NOT_NAME.sub('_', name)}__*" for name in servers)]
