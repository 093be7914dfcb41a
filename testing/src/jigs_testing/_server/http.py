"""HTTP/1.1 over one anyio byte stream, with h11: read requests, write plain or chunked
responses, keep the connection alive between requests.

Every write goes straight to the socket, so each streamed event is flushed on its own. A peer
that goes away surfaces as :class:`ClientGone`, never as a raw socket error.
"""

from __future__ import annotations

import contextlib
import zlib
from dataclasses import dataclass
from http import HTTPStatus
from typing import cast

import anyio
import anyio.abc
import h11

__all__ = ["BodyTooLarge", "ClientGone", "HttpConnection", "HttpRequest", "UnsupportedEncoding"]

MAX_BODY = 64 * 1024 * 1024
"""Largest request body accepted (after decompression), in bytes."""

LINGER = 2.0
"""Seconds :meth:`HttpConnection.close` waits for the client to close its side."""

_READ_SIZE = 65536
_MAX_HEAD = 256 * 1024
_IO_ERRORS = (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError)


class ClientGone(Exception):
    """The client closed or reset the connection."""


class BodyTooLarge(Exception):
    """The request body is larger than :data:`MAX_BODY`."""


class UnsupportedEncoding(Exception):
    """The request body uses a ``content-encoding`` other than gzip or deflate."""


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """A complete request. Header values stay in memory for routing only; never log them."""

    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    @property
    def header_names(self) -> tuple[str, ...]:
        """Lower-cased header names in arrival order."""
        return tuple(name for name, _ in self.headers)

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (lower-case), or ``None``."""
        for key, value in self.headers:
            if key == name:
                return value
        return None


def _decode_body(body: bytes, encoding: str | None) -> bytes:
    if not encoding or encoding.strip().lower() == "identity":
        return body
    name = encoding.strip().lower()
    if name in ("gzip", "x-gzip"):
        wbits = 16 + zlib.MAX_WBITS
    elif name == "deflate":
        wbits = zlib.MAX_WBITS
    else:
        raise UnsupportedEncoding(name)
    decoder = zlib.decompressobj(wbits)
    try:
        data = decoder.decompress(body, MAX_BODY + 1)
    except zlib.error as exc:
        raise UnsupportedEncoding(f"{name} (corrupt: {exc})") from exc
    if len(data) > MAX_BODY:
        raise BodyTooLarge
    return data


class HttpConnection:
    """The server side of one client connection.

    Use :meth:`read_request`, then exactly one of :meth:`send_response` or
    :meth:`start_stream` + :meth:`send_data`… + :meth:`end_stream` (or :meth:`close` to cut
    it off), then :meth:`next_cycle` to keep the connection for the next request.
    """

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self._stream = stream
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD)
        self._is_head_request = False
        self.closed = False

    @property
    def response_started(self) -> bool:
        """Whether a response head has been sent for the current request."""
        return self._h11.our_state not in (h11.IDLE, h11.SEND_RESPONSE)

    async def _next_event(self) -> h11.Event | type[h11.PAUSED]:
        while True:
            event = self._h11.next_event()
            if event is not h11.NEED_DATA:
                return cast("h11.Event | type[h11.PAUSED]", event)
            try:
                data = await self._stream.receive(_READ_SIZE)
            except _IO_ERRORS:
                data = b""
            self._h11.receive_data(data)

    async def read_request(self) -> HttpRequest | None:
        """The next request with its whole body, or ``None`` when the client closed cleanly.

        Raises :class:`h11.RemoteProtocolError` for malformed HTTP, :class:`BodyTooLarge`,
        :class:`UnsupportedEncoding` and :class:`ClientGone` (closed mid-request).
        """
        event = await self._next_event()
        if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
            return None
        if not isinstance(event, h11.Request):
            raise h11.RemoteProtocolError(f"expected a request, got {type(event).__name__}")
        self._is_head_request = event.method.upper() == b"HEAD"
        if self._h11.they_are_waiting_for_100_continue:
            await self._send(h11.InformationalResponse(status_code=100, headers=[]))
        body = bytearray()
        while True:
            part = await self._next_event()
            if isinstance(part, h11.Data):
                body += part.data
                if len(body) > MAX_BODY:
                    raise BodyTooLarge
            elif isinstance(part, h11.EndOfMessage):
                break
            else:
                raise ClientGone
        headers = tuple(
            (name.decode("latin-1").lower(), value.decode("latin-1"))
            for name, value in event.headers
        )
        request = HttpRequest(
            method=event.method.decode("ascii", "replace").upper(),
            target=event.target.decode("latin-1"),
            headers=headers,
            body=bytes(body),
        )
        decoded = _decode_body(request.body, request.header("content-encoding"))
        if decoded is not request.body:
            request = HttpRequest(request.method, request.target, request.headers, decoded)
        return request

    async def _send(self, event: h11.Event) -> None:
        data = self._h11.send(event)
        if data:
            try:
                await self._stream.send(data)
            except _IO_ERRORS as exc:
                self.closed = True
                raise ClientGone from exc

    @staticmethod
    def _response_head(status: int, headers: list[tuple[str, str]], close: bool) -> h11.Response:
        if close:
            headers = [*headers, ("connection", "close")]
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = ""
        return h11.Response(status_code=status, headers=headers, reason=reason)

    async def send_response(
        self,
        status: int,
        headers: list[tuple[str, str]],
        body: bytes,
        *,
        close: bool = False,
    ) -> None:
        """A complete response with ``content-length`` (the body is left out for HEAD)."""
        headers = [*headers, ("content-length", str(len(body)))]
        await self._send(self._response_head(status, headers, close))
        if body and not self._is_head_request:
            await self._send(h11.Data(data=body))
        await self._send(h11.EndOfMessage())

    async def send_partial_response(
        self, status: int, headers: list[tuple[str, str]], body: bytes, sent: int
    ) -> None:
        """Announce ``len(body)`` bytes, send the first ``sent``, then close the connection."""
        headers = [*headers, ("content-length", str(len(body)))]
        await self._send(self._response_head(status, headers, close=False))
        try:
            await self._stream.send(self._h11.send(h11.Data(data=body[:sent])) or b"")
        except _IO_ERRORS as exc:
            raise ClientGone from exc
        finally:
            await self.close()

    async def start_stream(self, status: int, headers: list[tuple[str, str]]) -> None:
        """A response head without a length: the body goes out chunked."""
        await self._send(self._response_head(status, headers, close=False))

    async def send_data(self, data: bytes) -> None:
        """One chunk of a streamed body, written to the socket at once."""
        await self._send(h11.Data(data=data))

    async def end_stream(self) -> None:
        """Finish a streamed body (the terminating zero-length chunk)."""
        await self._send(h11.EndOfMessage())

    async def close(self) -> None:
        """Close the connection now, whatever was or was not sent, but deliver what was sent.

        Sends FIN after any buffered bytes, then waits (at most :data:`LINGER` seconds) for
        the client to close its side, so that a cut-off response reaches the client intact up
        to the cut instead of being discarded by an abortive close.
        """
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(*_IO_ERRORS):
            await self._stream.send_eof()
            with anyio.move_on_after(LINGER):
                while True:
                    await self._stream.receive(_READ_SIZE)
        with contextlib.suppress(*_IO_ERRORS):
            await self._stream.aclose()

    async def send_protocol_error(self, exc: h11.RemoteProtocolError) -> None:
        """Answer malformed HTTP with a plain-text error status, if still possible, and close."""
        if self._h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            body = f"bad request: {exc}\n".encode()
            status = exc.error_status_hint
            headers = [("content-type", "text/plain; charset=utf-8")]
            with contextlib.suppress(ClientGone, h11.LocalProtocolError):
                await self.send_response(status, headers, body, close=True)
        await self.close()

    def next_cycle(self) -> bool:
        """Prepare for the next request on this connection; ``False`` if it must close."""
        if self.closed:
            return False
        if self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
            self._h11.start_next_cycle()
            return True
        return False
