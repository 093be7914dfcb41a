"""A per-step credential proxy: the model key stays in the worker, the agent gets a placeholder.

A :class:`CredentialProxy` listens on ``127.0.0.1`` (a fresh port) under a random step token.
The CLI is given :attr:`CredentialProxy.base_url` (``http://127.0.0.1:<port>/<token>``) as its
API base URL and :attr:`CredentialProxy.placeholder_key` as its key. Every request whose path
starts with the token is forwarded to ``upstream`` + the rest of the path (and query), with the
client's auth headers removed and the real key set, and the response is streamed back chunk by
chunk as the upstream sends it (SSE passes through unbuffered; request bodies stream too).

Guarantees:

- the key is only in this process's memory: it is never logged, never in ``repr``, never sent
  anywhere but to ``upstream``, and the client's own auth headers never reach the upstream;
- a request with a wrong token, a path that is not under the token, a method and path that are
  not one of ``model_calls`` (jigs' model-only policy), one the ``admit`` gate refuses (the
  step's budget is spent), or one that arrives on a connection after the proxy closed gets an
  error status (401, 403 or 400) and a ``jigs.proxy.refused`` log event, which names neither
  the token tried nor the query; nothing of it reaches the upstream;
- the real key and the step token never come back to the client: every response header and
  body the proxy relays has them masked by value (:class:`~jigs.policy._redact.StreamRedactor`, a
  secret that straddles two chunks of a streamed body included), upstream bodies are asked for
  uncompressed (``accept-encoding: identity``) so they can be checked, and an encoded one is
  refused with 502;
- after :meth:`CredentialProxy.aclose` returns (or the ``async with`` block ends) the port is
  closed (a new connection is refused) and every open connection, in-flight responses
  included, is cut: the step is over;
- upstream failures never raise: the client gets 502 (unreachable) or 504 (timed out) before a
  response started, or a cut connection after; the request is still recorded.

Each forwarded request is recorded as a :class:`ProxiedRequest` (status, timings, sizes, and the
token ``usage`` the upstream reported) in :attr:`CredentialProxy.requests` and handed to the
``on_request`` callback when it ends.

The proxy is three parts with one job each: :mod:`jigs.proxy._routes` decides every request
and rewrites its head (the token, the traversal check, the model-only allowlist, the key),
:mod:`jigs.proxy._relay` relays the bodies and streams both ways, and
:mod:`jigs.proxy._accounting` records and counts them; :mod:`jigs.proxy._sockets` holds the
listening sockets and :mod:`jigs.proxy._serving` their connections (HTTP/1.1 through
:mod:`jigs.proxy._http1`). This module is the proxy's face and lifecycle; it is built, and its
port bound, before a step launches its CLI, and loads the serving side only when it serves.

The upstream side is an httpcore connection pool (:mod:`jigs.proxy._upstream`), with the host's
``HTTPS_PROXY`` / ``NO_PROXY`` and ``SSL_CERT_FILE`` applied as httpx's ``trust_env`` does. The
port is bound when the proxy reports started; the upstream pool (and the TLS context for an
``https`` upstream) is built right after, on the proxy's own loop, or taken from the pools that
loop keeps between proxies (a step's proxies: :class:`~jigs.proxy._upstream.UpstreamPools`), so
a step reuses the connections of the steps before it. A request that arrives first
waits for it; if it cannot be built (an unreadable ``SSL_CERT_FILE``, an unusable proxy URL),
every request gets 502 naming the error and ``jigs.proxy.client_failed`` is logged.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Self

import anyio
import anyio.abc

from jigs.engine._logging import logger
from jigs.errors import CredentialProxyError
from jigs.proxy._accounting import Accounts, Outcome, ProxiedRequest
from jigs.proxy._routes import AuthScheme, Routes, parse_model_calls
from jigs.proxy._serving import Serving
from jigs.proxy._sockets import Sockets, loopback_socket
from jigs.proxy._upstream import UpstreamPools

__all__ = [
    "AuthScheme",
    "CredentialProxy",
    "Outcome",
    "ProxiedRequest",
    "loopback_socket",
    "parse_model_calls",
]


class CredentialProxy:
    """A loopback reverse proxy for one step that adds the real API key to every request.

    ``upstream`` is the real API base URL the CLI would otherwise use (``https://api.anthropic.com``,
    ``https://api.openai.com/v1``, a descriptor's ``base_url``); a request for
    ``base_url + "/v1/messages"`` goes to ``upstream + "/v1/messages"``. ``key`` is the real
    key, sent as ``scheme`` says. ``model_calls``, if given, are the only requests forwarded
    (``"POST /v1/messages"``: method and exact path after the token; see
    :func:`parse_model_calls`); any other gets 403 and never reaches the upstream. ``admit``, if
    given, is asked before each of them is forwarded and returns why not (the request then gets
    403 with that message) or ``None``. ``on_request`` is called with each :class:`ProxiedRequest`
    when it ends (an exception it raises is logged and ignored). ``connect_timeout`` bounds
    connecting to the upstream; ``read_timeout`` bounds each wait for upstream bytes (a model may
    think for minutes between events).
    ``trust_env`` applies the host's proxy and CA settings (see :mod:`jigs.proxy._upstream`).
    ``sock``, if given, is a bound, listening loopback socket (:func:`loopback_socket`) to serve
    on: the port, and so :attr:`base_url`, is known before :meth:`serve` runs (the CLI may
    connect before it does; its connection waits in the backlog). The proxy owns it: it is
    closed when the proxy stops, or by :meth:`aclose` if the proxy never served.

    Run it either as ``async with CredentialProxy(...) as proxy:`` or inside an existing task
    group: ``await group.start(proxy.serve)`` then ``await proxy.aclose()`` (cancelling the
    group also stops it). A proxy serves once. Raises :class:`~jigs.errors.CredentialProxyError`
    for bad arguments, and :class:`OSError` if it cannot bind a loopback port.
    """

    def __init__(
        self,
        upstream: str,
        key: str,
        *,
        scheme: AuthScheme = "x-api-key",
        model_calls: Sequence[str] | None = None,
        admit: Callable[[], str | None] | None = None,
        on_request: Callable[[ProxiedRequest], object] | None = None,
        connect_timeout: float = 30.0,
        read_timeout: float = 600.0,
        trust_env: bool = True,
        sock: socket.socket | None = None,
    ) -> None:
        self._routes = Routes(upstream, key, scheme, model_calls, admit)
        self._upstream = self._routes.upstream
        self._token = self._routes.token
        self._accounts = Accounts(on_request)
        self._timeouts = (connect_timeout, read_timeout)
        self._trust_env = trust_env
        self.placeholder_key = self._routes.placeholder_key
        """The key to give the CLI. The proxy ignores it (it strips every client auth header),
        so it is worthless anywhere, including against this proxy without the token."""
        self._sockets = Sockets(sock)
        self._port: int | None = int(sock.getsockname()[1]) if sock is not None else None
        self._started = False
        self._closed = False
        # made by serve(), on the loop that serves (the proxy may be built on another thread)
        self._close_requested: anyio.Event
        self._stopped: anyio.Event
        self._group: anyio.abc.TaskGroup | None = None

    # -- addresses and logs ------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The loopback port. Raises :class:`CredentialProxyError` before the proxy started."""
        if self._port is None:
            raise CredentialProxyError(
                f"the credential proxy for {self._upstream} has not started: use "
                "`async with CredentialProxy(...)` or `await task_group.start(proxy.serve)`",
                upstream=self._upstream,
            )
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/<step token>``: the CLI's API base URL. It is a secret of
        the step (it holds the token): pass it to the CLI, never log it."""
        return f"http://127.0.0.1:{self.port}/{self._token}"

    @property
    def upstream(self) -> str:
        """The upstream base URL, without a trailing slash."""
        return self._upstream

    @property
    def closed(self) -> bool:
        """Whether the proxy has been closed (it refuses every request from then on)."""
        return self._closed

    @property
    def requests(self) -> list[ProxiedRequest]:
        """Every forwarded request that has ended, in the order they ended (a copy)."""
        return list(self._accounts.records)

    @property
    def refused(self) -> int:
        """How many requests were refused (wrong token, not a model call, not admitted,
        closed)."""
        return self._accounts.refused

    def __repr__(self) -> str:
        where = f"127.0.0.1:{self._port}" if self._port is not None else "not started"
        state = "closed" if self._closed else "open"
        return f"<CredentialProxy {where} -> {self._upstream} ({state})>"

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        group = anyio.create_task_group()
        await group.__aenter__()
        try:
            await group.start(self.serve)
        except BaseException as exc:
            await group.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        self._group = group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        group, self._group = self._group, None
        await self.aclose()
        if group is not None:
            # The body's own exception propagates as it is, not wrapped in an ExceptionGroup.
            await group.__aexit__(None, None, None)

    async def aclose(self) -> None:
        """Stop: refuse every further request, close the port, cut open connections. Returns
        when the port is closed. Idempotent; before :meth:`serve` it is :meth:`discard`."""
        if not self._started:
            self.discard()
            return
        self._closed = True
        self._close_requested.set()
        await self._stopped.wait()

    def discard(self) -> None:
        """Before :meth:`serve`: close ``sock`` (a client connecting is refused) and mark the
        proxy closed, so it never serves. No effect once it has served."""
        if self._started:
            return
        self._closed = True
        self._sockets.close(own=True)

    async def serve(
        self,
        *,
        pools: UpstreamPools | None = None,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Bind, report started (for ``task_group.start``), and serve until :meth:`aclose`
        or cancellation. Raises :class:`CredentialProxyError` if called twice. ``pools``: the
        upstream pools kept on this event loop between proxies (default: one of its own)."""
        if self._started:
            raise CredentialProxyError(
                f"the credential proxy for {self._upstream} was already started: a proxy "
                "serves one step once; create a new one",
                upstream=self._upstream,
            )
        self._started = True
        self._close_requested = anyio.Event()
        self._stopped = anyio.Event()
        if self._closed:  # closed before it served: its socket is gone
            self._stopped.set()
            raise CredentialProxyError(
                f"the credential proxy for {self._upstream} was closed before it served; "
                "create a new one",
                upstream=self._upstream,
            )
        try:
            listener = await self._sockets.listen()
        except BaseException:
            self._closed = True
            self._sockets.close(own=False)
            self._stopped.set()
            raise
        serving = Serving(
            self._routes,
            self._accounts,
            closed=lambda: self._closed,
            timeouts=self._timeouts,
            trust_env=self._trust_env,
            pools=pools,
        )
        try:
            self._port = self._accounts.port = int(
                listener.extra(anyio.abc.SocketAttribute.local_port)
            )
            await serving.run(self._sockets, listener, self._close_requested, task_status)
        finally:
            self._closed = True
            self._sockets.close(own=False)
            with anyio.CancelScope(shield=True):
                await listener.aclose()
                await serving.aclose()
            self._stopped.set()
            logger.info(
                "jigs.proxy.stopped",
                port=self._port,
                upstream=self._upstream,
                requests=len(self._accounts.records),
                refused=self._accounts.refused,
            )

    def add_socket(self, sock: socket.socket) -> None:
        """Serve ``sock`` too (a listening socket, e.g. made inside a sandbox's network
        namespace), from now until the proxy stops; the proxy owns it. Callable from any thread,
        before or while the proxy serves; after it stopped, the socket is closed at once."""
        if self._closed:
            sock.close()
            return
        self._sockets.add(sock)
