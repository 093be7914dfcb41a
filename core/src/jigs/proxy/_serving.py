"""A credential proxy while it serves: its connections (HTTP/1.1 through
:mod:`jigs.proxy._http1`), each request decided by its :class:`~jigs.proxy._routes.Routes`
and either refused here or forwarded by its :class:`~jigs.proxy._relay.Relay`.

This is the part that loads h11, httpcore and the TLS context: a step builds its proxy (and
binds its port) before it launches the CLI, and imports this only when the proxy begins
serving, after the launch (tests/core/test_imports.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable

import anyio
import anyio.abc
import h11
import httpcore

from jigs.engine._logging import logger
from jigs.proxy._accounting import Accounts
from jigs.proxy._http1 import ClientGone, Http1Server, serve_requests
from jigs.proxy._relay import Relay
from jigs.proxy._routes import Refusal, Routes, error_body
from jigs.proxy._sockets import Sockets
from jigs.proxy._upstream import UpstreamPools, open_pool

__all__ = ["Serving"]

_MAX_HEAD = 256 * 1024
_LINGER = 1.0
"""Seconds a refused connection waits for the client to finish sending before it closes."""
_JSON = [("content-type", "application/json")]


class Serving:
    """One proxy's serving side. ``closed`` says whether the proxy closed (every request is
    refused from then on); ``timeouts`` are (connect, read) for the upstream. With ``pools``
    (the loop's, kept between proxies) the upstream pool is taken from there and handed back
    when the proxy stops; without, the proxy opens its own and closes it."""

    def __init__(
        self,
        routes: Routes,
        accounts: Accounts,
        *,
        closed: Callable[[], bool],
        timeouts: tuple[float, float],
        trust_env: bool,
        pools: UpstreamPools | None = None,
    ) -> None:
        self._routes = routes
        self._pools = pools
        self._lease: Hashable | None = None
        self._accounts = accounts
        self._closed = closed
        self._timeouts = timeouts
        self._trust_env = trust_env
        self._relay: Relay | None = None
        self._relay_ready = anyio.Event()

    async def run(
        self,
        sockets: Sockets,
        listener: anyio.abc.SocketListener,
        close_requested: anyio.Event,
        task_status: anyio.abc.TaskStatus[None],
    ) -> None:
        """Serve every socket until ``close_requested`` is set (or cancellation)."""
        async with anyio.create_task_group() as group:
            sockets.serve(group, listener, self._serve_connection, self._accept_failed)
            port, upstream = self._accounts.port, self._routes.upstream
            logger.info("jigs.proxy.started", port=port, upstream=upstream)
            task_status.started()
            # at once: a step's proxy starts serving right after its CLI's launch, so the
            # upstream pool is built while the CLI starts up
            group.start_soon(self._build_relay)
            await close_requested.wait()
            group.cancel_scope.cancel()

    async def aclose(self) -> None:
        """Close the upstream pool, or hand the shared one back (called once no request of this
        proxy is in flight); a request still waiting for it gets 502 (the proxy closed)."""
        if self._relay is None:
            self._relay = self._new_relay(None, None)
        self._relay_ready.set()
        if self._pools is not None:
            lease, self._lease = self._lease, None
            if lease is not None:
                self._pools.release(lease)
            return
        with anyio.CancelScope(shield=True):
            await self._relay.aclose()

    def _new_relay(
        self, pool: httpcore.AsyncConnectionPool | None, error: Exception | None
    ) -> Relay:
        connect, read = self._timeouts
        return Relay(
            self._routes, self._accounts, pool, error, connect_timeout=connect, read_timeout=read
        )

    async def _build_relay(self) -> None:
        """The upstream pool; on failure the error is kept and every request answered 502 with
        it. Never raises."""
        pool: httpcore.AsyncConnectionPool | None = None
        error: Exception | None = None
        upstream = self._routes.upstream
        try:
            if self._pools is None:
                pool = open_pool(upstream, trust_env=self._trust_env)
            else:
                pool, self._lease = self._pools.acquire(upstream, trust_env=self._trust_env)
        except Exception as exc:
            error = exc
            logger.error(
                "jigs.proxy.client_failed",
                error=type(exc).__name__,
                upstream=self._routes.upstream,
                port=self._accounts.port,
            )
        self._relay = self._new_relay(pool, error)
        self._relay_ready.set()

    def _accept_failed(self, exc: OSError) -> None:
        logger.warning("jigs.proxy.accept_failed", port=self._accounts.port, error=str(exc))

    async def _serve_connection(self, stream: anyio.abc.SocketStream) -> None:
        await serve_requests(
            Http1Server(stream, max_head=_MAX_HEAD),
            self._handle,
            bad_request=_bad_request,
            failed=self._internal_error,
        )

    def _internal_error(self, exc: Exception) -> None:
        port = self._accounts.port
        logger.error("jigs.proxy.internal_error", error=type(exc).__name__, port=port)

    async def _handle(self, conn: Http1Server, request: h11.Request) -> bool:
        """Answer one request; ``False`` if the connection must close afterwards."""
        route = self._routes.check(request, closed=self._closed())
        if isinstance(route, Refusal):
            await self._refuse(conn, request, route)
            return False
        await self._relay_ready.wait()
        assert self._relay is not None  # set before the event
        return await self._relay.forward(conn, request, route)

    async def _refuse(self, conn: Http1Server, request: h11.Request, refusal: Refusal) -> None:
        self._accounts.refused += 1
        method = request.method.decode("ascii", "replace")
        logger.warning(
            "jigs.proxy.refused",
            reason=refusal.reason,
            status=refusal.status,
            method=method,
            path=refusal.path[:200],  # the client's own path, after the token; never the query
            port=self._accounts.port,
        )
        body = self._routes.refusal_body(refusal, method)
        await conn.respond(refusal.status, _JSON, body)
        # Let the client finish sending, so it reads the answer rather than a reset.
        await conn.linger(_LINGER, 16 * 65536)


async def _bad_request(conn: Http1Server, exc: h11.RemoteProtocolError) -> None:
    with contextlib.suppress(ClientGone, h11.LocalProtocolError):
        body = error_body("invalid_request_error", f"bad HTTP request: {exc}")
        await conn.respond(exc.error_status_hint, _JSON, body)
