"""The credential proxy's relay: one admitted request sent upstream through the httpcore pool
(its body streamed as it arrives) and the response streamed back as the upstream sends it, the
secrets masked on the way (:class:`~jigs.policy._redact.StreamRedactor`), the usage read on the
side, and the request's :class:`~jigs.proxy._accounting.Tally` recorded whatever happens.

Upstream failures never raise: the client gets 502 (unreachable, or a compressed body the proxy
cannot check) or 504 (timed out) before a response started, or a cut connection after.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable

import anyio
import h11
import httpcore

from jigs.engine._logging import logger
from jigs.policy._redact import StreamRedactor, redact_bytes
from jigs.proxy._accounting import Accounts, ProxiedRequest, Tally
from jigs.proxy._http1 import ClientGone, Http1Server
from jigs.proxy._routes import Pass, Routes, error_body, header
from jigs.proxy._upstream import timeouts
from jigs.proxy._usage import UsageTap

__all__ = ["Relay", "relay_chunks"]

_JSON = [("content-type", "application/json")]


class _EncodedBody(Exception):
    """The upstream sent a compressed body although asked for none (it cannot be checked for
    the key, so it is not relayed)."""


class Relay:
    """Forwards one proxy's admitted requests through ``pool`` (``None``: it could not be built,
    ``error`` says why) and records each in ``accounts``."""

    def __init__(
        self,
        routes: Routes,
        accounts: Accounts,
        pool: httpcore.AsyncConnectionPool | None,
        error: Exception | None,
        *,
        connect_timeout: float,
        read_timeout: float,
    ) -> None:
        self._routes = routes
        self._accounts = accounts
        self._pool = pool
        self._error = error
        self._timeouts = timeouts(connect_timeout, read_timeout)

    async def aclose(self) -> None:
        """Close the pool (its connections with it)."""
        if self._pool is not None:
            await self._pool.aclose()

    async def forward(self, conn: Http1Server, request: h11.Request, route: Pass) -> bool:
        """Relay ``request``; ``False`` if the client's connection must close afterwards."""
        tally = Tally(request.method.decode("ascii", "replace"), route.path)
        if self._pool is None:
            return await self._no_pool(conn, tally)
        body: AsyncGenerator[bytes, None] | None = None
        try:
            headers, has_body = self._routes.upstream_headers(request)
            if has_body:
                body = _counted(conn, tally)
            elif not isinstance(await conn.next_event(), h11.EndOfMessage):
                raise ClientGone
            scheme, host, port = self._routes.origin
            outgoing = httpcore.Request(
                request.method,
                httpcore.URL(
                    scheme=scheme, host=host, port=port, target=route.target.encode("latin-1")
                ),
                headers=headers,
                content=body,
                extensions=self._timeouts,
            )
            response = await self._send(conn, self._pool, outgoing, tally)
            return response is not None and await self._respond(conn, response, tally)
        except ClientGone:
            tally.outcome = "client_gone"
            return False
        except anyio.get_cancelled_exc_class():
            tally.outcome = "closed"
            raise
        finally:
            if body is not None:
                with anyio.CancelScope(shield=True):
                    await body.aclose()
            self._accounts.record(tally.record())

    async def _send(
        self,
        conn: Http1Server,
        pool: httpcore.AsyncConnectionPool,
        outgoing: httpcore.Request,
        tally: Tally,
    ) -> httpcore.Response | None:
        """The upstream's response head, or ``None`` when it failed (answered and logged)."""
        try:
            return await pool.handle_async_request(outgoing)
        except httpcore.TimeoutException as exc:
            tally.failed(504, "upstream_timeout")
            await self._failed(conn, tally, exc)
        except ClientGone:
            raise
        except Exception as exc:  # failed, and whatever else the transport raises
            tally.failed(502, "upstream_unreachable")
            await self._failed(conn, tally, exc)
        return None

    async def _respond(self, conn: Http1Server, response: httpcore.Response, tally: Tally) -> bool:
        """Relay ``response`` to the client; whether it ended whole."""
        chunks = response.aiter_stream()
        try:
            tally.status = response.status
            head = self._routes.response_head(response)
            if head is None:
                tally.failed(502, "upstream_unreachable")
                await self._failed(conn, tally, _EncodedBody())
                return False
            headers, reason = head
            await conn.start_response(
                h11.Response(status_code=response.status, headers=headers, reason=reason)
            )
            tally.tap = UsageTap(
                header(response.headers, b"content-type"),
                header(response.headers, b"content-encoding"),
            )
            broken = await self._stream(conn, chunks, tally, tally.tap)
            if broken is not None:
                tally.outcome = "upstream_cut"
                logger.warning(
                    "jigs.proxy.upstream_cut",
                    path=tally.path,
                    status=tally.status,
                    error=type(broken).__name__,
                    port=self._accounts.port,
                )
                return False  # what the redactor holds is cut off with the rest
            await conn.end_response()
            return True
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()
                await _finish(chunks)

    async def _stream(
        self, conn: Http1Server, chunks: AsyncIterator[bytes], tally: Tally, tap: UsageTap
    ) -> Exception | None:
        """The body, masked, as it arrives; the upstream error that cut it off, if one did."""
        feed = tap.feed
        redactor = StreamRedactor(self._routes.secrets)

        def seen(chunk: bytes) -> None:
            tally.response_bytes += len(chunk)
            feed(chunk)

        async def write(data: bytes) -> None:
            data = redactor.feed(data)
            if data:  # all held back (a secret's start): an empty chunk would end the body
                tally.sent()
                await conn.send_data(data)

        broken = await relay_chunks(chunks, seen, write)
        if broken is None:
            await conn.send_data(redactor.flush())
        return broken

    async def _failed(self, conn: Http1Server, tally: Tally, exc: Exception) -> None:
        """The upstream failed: logged, and answered if no response started."""
        upstream = self._routes.upstream
        logger.warning(
            "jigs.proxy.upstream_failed",
            path=tally.path,
            status=tally.status,
            error=type(exc).__name__,
            upstream=upstream,
            port=self._accounts.port,
        )
        if not conn.response_started:
            what = "timed out" if tally.status == 504 else f"is unreachable ({type(exc).__name__})"
            if isinstance(exc, _EncodedBody):
                what = "sent a compressed body, which the proxy cannot check for the key"
            body = error_body("api_error", f"the upstream {upstream} {what}")
            with contextlib.suppress(ClientGone, h11.LocalProtocolError):
                await conn.respond(tally.status, _JSON, body)

    async def _no_pool(self, conn: Http1Server, tally: Tally) -> bool:
        """The upstream client could not be built (or the proxy closed first): 502, recorded."""
        error = self._error
        why = f"{type(error).__name__}: {error}"[:300] if error is not None else "proxy closed"
        body = error_body(
            "api_error",
            f"the credential proxy cannot reach the upstream {self._routes.upstream}: its HTTP "
            f"client could not be built ({why}); check SSL_CERT_FILE / SSL_CERT_DIR and the "
            "proxy variables (HTTPS_PROXY, ALL_PROXY)",
        )
        with contextlib.suppress(ClientGone, h11.LocalProtocolError):
            await conn.respond(502, _JSON, redact_bytes(body, self._routes.secrets))
        self._accounts.record(
            ProxiedRequest(
                method=tally.method,
                path=tally.path,
                status=502,
                usage=None,
                model=None,
                request_bytes=0,
                response_bytes=0,
                seconds=0.0,
                first_byte_seconds=None,
                outcome="upstream_unreachable",
            )
        )
        return False


async def _counted(conn: Http1Server, tally: Tally) -> AsyncGenerator[bytes, None]:
    """The client's request body for httpcore, counted; a client that breaks off mid-body (a
    malformed body included) is :class:`ClientGone`, never an upstream failure."""
    parts = conn.body()
    try:
        while True:
            try:
                part = await parts.__anext__()
            except StopAsyncIteration:
                return
            except h11.RemoteProtocolError as exc:  # the client hung up mid-body
                raise ClientGone from exc
            tally.request_bytes += len(part)
            yield part
    finally:
        await parts.aclose()


async def relay_chunks(
    chunks: AsyncIterator[bytes],
    seen: Callable[[bytes], None],
    write: Callable[[bytes], Awaitable[None]],
) -> Exception | None:
    """Copy an upstream body to the client as it arrives; the upstream error that cut it off,
    or ``None`` at its end. Raises what ``write`` raises (:class:`ClientGone`).

    A reader task takes each chunk the moment it is parsed (``seen`` sees it) and the writer
    sends everything that arrived while it was busy in one write: one write per event when
    events come apart (the SSE first byte is never held back), far fewer than one per event
    when the upstream bursts.
    """
    pending: list[bytes] = []
    wake = [anyio.Event()]
    ended: list[Exception | None] = []

    async def read() -> None:
        try:
            async for chunk in chunks:
                seen(chunk)
                pending.append(chunk)
                wake[0].set()
        except Exception as exc:  # whatever broke reading the upstream body cut it off
            ended.append(exc)
        else:
            ended.append(None)
        wake[0].set()

    gone: ClientGone | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(read)
        while True:
            await wake[0].wait()
            wake[0] = anyio.Event()
            if pending:
                data = pending[0] if len(pending) == 1 else b"".join(pending)
                pending.clear()
                try:
                    await write(data)
                except ClientGone as exc:
                    gone = exc
                    group.cancel_scope.cancel()
                    break
            if ended and not pending:
                break
    if gone is not None:
        raise gone
    return ended[0]


async def _finish(chunks: AsyncIterator[bytes]) -> None:
    """Run a left-off httpcore body iterator to its end once its response is closed.

    Leaving it suspended would leave httpcore's nested generators to the garbage collector (trio
    warns about each); with the connection closed the next read fails at once and unwinds them
    all. Bounded, in case bytes were already buffered.
    """
    with anyio.move_on_after(1.0), contextlib.suppress(Exception):
        async for _ in chunks:
            pass
