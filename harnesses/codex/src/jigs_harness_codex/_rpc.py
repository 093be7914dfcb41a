"""A small JSON-RPC client for ``codex app-server`` over stdio.

Framing: one JSON object per line, no ``"jsonrpc"`` field. The client has no background task: a
caller that waits for a response or a notification reads lines itself (one reader at a time). While
reading it:

- answers every server->client request at once through ``on_request`` (approvals); an unknown
  request gets a JSON-RPC error, so the server never blocks on jigs;
- queues notifications that arrive while a response is awaited (:meth:`AppServer.next_message`
  returns them first);
- turns a closed stdout into :class:`AgentCrashedError`, a line that is not a JSON object into
  :class:`AgentOutputError` and a JSON-RPC error into :class:`AppServerRpcError`.

Deadlines: :meth:`AppServer.request` takes one (startup requests: :class:`AgentTimeoutError`);
reads during a turn have none of their own -- the core's turn engine applies ``idle_timeout`` and
``turn_timeout`` around them.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from jigs._engine import decode_line
from jigs.errors import AgentCrashedError, AgentTimeoutError, AgentTurnError
from jigs.processes import ManagedProcess

__all__ = ["KIND", "AppServer", "AppServerRpcError", "NotHandled", "RequestHandler"]

KIND = "codex"
_BACKLOG = 10_000
_METHOD_NOT_FOUND = -32601
_INTERNAL_ERROR = -32603

#: ``on_request(method, params) -> result``; raise :class:`NotHandled` for "not handled".
RequestHandler = Callable[[str, Any], Awaitable[Any]]


class NotHandled(Exception):
    """Raised by a request handler for a server request it does not handle."""


class AppServerRpcError(AgentTurnError):
    """The app server answered a request with a JSON-RPC error."""

    def __init__(self, method: str, code: int | None, message: str, data: Any = None) -> None:
        self.method = method
        self.code = code
        self.data = data
        super().__init__(
            f"the Codex app server refused {method} (JSON-RPC error {code}: {message}). "
            f"If this persists, check the Codex version with `jigs doctor`",
            kind=KIND,
            detail=message,
            reason="rpc_error",
        )


class AppServer:
    """One ``codex app-server`` process and the conversation with it."""

    def __init__(self, process: ManagedProcess, *, on_request: RequestHandler, log: Any) -> None:
        self.process = process
        self.on_request = on_request
        self._log = log
        self._next_id = 0
        self._send_lock = anyio.Lock()
        self._read_lock = anyio.Lock()
        self._line = 0
        self._backlog: deque[dict[str, Any]] = deque(maxlen=_BACKLOG)

    async def _crashed(self, waiting_for: str) -> AgentCrashedError:
        code: int | None = None
        with anyio.move_on_after(1.0):
            code = await self.process.wait()
        how = "exited" if code is None or code >= 0 else "was killed"
        return AgentCrashedError(
            f"the Codex app server {how} (code {code}) while jigs waited for {waiting_for}. "
            f"Run `jigs doctor` to check the CLI, and look at its stderr below",
            kind=KIND,
            returncode=code,
            stderr_tail=self.process.stderr_tail(),
        )

    async def send(self, message: Mapping[str, Any], *, waiting_for: str = "a write") -> None:
        """Write one message. A closed pipe means the server died: :class:`AgentCrashedError`."""
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        stdin = self.process.stdin
        try:
            if stdin is None:
                raise anyio.ClosedResourceError
            async with self._send_lock:
                await stdin.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            raise await self._crashed(waiting_for) from None

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no answer expected)."""
        message: dict[str, Any] = {"method": method}
        if params is not None:
            message["params"] = params
        await self.send(message, waiting_for=method)

    async def _read(self, waiting_for: str) -> dict[str, Any]:
        """The next response or notification; server requests are answered on the way."""
        while True:
            raw = await self.process.read_line()
            if raw is None:
                raise await self._crashed(waiting_for)
            self._line += 1
            if not raw.strip():
                continue
            message = decode_line(raw, kind=KIND, number=self._line)
            if "method" in message and "id" in message:
                await self._answer(message)
                continue
            return message

    async def _answer(self, message: dict[str, Any]) -> None:
        method = str(message.get("method"))
        self._log.info("codex.server_request", method=method)
        reply: dict[str, Any] = {"id": message["id"]}
        try:
            reply["result"] = await self.on_request(method, message.get("params"))
        except NotHandled as exc:
            reply["error"] = {"code": _METHOD_NOT_FOUND, "message": str(exc)}
        except Exception as exc:
            # a step's approval callback failed: never leave the server waiting, then re-raise
            reply["error"] = {"code": _INTERNAL_ERROR, "message": f"jigs: {type(exc).__name__}"}
            await self.send(reply, waiting_for=f"the answer to {method}")
            raise
        await self.send(reply, waiting_for=f"the answer to {method}")

    async def request(
        self, method: str, params: Any, *, timeout: float | None = None, limit: str = ""
    ) -> Any:
        """Send a request and return its result; notifications meanwhile are queued.

        With ``timeout``, silence past it is :class:`AgentTimeoutError` naming ``limit`` (the
        descriptor key to raise). Raises :class:`AppServerRpcError`,
        :class:`AgentCrashedError` or :class:`AgentOutputError`.
        """
        self._next_id += 1
        request_id = self._next_id
        await self.send({"id": request_id, "method": method, "params": params}, waiting_for=method)
        async with self._read_lock:
            with anyio.move_on_after(timeout if timeout is not None else float("inf")) as scope:
                while True:
                    message = await self._read(method)
                    if message.get("id") == request_id:
                        break
                    if "method" in message:
                        self._backlog.append(message)
                    # a response nobody waits for (an interrupt's answer): dropped
            if scope.cancelled_caught:
                raise AgentTimeoutError(
                    f"the Codex app server did not answer {method} within {timeout:g}s (the "
                    f"descriptor's {limit}); jigs stopped it. Check the model endpoint and the "
                    f"step's MCP servers, or raise {limit}",
                    kind=KIND,
                    limit=limit,
                    seconds=float(timeout or 0),
                    stderr_tail=self.process.stderr_tail(),
                )
        error = message.get("error")
        if error is not None:
            if not isinstance(error, dict):
                error = {"message": str(error)}
            code = error.get("code")
            raise AppServerRpcError(
                method,
                code if isinstance(code, int) else None,
                str(error.get("message", "")),
                error.get("data"),
            )
        return message.get("result")

    async def next_message(self, waiting_for: str) -> dict[str, Any]:
        """The next notification (queued ones first); no deadline of its own."""
        if self._backlog:
            return self._backlog.popleft()
        async with self._read_lock:
            while True:
                message = await self._read(waiting_for)
                if "method" in message:
                    return message
