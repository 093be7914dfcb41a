"""A small JSON-RPC client for ``codex app-server`` over stdio (one JSON object per line, no
``"jsonrpc"`` field).

It has no background task: whoever waits reads the lines itself, one reader at a time (the core's
engine runs one turn at a time). While reading it answers each server->client request at once
through ``on_request`` (an unhandled one gets a JSON-RPC error, so the server never blocks on
jigs) and queues the notifications that arrive while a response is awaited. A closed stdout is
:class:`AgentCrashedError` (so is a last line cut short by a server that then exits non-zero), a
line that is not a JSON object :class:`AgentOutputError`, a JSON-RPC error
:class:`AppServerRpcError`. Only :meth:`AppServer.request` has a deadline of its own (for
start-up); the engine applies ``idle_timeout`` / ``turn_timeout`` around a turn's reads.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from jigs.errors import AgentCrashedError, AgentOutputError, AgentTimeoutError, AgentTurnError
from jigs.plugin.tools import decode_line
from jigs.processes import ManagedProcess

__all__ = ["AppServer", "AppServerRpcError", "NotHandled", "RequestHandler"]

#: ``on_request(method, params) -> result``; raise :class:`NotHandled` for "not handled".
RequestHandler = Callable[[str, Any], Awaitable[Any]]


class NotHandled(Exception):
    """Raised by a request handler for a server request it does not handle."""


class AppServerRpcError(AgentTurnError):
    """The app server answered a request with a JSON-RPC error."""

    def __init__(self, method: str, code: int | None, message: str) -> None:
        self.method = method
        self.code = code
        super().__init__(
            f"the Codex app server refused {method} (JSON-RPC error {code}: {message}). "
            f"If this persists, check the Codex version with `jigs doctor`",
            kind="codex",
            detail=message,
            reason="rpc_error",
        )


class AppServer:
    """One ``codex app-server`` process and the conversation with it."""

    def __init__(self, process: ManagedProcess, *, on_request: RequestHandler, log: Any) -> None:
        self.process = process
        self.on_request = on_request
        self._log = log
        self._ids = 0
        self._lines = 0
        self._backlog: deque[dict[str, Any]] = deque(maxlen=10_000)

    async def _crashed(self, waiting_for: str) -> AgentCrashedError:
        code: int | None = None
        with anyio.move_on_after(1.0):
            code = await self.process.wait()
        return AgentCrashedError(
            f"the Codex app server exited (code {code}) while jigs waited for {waiting_for}. "
            f"Run `jigs doctor` to check the CLI, and look at its stderr below",
            kind="codex",
            returncode=code,
            stderr_tail=self.process.stderr_tail(),
        )

    async def send(self, message: Mapping[str, Any], *, waiting_for: str = "a write") -> None:
        """Write one message. A closed pipe means the server died: :class:`AgentCrashedError`."""
        try:
            if self.process.stdin is None:
                raise anyio.ClosedResourceError
            await self.process.stdin.send(json.dumps(message).encode() + b"\n")
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            raise await self._crashed(waiting_for) from None

    async def _read(self, waiting_for: str) -> dict[str, Any]:
        """The next response or notification; server requests are answered on the way."""
        while True:
            raw = await self.process.read_line()
            if raw is None:
                raise await self._crashed(waiting_for)
            self._lines += 1
            if not raw.strip():
                continue
            try:
                message = decode_line(raw, kind="codex", number=self._lines)
            except AgentOutputError:
                if not self.process.stdout_ended:
                    raise
                # a last line cut short by the end of the stream: a server that then exits
                # non-zero (or by a signal) crashed mid-write
                crashed = await self._crashed(waiting_for)
                if crashed.returncode in (0, None):
                    raise
                raise crashed from None
            if "method" not in message or "id" not in message:
                return message
            method = str(message["method"])
            self._log.info("codex.server_request", method=method)
            reply: dict[str, Any] = {"id": message["id"]}
            try:
                reply["result"] = await self.on_request(method, message.get("params"))
            except NotHandled as exc:
                reply["error"] = {"code": -32601, "message": str(exc)}
            except Exception as exc:
                # the step's approval callback failed: never leave the server waiting, re-raise
                reply["error"] = {"code": -32603, "message": f"jigs: {type(exc).__name__}"}
                await self.send(reply, waiting_for=f"the answer to {method}")
                raise
            await self.send(reply, waiting_for=f"the answer to {method}")

    async def request(
        self, method: str, params: Any, *, timeout: float = float("inf"), limit: str = ""
    ) -> Any:
        """Send a request and return its result; notifications meanwhile are queued. Silence
        past ``timeout`` is :class:`AgentTimeoutError` naming ``limit`` (the key to raise)."""
        self._ids += 1
        request_id = self._ids
        await self.send({"id": request_id, "method": method, "params": params}, waiting_for=method)
        with anyio.move_on_after(timeout) as scope:
            while True:
                message = await self._read(method)
                if message.get("id") == request_id:
                    break
                if "method" in message:
                    self._backlog.append(message)
                # else: a response nobody waits for (an interrupt's answer)
        if scope.cancelled_caught:
            raise AgentTimeoutError(
                f"the Codex app server did not answer {method} within {timeout:g}s (the "
                f"descriptor's {limit}); jigs stopped it. Check the model endpoint and the "
                f"step's MCP servers, or raise {limit}",
                kind="codex",
                limit=limit,
                seconds=timeout,
                stderr_tail=self.process.stderr_tail(),
            )
        error = message.get("error")
        if error is not None:
            error = error if isinstance(error, dict) else {"message": str(error)}
            code = error.get("code")
            raise AppServerRpcError(
                method, code if isinstance(code, int) else None, str(error.get("message", ""))
            )
        return message.get("result")

    async def next_message(self, waiting_for: str) -> dict[str, Any]:
        """The next notification (queued ones first); no deadline of its own."""
        if self._backlog:
            return self._backlog.popleft()
        while True:
            message = await self._read(waiting_for)
            if "method" in message:
                return message
