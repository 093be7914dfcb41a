"""The servers a step's sandbox reaches on its loopback: relays to its declared MCP servers on
the worker's loopback, and its egress proxy.

A descriptor may declare an MCP server at ``http://127.0.0.1:8931/mcp``: the worker's loopback,
which the sandbox's network namespace does not have. For each such port, every sandboxed
launch of the step gets a listening socket on the same port inside its namespace
(:class:`~jigs.sandbox.SandboxView` ``listen``), and each connection to it is relayed to the
worker's own ``127.0.0.1:port`` (:func:`jigs.sandbox._relay.relay`). Only the declared ports
are relayed; every other port of the worker stays unreachable.

With ``network={"allow": [...]}`` the step's egress proxy (:class:`jigs.sandbox._egress.
EgressProxy`) is served the same way, on :data:`EGRESS_PORT` inside the namespace, and the
agent's environment names it (``HTTP_PROXY``/``HTTPS_PROXY`` with the step's token).

They run on an event loop of their own (a blocking portal's thread, started at the first
launch that needs one), because a step holds no task group of its caller between
``create_agent_runner`` and ``close()``; :meth:`StepServers.close` cancels them and ends the
thread.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from anyio.from_thread import start_blocking_portal

from jigs.sandbox._relay import relay, tcp_connector

__all__ = ["EGRESS_PORT", "StepServers", "loopback_ports"]

#: The egress proxy's port inside a step's network namespace (nothing else listens there; a
#: declared MCP server on the same worker port keeps it, and the egress proxy takes the next).
EGRESS_PORT = 3128


def loopback_ports(urls: Iterable[str]) -> dict[int, str]:
    """The worker-loopback ports ``urls`` name (``port -> host``), for ``http(s)`` URLs on
    ``localhost``, ``127.0.0.0/8`` or ``::1`` (their default port when none is given)."""
    found: dict[int, str] = {}
    for url in urls:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        if parts.scheme not in {"http", "https"}:
            continue
        try:
            loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if loopback:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            found[port] = "127.0.0.1" if host == "localhost" else host
    return found


Serve = Callable[[socket.socket], Awaitable[None]]


class StepServers:
    """What a step serves inside its sandboxes: :meth:`handler` takes each socket a launch
    opened for a port and serves it with that port's server until :meth:`close` (idempotent,
    bounded)."""

    def __init__(self, log: Any) -> None:
        self._log = log
        self._lock = threading.Lock()
        self._portal_cm: Any = None
        self._portal: Any = None
        self._closed = False

    def relay(self, port: int, host: str) -> Callable[[socket.socket], None]:
        """A relay of each connection to the worker's ``host:port``."""
        connect = tcp_connector(host, port)

        async def serve(sock: socket.socket) -> None:
            await relay(sock, connect, log=self._log, name=f"mcp-loopback-{port}")

        return self.handler(serve)

    def handler(self, serve: Serve) -> Callable[[socket.socket], None]:
        def take(sock: socket.socket) -> None:
            with self._lock:
                if self._closed:
                    sock.close()
                    return
                if self._portal is None:
                    self._portal_cm = start_blocking_portal()
                    self._portal = self._portal_cm.__enter__()
                portal = self._portal
            portal.start_task_soon(serve, sock)

        return take

    def close(self) -> None:
        with self._lock:
            self._closed = True
            portal, cm, self._portal, self._portal_cm = self._portal, self._portal_cm, None, None
        if portal is None:
            return
        with contextlib.suppress(Exception):
            portal.call(portal.stop, True)
        with contextlib.suppress(Exception):
            cm.__exit__(None, None, None)
