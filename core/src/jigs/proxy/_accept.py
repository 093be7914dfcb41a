"""The accept loop of jigs' loopback servers (the credential proxy, jigs-testing's model server)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import anyio.abc

__all__ = ["accept_forever"]


async def accept_forever(
    listener: anyio.abc.Listener[anyio.abc.SocketStream],
    group: anyio.abc.TaskGroup,
    serve: Callable[[anyio.abc.SocketStream], Coroutine[Any, Any, None]],
    on_error: Callable[[OSError], None],
) -> None:
    """Accept connections on ``listener`` and serve each in ``group`` until the listener is
    closed. An accept that fails with an ``OSError`` (too many open files, ...) is reported to
    ``on_error`` and retried after 50 ms, so one bad moment never stops the server. Raises
    ``TypeError`` for a listener that is not a socket listener."""
    if not isinstance(listener, anyio.abc.SocketListener):
        raise TypeError(f"expected a socket listener, got {type(listener).__name__}")
    while True:
        try:
            stream = await listener.accept()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return
        except OSError as exc:
            on_error(exc)
            await anyio.sleep(0.05)
            continue
        group.start_soon(serve, stream)
