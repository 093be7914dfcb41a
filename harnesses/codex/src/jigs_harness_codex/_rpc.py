"""A small JSON-RPC client for ``codex app-server`` over stdio.

Framing: one JSON object per line, no ``"jsonrpc"`` field. The client has no background task: a
caller that waits for a response or a notification reads lines itself (one reader at a time), so
the client can be used from any task and outlives none. While reading it:

- answers every server->client request at once through ``on_request`` (approvals by policy); an
  unknown request gets a JSON-RPC error, so the server never blocks on jigs;
- queues notifications that arrive while a response is awaited (read them with
  :meth:`AppServer.next_notification`);
- turns a closed stdout into :class:`AgentCrashedError`, a line that is not a JSON object into
  :class:`AgentOutputError`, a JSON-RPC error into :class:`AppServerRpcError`, and silence past a
  deadline into :class:`AppServerTimeoutError`.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from jigs.errors import AgentCrashedError, AgentOutputError, AgentTurnError
from jigs.processes import ManagedProcess

__all__ = [
    "KIND",
    "AppServer",
    "AppServerRpcError",
    "AppServerTimeoutError",
    "NotHandled",
    "RequestHandler",
]

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
        )


class AppServerTimeoutError(AgentOutputError, TimeoutError):
    """The app server said nothing for ``seconds`` while jigs waited for ``waiting_for``."""

    def __init__(self, waiting_for: str, seconds: float, stderr_tail: str) -> None:
        self.waiting_for = waiting_for
        self.seconds = seconds
        self.stderr_tail = stderr_tail
        tail = f"; its stderr ended with:\n{stderr_tail}" if stderr_tail.strip() else ""
        super().__init__(
            f"the Codex app server sent nothing for {seconds:g}s while jigs waited for "
            f"{waiting_for}; it was stopped. Raise the descriptor's startup_timeout/idle_timeout "
            f"if the model is slow, or look at the model endpoint{tail}",
            kind=KIND,
        )


class AppServer:
    """One ``codex app-server`` process and the conversation with it."""

    def __init__(
        self,
        process: ManagedProcess,
        *,
        on_request: RequestHandler,
        log: Any,
    ) -> None:
        self._process = process
        self._on_request = on_request
        self._log = log
        self._next_id = 0
        self._send_lock = anyio.Lock()
        self._read_lock = anyio.Lock()
        self._line = 0
        self._backlog: deque[dict[str, Any]] = deque(maxlen=_BACKLOG)

    @property
    def process(self) -> ManagedProcess:
        return self._process

    async def _crashed(self, waiting_for: str) -> AgentCrashedError:
        code: int | None = None
        with anyio.move_on_after(1.0):
            code = await self._process.wait()
        how = "exited" if code is None or code >= 0 else "was killed"
        shown = "unknown" if code is None else str(code)
        return AgentCrashedError(
            f"the Codex app server {how} (code {shown}) while jigs waited for {waiting_for}. "
            f"Run `jigs doctor` to check the CLI, and look at its stderr below",
            kind=KIND,
            returncode=code,
            stderr_tail=self._process.stderr_tail(),
        )

    async def send(self, message: Mapping[str, Any], *, waiting_for: str = "a write") -> None:
        """Write one message. A closed pipe means the server died: :class:`AgentCrashedError`."""
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        stdin = self._process.stdin
        if stdin is None:
            raise RuntimeError("the app server was launched without a stdin pipe")
        try:
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
            raw = await self._process.read_line()
            if raw is None:
                raise await self._crashed(waiting_for)
            self._line += 1
            if not raw.strip():
                continue
            try:
                message = json.loads(raw)
            except ValueError:
                message = None
            if not isinstance(message, dict):
                raise AgentOutputError(
                    f"the Codex app server printed a line that is not a JSON-RPC message (line "
                    f"{self._line}, while jigs waited for {waiting_for}): {raw[:120]!r}. The CLI "
                    f"may be the wrong program; check it with `jigs doctor`",
                    kind=KIND,
                    line=self._line,
                )
            if "method" in message and "id" in message:
                await self._answer(message)
                continue
            return message

    async def _answer(self, message: dict[str, Any]) -> None:
        method = str(message.get("method"))
        self._log.info("codex.server_request", method=method)
        reply: dict[str, Any] = {"id": message["id"]}
        try:
            reply["result"] = await self._on_request(method, message.get("params"))
        except NotHandled as exc:
            reply["error"] = {"code": _METHOD_NOT_FOUND, "message": str(exc)}
        except Exception as exc:
            # a step's approval hook failed: never leave the server waiting, then re-raise
            reply["error"] = {"code": _INTERNAL_ERROR, "message": f"jigs: {type(exc).__name__}"}
            await self.send(reply, waiting_for=f"the answer to {method}")
            raise
        await self.send(reply, waiting_for=f"the answer to {method}")

    async def request(self, method: str, params: Any, *, timeout: float) -> Any:
        """Send a request and return its result. Notifications that arrive meanwhile are queued.

        Raises :class:`AppServerRpcError`, :class:`AppServerTimeoutError`,
        :class:`AgentCrashedError` or :class:`AgentOutputError`.
        """
        self._next_id += 1
        request_id = self._next_id
        await self.send({"id": request_id, "method": method, "params": params}, waiting_for=method)
        async with self._read_lock:
            with anyio.move_on_after(timeout) as scope:
                while True:
                    message = await self._read(method)
                    if message.get("id") == request_id:
                        break
                    if "method" in message:
                        self._backlog.append(message)
                    # a response to an id nobody waits for (an abandoned request): dropped
            if scope.cancelled_caught:
                raise AppServerTimeoutError(method, timeout, self._process.stderr_tail())
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

    async def next_notification(self, *, timeout: float, waiting_for: str) -> dict[str, Any]:
        """The next notification (queued ones first), waiting at most ``timeout`` seconds."""
        if self._backlog:
            return self._backlog.popleft()
        async with self._read_lock:
            with anyio.move_on_after(timeout) as scope:
                while True:
                    message = await self._read(waiting_for)
                    if "method" in message:
                        return message
            if scope.cancelled_caught:
                raise AppServerTimeoutError(waiting_for, timeout, self._process.stderr_tail())
        raise AssertionError("unreachable")  # pragma: no cover
