"""jigs.sandbox._relay: bytes both ways, half-close passed on, large transfers intact, the
connection limit, failures logged without stopping the relay, the listener closed at the end.
Everything on 127.0.0.1."""

from __future__ import annotations

import hashlib
import os
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import anyio.abc
import pytest
from jigs.sandbox._relay import relay, tcp_connector
from structlog.testing import capture_logs

pytestmark = pytest.mark.anyio

Handler = Callable[[anyio.abc.SocketStream], Awaitable[None]]


def listening_socket() -> tuple[socket.socket, int]:
    """A listening socket as the worker hands one over (bound in the sandbox's namespace)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock, sock.getsockname()[1]


@dataclass
class Upstream:
    port: int = 0
    accepted: int = 0
    open: int = 0
    streams: list[anyio.abc.SocketStream] = field(default_factory=list)


@asynccontextmanager
async def upstream(handler: Handler) -> AsyncIterator[Upstream]:
    """A TCP server on 127.0.0.1 counting what it accepts, each connection served by handler."""
    state = Upstream()
    multi = await anyio.create_tcp_listener(local_host="127.0.0.1")
    state.port = int(multi.extra(anyio.abc.SocketAttribute.local_port))

    async def serve(stream: anyio.abc.SocketStream) -> None:
        state.accepted += 1
        state.open += 1
        try:
            async with stream:
                await handler(stream)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            state.open -= 1

    async with multi, anyio.create_task_group() as group:
        group.start_soon(multi.serve, serve)
        yield state
        group.cancel_scope.cancel()


@asynccontextmanager
async def relaying(target_port: int, **kwargs: object) -> AsyncIterator[int]:
    sock, port = listening_socket()
    async with anyio.create_task_group() as group:
        connect = tcp_connector("127.0.0.1", target_port, timeout=5)
        group.start_soon(lambda: relay(sock, connect, name="test", **kwargs))
        yield port
        group.cancel_scope.cancel()


async def read_all(stream: anyio.abc.ByteReceiveStream) -> bytes:
    chunks = []
    while True:
        try:
            chunks.append(await stream.receive())
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return b"".join(chunks)


async def echo(stream: anyio.abc.SocketStream) -> None:
    async for chunk in stream:
        await stream.send(chunk)


async def answer_after_eof(stream: anyio.abc.SocketStream) -> None:
    """Reads to the client's end of stream, then answers: only works if half-close passes."""
    got = await read_all(stream)
    await stream.send(b"got %d bytes: " % len(got) + got[:10])


async def test_client_eof_reaches_the_target_and_its_answer_still_comes_back():
    async with upstream(answer_after_eof) as up, relaying(up.port) as port:
        with anyio.fail_after(10):
            async with await anyio.connect_tcp("127.0.0.1", port) as client:
                await client.send(b"0123456789abcdef")
                await client.send_eof()
                assert await read_all(client) == b"got 16 bytes: 0123456789"
    assert up.accepted == 1


async def test_target_eof_reaches_the_client_while_the_client_keeps_sending():
    async def says_hello_then_listens(stream: anyio.abc.SocketStream) -> None:
        await stream.send(b"hello")
        await stream.send_eof()
        got = await read_all(stream)
        received.append(got)

    received: list[bytes] = []
    async with upstream(says_hello_then_listens) as up, relaying(up.port) as port:
        with anyio.fail_after(10):
            async with await anyio.connect_tcp("127.0.0.1", port) as client:
                assert await read_all(client) == b"hello"  # EOF arrived: the target's side ended
                await client.send(b"still talking")  # our side is still open end to end
                await client.send_eof()
                while not received:
                    await anyio.sleep(0.01)
    assert received == [b"still talking"]


async def test_a_large_transfer_both_ways_at_once_arrives_intact():
    payload = os.urandom(8 * 1024 * 1024 + 7)
    async with upstream(echo) as up, relaying(up.port) as port:
        with anyio.fail_after(60):
            async with await anyio.connect_tcp("127.0.0.1", port) as client:
                got = hashlib.sha256()
                total = 0

                async def send() -> None:
                    view = memoryview(payload)
                    for i in range(0, len(payload), 100_000):
                        await client.send(bytes(view[i : i + 100_000]))
                    await client.send_eof()

                async with anyio.create_task_group() as group:
                    group.start_soon(send)
                    async for chunk in client:
                        got.update(chunk)
                        total += len(chunk)
    assert total == len(payload)
    assert got.hexdigest() == hashlib.sha256(payload).hexdigest()


async def test_past_the_limit_a_connection_is_closed_and_the_target_never_sees_it():
    async with upstream(echo) as up, relaying(up.port, max_connections=2) as port:
        with capture_logs() as logs, anyio.fail_after(10):
            first = await anyio.connect_tcp("127.0.0.1", port)
            second = await anyio.connect_tcp("127.0.0.1", port)
            for client in (first, second):  # both relayed and live
                await client.send(b"ping")
                assert await client.receive() == b"ping"
            async with await anyio.connect_tcp("127.0.0.1", port) as third:
                assert await read_all(third) == b""
            assert up.accepted == 2
            await first.aclose()
            while up.open > 1:  # the relay lets go of the first connection's slot
                await anyio.sleep(0.01)
            async with await anyio.connect_tcp("127.0.0.1", port) as fourth:
                await fourth.send(b"again")
                assert await fourth.receive() == b"again"
            await second.aclose()
    assert up.accepted == 3
    refused = [e for e in logs if e["event"] == "sandbox.relay.refused"]
    assert refused == [{"event": "sandbox.relay.refused", "name": "test", "limit": 2,
                        "log_level": "warning"}]  # fmt: skip


async def test_an_unreachable_target_closes_that_connection_only_and_is_logged():
    attempts = 0
    real = None

    async def flaky() -> anyio.abc.ByteStream:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise ConnectionRefusedError(111, "Connection refused")
        assert real is not None
        return await anyio.connect_tcp("127.0.0.1", real)

    sock, port = listening_socket()
    async with upstream(echo) as up, anyio.create_task_group() as group:
        real = up.port
        group.start_soon(lambda: relay(sock, flaky, name="mcp-docs"))
        with capture_logs() as logs, anyio.fail_after(10):
            async with await anyio.connect_tcp("127.0.0.1", port) as client:
                assert await read_all(client) == b""
            async with await anyio.connect_tcp("127.0.0.1", port) as client:
                await client.send(b"second try")
                assert await client.receive() == b"second try"
        group.cancel_scope.cancel()
    failed = [e for e in logs if e["event"] == "sandbox.relay.failed"]
    assert failed == [{"event": "sandbox.relay.failed", "name": "mcp-docs", "stage": "connect",
                       "error": "ConnectionRefusedError", "errno": 111,
                       "log_level": "warning"}]  # fmt: skip


async def test_a_reset_mid_copy_is_logged_without_payload_and_the_client_is_cut():
    async def resets(stream: anyio.abc.SocketStream) -> None:
        await stream.receive()
        raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await stream.aclose()  # an RST, not a FIN

    async with upstream(resets) as up, relaying(up.port) as port:
        with capture_logs() as logs, anyio.fail_after(10):
            async with await anyio.connect_tcp("127.0.0.1", port) as client:
                await client.send(b"SECRET-PAYLOAD")
                assert await read_all(client) == b""
            while not [e for e in logs if e["event"] == "sandbox.relay.failed"]:
                await anyio.sleep(0.01)
    (failed,) = [e for e in logs if e["event"] == "sandbox.relay.failed"]
    assert failed["stage"] == "copy"
    assert failed["name"] == "test"
    assert "SECRET" not in repr(logs)


async def test_idle_connections_are_cut_when_asked():
    async with upstream(echo) as up, relaying(up.port, idle=0.3) as port:
        with anyio.fail_after(10):
            async with await anyio.connect_tcp("127.0.0.1", port) as client:
                await client.send(b"x")
                assert await client.receive() == b"x"
                start = anyio.current_time()
                assert await read_all(client) == b""
                assert anyio.current_time() - start >= 0.25


async def test_the_listener_is_closed_when_the_relay_is_cancelled():
    sock, port = listening_socket()
    async with upstream(echo) as up:
        scope = anyio.CancelScope()

        async def run() -> None:
            with scope:
                await relay(sock, tcp_connector("127.0.0.1", up.port), name="test")

        async with anyio.create_task_group() as group:
            group.start_soon(run)
            with anyio.fail_after(10):
                async with await anyio.connect_tcp("127.0.0.1", port) as client:
                    await client.send(b"up")
                    assert await client.receive() == b"up"
                    scope.cancel()
                    assert await read_all(client) == b""  # the open connection is cut too
        assert sock.fileno() == -1
        with pytest.raises(OSError):
            await anyio.connect_tcp("127.0.0.1", port)


class NoHalfClose(anyio.abc.ByteStream):
    """A target stream that cannot half-close, as a TLS stream cannot."""

    def __init__(self, inner: anyio.abc.SocketStream) -> None:
        self.inner = inner

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self.inner.receive(max_bytes)

    async def send(self, item: bytes) -> None:
        await self.inner.send(item)

    async def send_eof(self) -> None:
        raise NotImplementedError("no half-close here")

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_target_that_cannot_half_close_keeps_the_other_direction_open():
    sock, port = listening_socket()
    async with upstream(echo) as up, anyio.create_task_group() as group:

        async def connect() -> anyio.abc.ByteStream:
            return NoHalfClose(await anyio.connect_tcp("127.0.0.1", up.port))

        group.start_soon(lambda: relay(sock, connect, name="tls-like"))
        with capture_logs() as logs, anyio.fail_after(10):
            async with await anyio.connect_tcp("127.0.0.1", port) as client:
                await client.send(b"abc")
                await client.send_eof()
                assert await client.receive() == b"abc"
                with anyio.move_on_after(0.3) as waited:
                    await client.receive()  # neither data nor end of stream: still open
                assert waited.cancelled_caught
        group.cancel_scope.cancel()
    assert not [e for e in logs if e["event"].startswith("sandbox.relay.")]
