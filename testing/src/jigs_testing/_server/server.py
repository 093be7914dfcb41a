"""``ModelServer``: the scripted loopback model server, as an async context manager."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AsyncExitStack, contextmanager
from functools import partial
from types import TracebackType
from typing import Self

import anyio
import anyio.abc
from anyio.abc import SocketAttribute
from anyio.from_thread import start_blocking_portal
from jigs.proxy._accept import accept_forever

from .app import Application
from .connection import serve_connection
from .logline import logger
from .record import RecordedRequest
from .replies import ScriptItem
from .script import Script
from .state import ServerState

__all__ = ["ModelServer"]


class ModelServer:
    """A fake model API on ``127.0.0.1`` that answers from a script and logs every request.

    It speaks Anthropic Messages (``POST …/v1/messages``, ``…/messages/count_tokens``), OpenAI
    Responses (``POST …/v1/responses``), Chat Completions (``POST …/v1/chat/completions``) and
    ``GET …/v1/models``, streamed (SSE) or plain, matching paths on their suffix. Each model
    request consumes the next reply of :attr:`script`; when none is left the client gets an API
    error (HTTP 500) saying so, never a hang. It is also a refusing HTTP proxy: set
    ``HTTPS_PROXY`` to :attr:`proxy_url` and every ``CONNECT`` is answered 403 and logged in
    :attr:`connect_attempts`.

    Use ``async with ModelServer(script=[text("hi")]) as server:`` (asyncio or trio, through
    anyio), or :meth:`run_in_thread` from synchronous code. Binding fails with :class:`OSError`
    (e.g. the port is taken). A server runs once; leaving the block stops it, cutting any
    response still in flight. The logs stay readable afterwards. ``keep=N`` keeps only the
    newest N requests in the log (a server that serves for days: ``jigs model-server`` keeps
    1000); None keeps all, as a test wants.
    """

    def __init__(
        self,
        script: Iterable[ScriptItem] | Script = (),
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        models: Iterable[str] = (),
        keep: int | None = None,
    ) -> None:
        if keep is not None and keep < 1:
            raise ValueError("keep must be a positive number of requests (or None: keep all)")
        self.script = script if isinstance(script, Script) else Script(script)
        self._state = ServerState(self.script, list(models), keep=keep)
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._stack: AsyncExitStack | None = None
        self._started = False

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._started:
            raise RuntimeError("a ModelServer can be started only once")
        self._started = True
        stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            listener = await anyio.create_tcp_listener(
                local_host=self._host, local_port=self._requested_port
            )
            stack.push_async_callback(listener.aclose)
            self._port = int(listener.extra(SocketAttribute.local_port))
            authorities = {f"{self._host}:{self._port}", f"localhost:{self._port}"}
            app = Application(self._state, authorities)
            group = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(group.cancel_scope.cancel)
            for sub in listener.listeners:
                group.start_soon(self._accept_loop, sub, app, group)
        except BaseException as exc:
            await stack.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        self._stack = stack
        logger.info("model server listening on %s", self.url)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            # The body's own exception propagates as it is: handing it to the task group would
            # wrap it in an ExceptionGroup, and callers catch AssertionError, JigsError, ...
            await stack.__aexit__(None, None, None)
            logger.info("model server on %s stopped", self.url)

    async def _accept_loop(
        self,
        listener: anyio.abc.Listener[anyio.abc.SocketStream],
        app: Application,
        group: anyio.abc.TaskGroup,
    ) -> None:
        def failed(exc: OSError) -> None:
            self._state.add_failure(f"jigs_testing.ModelServer: accept failed: {exc}")

        await accept_forever(listener, group, partial(serve_connection, app=app), failed)

    @classmethod
    @contextmanager
    def run_in_thread(
        cls,
        script: Iterable[ScriptItem] | Script = (),
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        models: Iterable[str] = (),
        backend: str = "asyncio",
    ) -> Iterator[ModelServer]:
        """Run a server on its own event loop in a background thread, for synchronous code.

        ``with ModelServer.run_in_thread([text("hi")]) as server: ...`` The server is serving
        when the block starts and is stopped (thread joined) when it ends. The script and the
        logs are thread-safe to use from the calling thread.
        """
        server = cls(script, host=host, port=port, models=models)
        with (
            start_blocking_portal(backend) as portal,
            portal.wrap_async_context_manager(server) as running,
        ):
            yield running

    # -- addresses -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The TCP port. Raises :class:`RuntimeError` before the server has started."""
        if self._port is None:
            raise RuntimeError("the ModelServer is not started: use `async with ModelServer()`")
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    @property
    def anthropic_base_url(self) -> str:
        """The value for ``ANTHROPIC_BASE_URL`` (the root; clients add ``/v1/messages``)."""
        return self.url

    @property
    def openai_base_url(self) -> str:
        """The value for an OpenAI ``base_url`` (``…/v1``; clients add ``/responses``)."""
        return f"{self.url}/v1"

    @property
    def proxy_url(self) -> str:
        """The value for ``HTTPS_PROXY`` / ``HTTP_PROXY``: every outside connection attempt
        through it is refused with 403 and logged."""
        return self.url

    # -- script ----------------------------------------------------------------------------

    def add(self, *items: ScriptItem) -> None:
        """Append replies to the script (same as ``server.script.add``)."""
        self.script.extend(items)

    # -- logs ------------------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every HTTP request received since the start or :meth:`clear_log`, in order (a
        copy)."""
        return self._state.requests

    @property
    def served(self) -> int:
        """How many requests were received in all, forgotten ones included."""
        return self._state.served

    @property
    def model_requests(self) -> list[RecordedRequest]:
        """Only the model requests (Messages, Responses, Chat Completions), in order."""
        return [request for request in self._state.requests if request.is_model_request]

    @property
    def connect_attempts(self) -> list[str]:
        """``host:port`` of every refused ``CONNECT``, in order."""
        return self._state.connects

    @property
    def proxy_requests(self) -> list[str]:
        """Every refused absolute-URI proxy request, as ``"GET http://host/path"``."""
        return self._state.proxied

    @property
    def failures(self) -> list[str]:
        """Server-side problems: script exhausted, reply functions that raised, internal
        errors. Empty in a healthy run."""
        return self._state.failures

    def clear_log(self) -> None:
        """Forget the requests, refused connections and failures recorded so far. A server
        that lives long (a soak, a worker's test rig) keeps every request's parsed body
        otherwise; a request received later still gets the next :attr:`RecordedRequest.index`."""
        self._state.clear_log()

    def assert_no_outside_connections(self) -> None:
        """Raise :class:`AssertionError` listing any refused CONNECT or proxy request."""
        attempts = [f"CONNECT {target}" for target in self.connect_attempts]
        attempts.extend(self.proxy_requests)
        if attempts:
            listing = "\n  ".join(attempts)
            raise AssertionError(f"outside connection attempts were made:\n  {listing}")

    def assert_script_used_up(self) -> None:
        """Raise :class:`AssertionError` if replies are left over or a request found none."""
        remaining = self.script.remaining
        exhausted = [failure for failure in self.failures if "no reply left" in failure]
        if remaining or exhausted:
            problems = [f"{remaining} scripted replies were never requested"] if remaining else []
            problems.extend(exhausted)
            raise AssertionError("; ".join(problems))

    def __repr__(self) -> str:
        where = self.url if self._port is not None else "not started"
        return f"<ModelServer {where} {self.script!r}>"
