"""HTTP/1.1 over one anyio byte stream: read whole requests, write plain, partial or streamed
responses, keep the connection alive between requests.

The HTTP/1.1 layer is jigs' own (:mod:`jigs.proxy._http1`, over h11, shared with the
credential and egress proxies); this adds what a test server needs on top: whole decoded
bodies, cut-off responses and a lingering close. Every write goes straight to the socket, so
each streamed event is flushed on its own. A peer that goes away surfaces as
:class:`ClientGone`, never as a raw socket error.
"""

from __future__ import annotations

import contextlib
import zlib
from dataclasses import dataclass

import anyio
import anyio.abc
import h11
from jigs.proxy._http1 import ClientGone, Http1Server, phrase

__all__ = ["BodyTooLarge", "ClientGone", "HttpConnection", "HttpRequest", "UnsupportedEncoding"]

MAX_BODY = 64 * 1024 * 1024
"""Largest request body accepted (after decompression), in bytes."""

LINGER = 2.0
"""Seconds :meth:`HttpConnection.close` waits for the client to close its side."""

_MAX_HEAD = 256 * 1024


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


class HttpConnection(Http1Server):
    """The server side of one client connection.

    Use :meth:`receive_request`, then exactly one of :meth:`send_response` or
    :meth:`start_stream` + :meth:`send_data`… + :meth:`end_stream` (or :meth:`close` to cut
    it off), then :meth:`next_cycle` to keep the connection for the next request.
    """

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        super().__init__(stream, max_head=_MAX_HEAD)
        self.closed = False

    async def receive_request(self) -> HttpRequest | None:
        """The next request with its whole body, or ``None`` when the client closed cleanly.

        Raises :class:`h11.RemoteProtocolError` for malformed HTTP, :class:`BodyTooLarge`,
        :class:`UnsupportedEncoding` and :class:`ClientGone` (closed mid-request).
        """
        event = await self.read_request()
        if event is None:
            return None
        body = bytearray()
        async for part in self.body():
            body += part
            if len(body) > MAX_BODY:
                raise BodyTooLarge
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

    async def write(self, data: bytes, timeout: float | None = None) -> None:
        try:
            await super().write(data, timeout)
        except ClientGone:
            self.closed = True
            raise

    @staticmethod
    def _head(status: int, headers: list[tuple[str, str]]) -> h11.Response:
        return h11.Response(status_code=status, headers=headers, reason=phrase(status))

    async def send_response(
        self,
        status: int,
        headers: list[tuple[str, str]],
        body: bytes,
        *,
        close: bool = False,
    ) -> None:
        """A complete response with ``content-length`` (the body is left out for HEAD)."""
        await self.respond(status, headers, body, close=close, reason=phrase(status))

    async def send_partial_response(
        self, status: int, headers: list[tuple[str, str]], body: bytes, sent: int
    ) -> None:
        """Announce ``len(body)`` bytes, send the first ``sent``, then close the connection."""
        headers = [*headers, ("content-length", str(len(body)))]
        try:
            await self.start_response(self._head(status, headers))
            await self.send_data(body[:sent])
        finally:
            await self.close()

    async def start_stream(self, status: int, headers: list[tuple[str, str]]) -> None:
        """A response head without a length: the body goes out chunked."""
        await self.start_response(self._head(status, headers))

    async def end_stream(self) -> None:
        """Finish a streamed body (the terminating zero-length chunk)."""
        await self.end_response()

    async def close(self) -> None:
        """Close the connection now, whatever was or was not sent, but deliver what was sent.

        Sends FIN after any buffered bytes, then waits (at most :data:`LINGER` seconds) for
        the client to close its side, so that a cut-off response reaches the client intact up
        to the cut instead of being discarded by an abortive close.
        """
        if self.closed:
            return
        self.closed = True
        await self.linger(LINGER)
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await self.stream.aclose()

    async def send_protocol_error(self, exc: h11.RemoteProtocolError) -> None:
        """Answer malformed HTTP with a plain-text error status, if still possible, and close."""
        if not self.response_started:
            body = f"bad request: {exc}\n".encode()
            status = exc.error_status_hint
            headers = [("content-type", "text/plain; charset=utf-8")]
            with contextlib.suppress(ClientGone, h11.LocalProtocolError):
                await self.send_response(status, headers, body, close=True)
        await self.close()

    def next_cycle(self) -> bool:
        """Prepare for the next request on this connection; ``False`` if it must close."""
        return not self.closed and super().next_cycle()
