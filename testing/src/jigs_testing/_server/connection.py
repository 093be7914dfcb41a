"""One client connection: read requests, hand each to the application, keep alive."""

from __future__ import annotations

import contextlib

import anyio.abc
import h11

from .app import Application
from .http import BodyTooLarge, ClientGone, HttpConnection, UnsupportedEncoding
from .logline import logger

__all__ = ["serve_connection"]

_TEXT = [("content-type", "text/plain; charset=utf-8")]


async def serve_connection(stream: anyio.abc.ByteStream, app: Application) -> None:
    """Serve requests on ``stream`` until the client closes it or a response closes it.

    Never raises for anything the client does (bad HTTP, oversized bodies, disconnects); an
    unexpected error in the application is logged, kept in ``failures``, answered with a 500
    when no response has started, and ends this connection only.
    """
    conn = HttpConnection(stream)
    async with stream:
        try:
            await _serve_requests(conn, app)
            await conn.close()
        except ClientGone:
            conn.closed = True
            logger.debug("client closed the connection")


async def _serve_requests(conn: HttpConnection, app: Application) -> None:
    """Answer requests until the connection cannot be reused; raises only ClientGone."""
    while True:
        try:
            request = await conn.receive_request()
        except h11.RemoteProtocolError as exc:
            await conn.send_protocol_error(exc)
            return
        except BodyTooLarge:
            await conn.send_response(413, _TEXT, b"request body too large\n", close=True)
            return
        except UnsupportedEncoding as exc:
            body = f"unsupported content-encoding: {exc}\n".encode()
            await conn.send_response(415, _TEXT, body, close=True)
            return
        if request is None:
            return
        try:
            await app.handle(request, conn)
        except ClientGone:
            raise
        except Exception as exc:
            await _internal_error(conn, app, exc)
            return
        if not conn.next_cycle():
            return


async def _internal_error(conn: HttpConnection, app: Application, exc: Exception) -> None:
    message = f"jigs_testing.ModelServer: internal error: {type(exc).__name__}: {exc}"
    app.state.add_failure(message)
    logger.error("%s", message, exc_info=exc)
    if not conn.response_started:
        with contextlib.suppress(ClientGone, h11.LocalProtocolError):
            await conn.send_response(500, _TEXT, f"{message}\n".encode(), close=True)
    await conn.close()
