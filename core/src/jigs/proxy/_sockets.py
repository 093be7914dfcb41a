"""The listening sockets one credential proxy serves: its own loopback socket, and one more per
sandboxed launch (made inside that launch's network namespace, on the same port), each with its
accept loop on the proxy's task group."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel

from jigs.proxy._accept import accept_forever
from jigs.sandbox._netns import listening_socket

__all__ = ["Sockets", "loopback_socket"]

Handler = Callable[[anyio.abc.SocketStream], Coroutine[Any, Any, None]]


def loopback_socket() -> socket.socket:
    """A listening, non-blocking socket on ``127.0.0.1`` and a fresh port, bound here rather
    than through ``anyio.create_tcp_listener``, whose address lookup starts an executor thread
    on the proxy's event loop (the first step of a process pays for it). Raises ``OSError``."""
    return listening_socket(0)


async def _listener(sock: socket.socket | None) -> anyio.abc.SocketListener:
    """An anyio listener on ``sock``, or on a fresh :func:`loopback_socket`. Raises ``OSError``
    (the socket is closed then)."""
    sock = sock if sock is not None else loopback_socket()
    try:
        return await anyio.abc.SocketListener.from_socket(sock)
    except BaseException:
        sock.close()
        raise


class Sockets:
    """``sock`` (``None``: a fresh loopback socket when served) and the sockets :meth:`add`
    hands over, which may come from any thread, before or while they are served. They are owned
    here: closed when served no more, or by :meth:`close`."""

    def __init__(self, sock: socket.socket | None) -> None:
        self._sock = sock
        self._more: list[socket.socket] = []
        self._lock = threading.Lock()
        self._serve_more: Callable[[socket.socket], None] | None = None
        self._closed = False

    async def listen(self) -> anyio.abc.SocketListener:
        """The listener on the proxy's own socket. Raises ``OSError``."""
        return await _listener(self._sock)

    def add(self, sock: socket.socket) -> None:
        """Serve ``sock`` too (at once if serving, else once :meth:`serve` runs); closed at once
        after :meth:`close`."""
        with self._lock:
            if self._closed:
                sock.close()
                return
            serve = self._serve_more
            if serve is None:
                self._more.append(sock)
                return
        serve(sock)

    def close(self, *, own: bool) -> None:
        """No more sockets: close the ones not served yet (and the proxy's own if ``own``)."""
        with self._lock:
            self._closed = True
            pending, self._more = self._more, []
        for sock in pending:
            sock.close()
        if own and self._sock is not None:
            self._sock.close()

    def serve(
        self,
        group: anyio.abc.TaskGroup,
        listener: anyio.abc.SocketListener,
        handle: Handler,
        failed: Callable[[OSError], None],
    ) -> None:
        """On the serving loop: accept on ``listener`` and every socket added so far, each
        connection handled by ``handle`` in ``group``; set how later ones start."""
        token = anyio.lowlevel.current_token()
        group.start_soon(accept_forever, listener, group, handle, failed)

        def serve_here(sock: socket.socket) -> None:
            group.start_soon(_serve_socket, sock, group, handle, failed)

        def serve(sock: socket.socket) -> None:
            try:
                same_loop = anyio.lowlevel.current_token() == token
            except RuntimeError:  # not on any event loop
                same_loop = False
            try:
                if same_loop:
                    serve_here(sock)
                else:
                    anyio.from_thread.run_sync(serve_here, sock, token=token)
            except RuntimeError:  # the loop ended meanwhile
                sock.close()

        with self._lock:
            pending, self._more = self._more, []
            self._serve_more = serve
        for sock in pending:
            serve_here(sock)


async def _serve_socket(
    sock: socket.socket,
    group: anyio.abc.TaskGroup,
    handle: Handler,
    failed: Callable[[OSError], None],
) -> None:
    listener = await _listener(sock)
    try:
        await accept_forever(listener, group, handle, failed)
    finally:
        with anyio.CancelScope(shield=True):
            await listener.aclose()
