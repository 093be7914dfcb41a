"""The step's Python tools as an MCP server in the worker (streamable HTTP, the ``mcp`` SDK's
low-level server under uvicorn, both dependencies of ``mcp``).

It listens on a fresh ``127.0.0.1`` port, on an event loop of its own (a blocking portal's
thread: a step holds no task group of its caller between opening and closing). The step's
descriptor, as its kind sees it, declares it as one more HTTP MCP server (:data:`TOOLS_SERVER`)
with a bearer token the agent's environment holds (:data:`TOKEN_ENV`); a sandboxed step reaches
that loopback port through the relay every declared loopback MCP server gets. The token is the
same discipline as the credential proxy's: a request without it gets 401 and never reaches a
tool (``jigs.tools.refused``). The server stops when the step closes (the port is closed).

A tool runs where its caller's state lives: an async tool on the event loop that opened the step
(through ``anyio.from_thread.run``), a sync tool in a worker thread. An exception it raises is a
tool error the agent reads (its type and message, every known secret redacted), never a failure
of the step. Each call is logged as ``tool.called`` (name, seconds, is_error) on the step's log;
the CLI's own events report the call and its result in the event stream.

:func:`~jigs.steps.ask_human` is answered here: its question is appended to :attr:`questions`
(the step's engine reads it when the turn ends) and the agent reads :data:`ASKED`; while a
question waits, every other tool of the step answers with an error telling the agent to end
its turn.
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import os
import socket
import time
import uuid
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import pydantic_core
import uvicorn
from anyio.from_thread import start_blocking_portal
from mcp import types
from mcp.server.lowlevel import Server
from pydantic import ValidationError

from jigs.engine._gate import GatedCall
from jigs.engine._tools import ASKED, StepTool
from jigs.policy._redact import secret_values
from jigs.policy._secrets import redact_known
from jigs.proxy._sockets import loopback_socket

__all__ = ["ToolServer"]

#: Seconds the server's start and stop may take each.
_WAIT = 10.0
_ERROR_LIMIT = 2000


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, woken to stop rather than polling for it every 0.1 s (a step's close
    waits for it)."""

    _wake: anyio.Event | None = None

    async def main_loop(self) -> None:
        self._wake = anyio.Event()
        if not self.should_exit:
            await self._wake.wait()

    def wake(self) -> None:
        """On the serving loop: end :meth:`main_loop` (``should_exit`` set first)."""
        if self._wake is not None:
            self._wake.set()


class ToolServer:
    """One step's tools, served until :meth:`stop` (idempotent). ``caller`` is the event loop
    async tools run on (the one that opened the step)."""

    def __init__(
        self,
        tools: Sequence[StepTool],
        *,
        log: Any,
        caller: anyio.lowlevel.EventLoopToken | None,
        kind: str = "",
    ) -> None:
        self.tools = {tool.name: tool for tool in tools}
        self.kind = kind
        #: The questions the agent asked in the running turn (the engine clears it per turn).
        self.questions: list[GatedCall] = []
        self.token = os.urandom(24).hex()
        self._log = log
        self._caller = caller
        self._sock: socket.socket | None = loopback_socket()
        self.port = int(self._sock.getsockname()[1])
        self._portal_cm: Any = None
        self._portal: Any = None
        self._server: _Uvicorn | None = None
        self._done: Any = None
        self.calls = 0

    @property
    def url(self) -> str:
        """The MCP endpoint on the worker's loopback (the token goes in a header, never here)."""
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        """Start serving on the server's own thread; returns once it accepts requests."""
        sock, self._sock = self._sock, None
        if sock is None:
            raise RuntimeError("the tool server was started twice")
        config = uvicorn.Config(
            self._app(),
            lifespan="on",
            log_config=None,
            access_log=False,
            server_header=False,
            date_header=False,
            timeout_graceful_shutdown=2,
            http="h11",
            ws="none",
        )
        self._server = server = _Uvicorn(config)
        self._portal_cm = start_blocking_portal()
        self._portal = portal = self._portal_cm.__enter__()
        self._done = portal.start_task_soon(server.serve, [sock])
        deadline = time.monotonic() + _WAIT
        while not server.started:
            if self._done.done() or time.monotonic() > deadline:
                sock.close()
                raise OSError("the step's tool server did not start")
            time.sleep(0.005)

    def stop(self) -> None:
        """Close the port and end the server's thread; waits at most a few seconds."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        server, cm, self._server, self._portal_cm = self._server, self._portal_cm, None, None
        if server is None:
            return
        server.should_exit = True
        with contextlib.suppress(Exception):
            self._portal.call(server.wake)
        with contextlib.suppress(Exception):
            self._done.result(timeout=_WAIT)
        with contextlib.suppress(Exception):
            cm.__exit__(None, None, None)
        self._log.info("tools.stopped", calls=self.calls)

    async def astart(self) -> None:
        await anyio.to_thread.run_sync(self.start)

    async def astop(self) -> None:
        # abandonable: the step's bounded close may give up waiting (the server still stops)
        await anyio.to_thread.run_sync(self.stop, abandon_on_cancel=True)

    # -- the MCP side ----------------------------------------------------------------------

    def _app(self) -> Any:
        server: Server[Any] = Server(
            "jigs-step-tools", on_list_tools=self._list_tools, on_call_tool=self._call_tool
        )
        # stateless, JSON answers: no session to keep, no stream left open at close
        inner = server.streamable_http_app(
            streamable_http_path="/mcp", stateless_http=True, json_response=True
        )
        expected = f"Bearer {self.token}".encode()
        log = self._log

        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                given = dict(scope.get("headers") or []).get(b"authorization", b"")
                if not hmac.compare_digest(given, expected):
                    log.warning("jigs.tools.refused", reason="no step token", path=scope["path"])
                    await _plain(send, 401, b"this step's token is required\n")
                    return
            await inner(scope, receive, send)

        return app

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=t.name, description=t.description, input_schema=t.schema())
                for t in self.tools.values()
            ]
        )

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> Any:
        started = time.monotonic()
        tool = self.tools.get(params.name)
        self.calls += 1
        if tool is None:
            text, is_error = f"there is no tool {params.name!r}", True
        elif tool.asks_human or self.questions:
            text, is_error = self._ask(tool, params.arguments or {})
        else:
            text, is_error = await self._run(tool, params.arguments or {})
        self._log.info(
            "tool.called",
            tool=params.name[:64],
            is_error=is_error,
            seconds=round(time.monotonic() - started, 4),
        )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], is_error=is_error
        )

    def _ask(self, tool: StepTool, arguments: dict[str, Any]) -> tuple[str, bool]:
        """:func:`~jigs.steps.ask_human`'s question recorded (the turn is to end); any other
        tool while a question waits is refused, so the agent ends its turn."""
        if self.questions:
            return f"{tool.name} did not run: a question waits for a human. End your turn.", True
        try:
            question = str(getattr(tool.arguments.model_validate(arguments), "question", ""))
        except ValidationError:
            return "invalid arguments for ask_human: question (a string) is required", True
        if not question.strip():
            return "ask_human needs a question: say what you need to know", True
        call = GatedCall(
            kind=self.kind,
            tool=tool.name,
            category="question",
            arguments={"question": redact_known(question)},
            call_id=f"ask-{uuid.uuid4().hex[:12]}",
        )
        self.questions.append(call)
        self._log.info("tool.asked", call_id=call.call_id, chars=len(question))
        return ASKED, False

    async def _run(self, tool: StepTool, arguments: dict[str, Any]) -> tuple[str, bool]:
        try:
            parsed = tool.arguments.model_validate(arguments)
        except ValidationError as exc:
            fields = sorted({".".join(map(str, e["loc"])) or "(all)" for e in exc.errors()})
            return f"invalid arguments for {tool.name}: {', '.join(fields)}", True
        kwargs = {name: getattr(parsed, name) for name in type(parsed).model_fields}
        call = functools.partial(tool.fn, **kwargs)
        try:
            if tool.is_async:
                run = functools.partial(anyio.from_thread.run, call, token=self._caller)
                result = await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
            else:
                result = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        except Exception as exc:  # the agent reads it; the step goes on
            self._log.warning("tool.failed", tool=tool.name, error=type(exc).__name__)
            message = redact_known(str(exc), secret_values(os.environ))[:_ERROR_LIMIT]
            return f"{tool.name} failed: {type(exc).__name__}: {message}", True
        return _text(result), False


def _text(result: object) -> str:
    """What the agent reads: a string as it is, anything else as JSON (pydantic's encoder);
    every known secret redacted either way."""
    text = (
        result if isinstance(result, str) else pydantic_core.to_json(result, fallback=str).decode()
    )
    return redact_known(text)


async def _plain(send: Any, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))],
        }
    )
    await send({"type": "http.response.body", "body": body})
