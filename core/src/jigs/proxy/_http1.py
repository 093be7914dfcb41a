"""The server side of one HTTP/1.1 connection over an anyio stream, with h11: the one layer the
credential proxy, the sandbox's egress proxy and ``jigs_testing``'s model server speak HTTP
through.

:class:`Http1Server` reads request heads and bodies, writes complete or streamed responses and
keeps the connection for the next request; :func:`serve_requests` is the loop around it. A peer
that goes away (a reset, a write to a closed socket) or stays silent past the connection's
timeout surfaces as :class:`ClientGone`, never as a raw socket error; a clean end of stream
reads as h11's ``ConnectionClosed`` (or h11's ``RemoteProtocolError`` mid-message). Every write
goes straight to the socket, so each streamed event is flushed on its own; a chunked response
body is framed here rather than by h11 (it is the proxy's per-event hot path).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from http import HTTPStatus
from typing import cast

import anyio
import anyio.abc
import h11

__all__ = ["READ_SIZE", "ClientGone", "Http1Server", "phrase", "serve_requests"]

READ_SIZE = 65536
"""The most one read takes from the socket."""

_IO_ERRORS = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


class ClientGone(Exception):
    """The client closed or reset its connection, or sent or read nothing in time."""


def phrase(status: int) -> bytes:
    """The standard reason phrase of ``status`` (empty for an unknown one)."""
    try:
        return HTTPStatus(status).phrase.encode("ascii")
    except ValueError:
        return b""


class Http1Server:
    """One client connection. ``timeout``, if given, bounds each wait for the client to send or
    to take bytes (``None``: no bound); every read and write may override it.

    Use :meth:`read_request`, then the body (:meth:`body`, or :meth:`next_event` as the caller
    likes), then a response (:meth:`respond`, or :meth:`start_response` + :meth:`send_data`… +
    :meth:`end_response`), then :meth:`next_cycle` to keep the connection."""

    def __init__(
        self, stream: anyio.abc.ByteStream, *, max_head: int, timeout: float | None = None
    ) -> None:
        self.stream = stream
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=max_head)
        self.timeout = timeout
        self._head_request = False
        self._chunked = False

    @property
    def response_started(self) -> bool:
        """Whether a response head has been sent for the current request."""
        return self.h11.our_state not in (h11.IDLE, h11.SEND_RESPONSE)

    async def next_event(self, timeout: float | None = None) -> h11.Event:
        """The client's next h11 event (``PAUSED``, after a ``CONNECT``, reads as
        ``ConnectionClosed``). Raises :class:`ClientGone` and h11's ``RemoteProtocolError``."""
        limit = self.timeout if timeout is None else timeout
        conn = self.h11
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await self._receive(limit))
                continue
            if event is h11.PAUSED:
                return h11.ConnectionClosed()
            if type(event) is h11.Request:
                self._head_request = event.method.upper() == b"HEAD"
            return cast("h11.Event", event)

    async def _receive(self, limit: float | None) -> bytes:
        if limit is None:
            return await self._receive_now()
        with anyio.move_on_after(limit):
            return await self._receive_now()
        raise ClientGone("idle")

    async def _receive_now(self) -> bytes:
        try:
            return await self.stream.receive(READ_SIZE)
        except anyio.EndOfStream:
            return b""
        except _IO_ERRORS as exc:
            raise ClientGone from exc

    async def read_request(self, timeout: float | None = None) -> h11.Request | None:
        """The next request head; ``None`` when the client closed the connection instead."""
        event = await self.next_event(timeout)
        return event if isinstance(event, h11.Request) else None

    async def body(self) -> AsyncGenerator[bytes, None]:
        """The request body as it arrives (a ``100 Continue`` sent first when the client waits
        for one). Raises :class:`ClientGone` when the client leaves mid-body, h11's
        ``RemoteProtocolError`` for a malformed one."""
        if self.h11.they_are_waiting_for_100_continue:
            await self.send(h11.InformationalResponse(status_code=100, headers=[]))
        while True:
            part = await self.next_event()
            if isinstance(part, h11.Data):
                yield bytes(part.data)
            elif isinstance(part, h11.EndOfMessage):
                return
            else:
                raise ClientGone("the client left mid-body")

    async def write(self, data: bytes, timeout: float | None = None) -> None:
        """Raw bytes to the client. Raises :class:`ClientGone`."""
        limit = self.timeout if timeout is None else timeout
        if limit is None:
            await self._write_now(data)
            return
        with anyio.move_on_after(limit):
            await self._write_now(data)
            return
        raise ClientGone("idle")

    async def _write_now(self, data: bytes) -> None:
        try:
            await self.stream.send(data)
        except (*_IO_ERRORS, anyio.EndOfStream) as exc:
            raise ClientGone from exc

    async def send(self, event: h11.Event, timeout: float | None = None) -> None:
        """One h11 event to the client. Raises :class:`ClientGone` and h11's
        ``LocalProtocolError``."""
        data = self.h11.send(event)
        if data:
            await self.write(data, timeout)

    async def start_response(self, head: h11.Response, timeout: float | None = None) -> None:
        """A response head; its body follows with :meth:`send_data`."""
        data = self.h11.send(head) or b""
        self._chunked = b"\r\ntransfer-encoding: chunked\r\n" in data.lower()
        await self.write(data, timeout)

    async def send_data(self, data: bytes, timeout: float | None = None) -> None:
        """One piece of the response body, written at once (an empty one is nothing)."""
        if not data:
            return
        if self._chunked:
            await self.write(b"%x\r\n%b\r\n" % (len(data), data), timeout)
        else:
            await self.send(h11.Data(data=data), timeout)

    async def end_response(self, timeout: float | None = None) -> None:
        """The end of the response body."""
        await self.send(h11.EndOfMessage(), timeout)

    async def respond(
        self,
        status: int,
        headers: Sequence[tuple[str, str]],
        body: bytes,
        *,
        close: bool = True,
        reason: bytes = b"",
        timeout: float | None = None,
    ) -> None:
        """A complete response with its ``content-length`` (the body left out for a ``HEAD``),
        closing the connection unless ``close`` is false."""
        fields = [*headers, ("content-length", str(len(body)))]
        if close:
            fields.append(("connection", "close"))
        head = h11.Response(status_code=status, headers=fields, reason=reason)
        await self.start_response(head, timeout)
        if not self._head_request:
            await self.send_data(body, timeout)
        await self.end_response(timeout)

    async def linger(self, seconds: float, limit: int | None = None) -> None:
        """End our side, then read what the client still sends (for at most ``seconds``, and
        ``limit`` bytes), so it reads the answer rather than a reset. Never raises."""
        with contextlib.suppress(*_IO_ERRORS, anyio.EndOfStream):
            await self.stream.send_eof()
            with anyio.move_on_after(seconds):
                received = 0
                while limit is None or received < limit:
                    received += len(await self.stream.receive(READ_SIZE))

    def next_cycle(self) -> bool:
        """Prepare for the next request; ``False`` if the connection must close."""
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
            return True
        return False


async def serve_requests(
    conn: Http1Server,
    handle: Callable[[Http1Server, h11.Request], Awaitable[bool]],
    *,
    bad_request: Callable[[Http1Server, h11.RemoteProtocolError], Awaitable[None]],
    failed: Callable[[Exception], None],
    head_timeout: float | None = None,
) -> None:
    """Answer requests on ``conn`` until the client leaves, ``handle`` returns ``False`` (the
    connection must close) or a response leaves it unusable, then close its stream.

    Malformed HTTP is answered by ``bad_request`` when no response has started; a client gone
    ends the connection quietly; anything else ``handle`` raises is given to ``failed`` and costs
    this connection only."""
    async with conn.stream:
        try:
            while True:
                request = await conn.read_request(head_timeout)
                if request is None or not await handle(conn, request):
                    return
                if not conn.next_cycle():
                    return
        except h11.RemoteProtocolError as exc:
            if not conn.response_started:
                await bad_request(conn, exc)
        except ClientGone:
            return
        except Exception as exc:  # a bug here must cost one connection, not the server
            failed(exc)
