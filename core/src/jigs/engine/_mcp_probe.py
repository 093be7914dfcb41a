"""Just-in-time MCP probes: prove each declared server answers a real tool call.

Agents misreport their own server lists, so availability is proven the way an agent would use
the server: start it (stdio, with the step's environment and the worktree as cwd) or connect to
it (HTTP), list its tools (the probe tool must be there), and call the probe tool (an error result
fails). Each phase has its own timeout; the core bounds all probes together. A failure names the
server, the phase, and the last lines of its stderr with declared and secret-looking values
redacted. The ``mcp`` SDK is imported only here, only when a descriptor declares servers.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from jigs.checks import Check, CheckFailure, CheckOk, CheckResult
from jigs.mcp import McpHttpServer, McpStdioServer
from jigs.policy._redact import redact, secret_values

__all__ = ["PHASE_TIMEOUT", "mcp_probe_checks", "probe_server", "resolve_server_env"]

#: Seconds each phase (start/connect, list tools, call the probe) may take.
PHASE_TIMEOUT = 10.0
_TAIL_LINES = 5


def resolve_server_env(
    server: McpStdioServer | McpHttpServer, env: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """Resolve the server's credential names against the step env: (child values, missing)."""
    missing = sorted(n for n in server.env_names() if n not in env)
    if isinstance(server, McpStdioServer):
        return {child: env[src] for child, src in server.env.items() if src in env}, missing
    headers = {h: env[src] for h, src in server.headers.items() if src in env}
    if server.bearer_token_env and server.bearer_token_env in env:
        headers["Authorization"] = f"Bearer {env[server.bearer_token_env]}"
    return headers, missing


def _tail(errlog: Any, secrets: list[str]) -> str:
    try:
        errlog.seek(0)
        lines = errlog.read().splitlines()[-_TAIL_LINES:]
    except (OSError, ValueError):
        return ""
    return redact("\n".join(line[:300] for line in lines), secrets)


def _error_text(result: Any) -> str:
    parts = []
    for item in getattr(result, "content", None) or []:
        text = getattr(item, "text", None)
        if isinstance(text, str):
            parts.append(text)
    return " ".join(parts)[:300] or "(no message)"


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def _session_probe(
    session: Any,
    server: McpStdioServer | McpHttpServer,
    phase: list[str],
    timeout: float,
    call: bool = True,
) -> CheckResult:
    phase[0] = "initialize"
    with anyio.fail_after(timeout):
        await session.initialize()
    phase[0] = "list tools"
    with anyio.fail_after(timeout):
        listed = await session.list_tools()
    names = sorted(tool.name for tool in listed.tools)
    if server.probe.tool not in names:
        return CheckFailure(
            reason=f"connected, but it exposes no tool {server.probe.tool!r} "
            f"(it exposes: {', '.join(names) or 'none'})",
            repair="name one of its tools as the probe, or fix the server",
        )
    if not call:  # the step's own tools: calling one could act; listing proves the server
        return CheckOk(f"{len(names)} tools listed")
    phase[0] = f"call {server.probe.tool}"
    with anyio.fail_after(timeout):
        result = await session.call_tool(server.probe.tool, dict(server.probe.arguments))
    if getattr(result, "is_error", False) or getattr(result, "isError", False):
        return CheckFailure(
            reason=f"answered its probe tool {server.probe.tool!r} with an error: "
            f"{_error_text(result)}",
            repair="choose a harmless probe call that succeeds, or fix the server",
        )
    return CheckOk(f"{len(names)} tools; probe {server.probe.tool!r} answered")


async def probe_server(
    name: str,
    server: McpStdioServer | McpHttpServer,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float = PHASE_TIMEOUT,
    private: frozenset[str] = frozenset(),
    call: bool = True,
) -> CheckResult:
    """Probe one server; never raises for a server fault (it returns a failure). ``timeout``
    bounds each phase; without ``call`` the probe tool is listed, not called. A stdio server
    gets the step env without the ``private`` names (the kind's keys, servers' credentials)."""
    values, missing = resolve_server_env(server, env)
    if missing:
        return CheckFailure(
            reason=f"needs {', '.join(missing)}, which is not set in the step's environment",
            repair=f"set {', '.join(missing)} in the environment the step runs in",
        )
    from mcp.client.session import ClientSession

    secrets = secret_values(env, values.values())
    phase = ["start" if isinstance(server, McpStdioServer) else "connect"]
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        try:
            if isinstance(server, McpStdioServer):
                from mcp.client.stdio import StdioServerParameters, stdio_client

                params = StdioServerParameters(
                    command=server.command,
                    args=list(server.args),
                    env={**{k: v for k, v in env.items() if k not in private}, **values},
                    cwd=cwd,
                )
                async with (
                    stdio_client(params, errlog=errlog) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    return await _session_probe(session, server, phase, timeout, call)
            else:
                import httpx2  # the mcp SDK's HTTP client: loaded with the SDK
                from mcp.client.streamable_http import streamable_http_client

                async with (
                    httpx2.AsyncClient(headers=values, timeout=timeout) as http,
                    streamable_http_client(server.url, http_client=http) as streams,
                    ClientSession(streams[0], streams[1]) as session,
                ):
                    return await _session_probe(session, server, phase, timeout, call)
        except Exception as exc:
            leaf = _leaf(exc)
            if isinstance(leaf, TimeoutError):
                reason = f"did not answer within {timeout:g}s ({phase[0]})"
            else:
                detail = redact(str(leaf), secrets)
                reason = f"failed at {phase[0]}: {type(leaf).__name__}: {detail}"
        tail = _tail(errlog, secrets)
    if tail:
        reason += f"; its stderr ended: {tail}"
    return CheckFailure(reason=reason, repair=f"make the MCP server {name!r} start and answer")


def mcp_probe_checks(
    servers: Mapping[str, McpStdioServer | McpHttpServer],
    *,
    cwd: Path,
    env: Mapping[str, str],
    private: frozenset[str] = frozenset(),
    listed_only: frozenset[str] = frozenset(),
) -> list[Check]:
    """One just-in-time check per declared server (id ``mcp.<name>``); see :func:`probe_server`
    for ``private``. The servers ``listed_only`` names are probed without calling a tool."""

    def make(name: str, server: McpStdioServer | McpHttpServer) -> Check:
        call = name not in listed_only

        async def run() -> CheckResult:
            return await probe_server(name, server, cwd=cwd, env=env, private=private, call=call)

        return Check(
            id=f"mcp.{name}", label=f"MCP server {name}", run=run, timeout=4 * PHASE_TIMEOUT
        )

    return [make(name, server) for name, server in servers.items()]
