"""jigs.proxy._accept.accept_forever: serves each connection, survives a failed accept, stops when
the listener closes, and refuses a listener that is not a socket listener."""

from __future__ import annotations

import anyio
import anyio.abc
import pytest
from jigs.proxy._accept import accept_forever

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_a_failed_accept_is_reported_and_the_next_connection_still_served():
    multi = await anyio.create_tcp_listener(local_host="127.0.0.1")
    listener = multi.listeners[0]
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    real_accept = listener.accept
    calls = 0

    async def flaky_accept():
        nonlocal calls
        calls += 1
        if calls == 1:
            raise OSError(24, "Too many open files")
        return await real_accept()

    listener.accept = flaky_accept  # type: ignore[method-assign]
    errors: list[OSError] = []
    served: list[bytes] = []

    async def serve(stream):
        async with stream:
            served.append(await stream.receive())

    async with anyio.create_task_group() as group:
        group.start_soon(accept_forever, listener, group, serve, errors.append)
        async with await anyio.connect_tcp("127.0.0.1", port) as client:
            await client.send(b"hello")
            with anyio.fail_after(5):
                while not served:
                    await anyio.sleep(0.01)
        await listener.aclose()  # the loop ends by itself
    assert [e.errno for e in errors] == [24]
    assert served == [b"hello"]


async def test_a_listener_that_is_not_a_socket_listener_is_refused():
    class NotSockets(anyio.abc.Listener):  # type: ignore[type-arg]
        async def serve(self, handler, task_group=None):  # pragma: no cover
            raise NotImplementedError

        async def aclose(self):  # pragma: no cover
            pass

        @property
        def extra_attributes(self):  # pragma: no cover
            return {}

    async def never(stream):  # pragma: no cover
        raise AssertionError

    async with anyio.create_task_group() as group:
        with pytest.raises(TypeError, match="socket listener"):
            await accept_forever(NotSockets(), group, never, print)
