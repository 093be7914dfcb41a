"""Byte relays: a listening socket whose every connection is joined to a fresh target stream.

:func:`relay` serves a listener (an anyio socket listener, or a listening ``socket.socket``)
until cancelled: each accepted connection gets its own target stream from ``connect`` (for a TCP
service on the worker's side, :func:`tcp_connector`) and bytes are copied both ways by
:func:`splice` until both directions have ended. The sandbox uses it to make an MCP server on the
worker's loopback appear at the same address inside the agent's network namespace; the egress
proxy uses :func:`splice` for its tunnels.

Contract:

- half-close passes through: end of stream on one side becomes ``send_eof`` on the other, and
  the opposite direction keeps flowing until it ends too; only then are both streams closed
  (a stream that cannot half-close, TLS, is not told: its direction simply stops);
- buffering is bounded: each direction holds at most one chunk (64 KiB) in the worker, and a
  slow reader stalls its writer (the kernel's socket buffers are the rest of the pipe);
- at most ``max_connections`` connections are relayed at once: one past the limit is closed
  at once (the client reads end of stream) and ``sandbox.relay.refused`` is logged;
- failures never stop the relay: a target that cannot be reached (``connect`` raised) closes
  that one client connection, a reset mid-copy closes both streams of that connection, and
  either is logged as ``sandbox.relay.failed`` with the relay's ``name``, the stage and the
  error's type, never a byte of payload; a failed ``accept`` (too many open files) is logged as
  ``sandbox.relay.accept_failed`` and retried; a bug costs one connection
  (``sandbox.relay.internal_error``);
- when :func:`relay` returns (cancelled, or the listener closed by someone else) the listener is
  closed and every relayed connection is cut: a relay serves one step.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

import anyio
import anyio.abc

from jigs.engine._logging import logger
from jigs.proxy._accept import accept_forever

__all__ = ["CHUNK", "MAX_CONNECTIONS", "Connect", "as_listener", "relay", "splice", "tcp_connector"]

#: The most one direction of a relayed connection reads before it writes.
CHUNK = 64 * 1024

#: Default limit of connections relayed at once (an agent needs a handful; this caps a runaway).
MAX_CONNECTIONS = 64

Connect: TypeAlias = Callable[[], Awaitable[anyio.abc.ByteStream]]
"""Opens a new stream to the relay's target; raises (``OSError``, ``TimeoutError``) if it cannot."""

# What a stream raises once its peer is gone or it was closed under us.
_IO_ERRORS = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


async def as_listener(
    listening: anyio.abc.Listener[anyio.abc.SocketStream] | socket.socket,
) -> anyio.abc.Listener[anyio.abc.SocketStream]:
    """``listening`` as an anyio listener: a ``socket.socket`` (bound and listening, e.g. inside
    another network namespace) is wrapped, made non-blocking; a listener is returned as is.
    Raises ``OSError`` if the socket cannot be wrapped (it is closed then)."""
    if not isinstance(listening, socket.socket):
        return listening
    try:
        listening.setblocking(False)
        return await anyio.abc.SocketListener.from_socket(listening)
    except BaseException:
        listening.close()
        raise


async def splice(
    a: anyio.abc.ByteStream, b: anyio.abc.ByteStream, *, idle: float | None = None
) -> Exception | None:
    """Copy bytes both ways between ``a`` and ``b`` until both directions have ended.

    End of stream on one side is passed on as ``send_eof`` to the other. Returns ``None`` when
    both directions ended cleanly, ``TimeoutError`` when no byte moved either way for ``idle``
    seconds, or the I/O error that broke one direction (the other is stopped then). Never closes
    the streams: the caller does. Cancellation from outside propagates."""
    failures: list[Exception] = []
    with anyio.CancelScope() as scope:

        def touch() -> None:
            if idle is not None:
                scope.deadline = anyio.current_time() + idle

        touch()
        async with anyio.create_task_group() as group:
            group.start_soon(_pump, a, b, touch, failures, scope)
            group.start_soon(_pump, b, a, touch, failures, scope)
    if failures:
        return failures[0]
    if scope.cancelled_caught:
        return TimeoutError(f"no bytes moved either way for {idle} s")
    return None


async def _pump(
    source: anyio.abc.ByteStream,
    sink: anyio.abc.ByteStream,
    touch: Callable[[], None],
    failures: list[Exception],
    scope: anyio.CancelScope,
) -> None:
    """One direction of :func:`splice`; a failure stops both directions (a half-dead
    connection is of no use to either peer)."""
    try:
        while True:
            try:
                data = await source.receive(CHUNK)
            except anyio.EndOfStream:
                # a stream that cannot half-close (TLS) keeps its other direction open instead
                with contextlib.suppress(NotImplementedError):
                    await sink.send_eof()
                return
            # awaiting the send before the next receive is what bounds the buffer
            await sink.send(data)
            touch()
    except _IO_ERRORS as exc:
        failures.append(exc)
        scope.cancel()


def tcp_connector(host: str, port: int, *, timeout: float = 10.0) -> Connect:
    """A :data:`Connect` opening a TCP connection to ``(host, port)`` from the worker's own
    network namespace (where ``relay`` runs), failing with ``TimeoutError`` after ``timeout``
    seconds or ``OSError`` when refused."""

    async def connect() -> anyio.abc.ByteStream:
        with anyio.fail_after(timeout):
            return await anyio.connect_tcp(host, port)

    return connect


async def relay(
    listener: anyio.abc.Listener[anyio.abc.SocketStream] | socket.socket,
    connect: Connect,
    *,
    log: Any = logger,
    name: str,
    max_connections: int = MAX_CONNECTIONS,
    idle: float | None = None,
) -> None:
    """Serve ``listener`` until cancelled: each connection is joined to a new ``connect()``
    stream (see the module's contract). ``name`` identifies the relay in log events (an MCP
    server's name, say); ``idle`` (seconds, ``None`` for never) cuts a connection on which no
    byte moved either way for that long. The listener is closed on return. Raises ``TypeError``
    for a listener that is not a socket listener, ``OSError`` if a socket cannot be wrapped."""
    server = await as_listener(listener)
    active = 0

    async def serve(stream: anyio.abc.SocketStream) -> None:
        nonlocal active
        if active >= max_connections:
            log.warning("sandbox.relay.refused", name=name, limit=max_connections)
            await stream.aclose()
            return
        active += 1
        try:
            await _relay_one(stream, connect, log=log, name=name, idle=idle)
        except Exception as exc:  # a bug must cost one connection, not the relay
            log.error("sandbox.relay.internal_error", name=name, error=type(exc).__name__)
        finally:
            active -= 1

    def failed(exc: OSError) -> None:
        log.warning("sandbox.relay.accept_failed", name=name, error=str(exc))

    try:
        async with anyio.create_task_group() as group:
            await accept_forever(server, group, serve, failed)
    finally:
        with anyio.CancelScope(shield=True):
            await server.aclose()


async def _relay_one(
    stream: anyio.abc.SocketStream, connect: Connect, *, log: Any, name: str, idle: float | None
) -> None:
    """One relayed connection, start to end. Never raises but for cancellation."""
    async with stream:
        try:
            target = await connect()
        except Exception as exc:  # whatever `connect` raised costs this connection only
            log.warning(
                "sandbox.relay.failed",
                name=name,
                stage="connect",
                error=type(exc).__name__,
                errno=getattr(exc, "errno", None),
            )
            return
        async with target:
            error = await splice(stream, target, idle=idle)
        if error is not None:
            # a peer resetting its side is routine (an aborted request): info, not warning
            log.info("sandbox.relay.failed", name=name, stage="copy", error=type(error).__name__)
