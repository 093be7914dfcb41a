"""Relays that show a step's declared MCP servers on the worker's loopback inside its sandbox.

A descriptor may declare an MCP server at ``http://127.0.0.1:8931/mcp``: the worker's loopback,
which the sandbox's network namespace does not have. For each such port, every sandboxed
launch of the step gets a listening socket on the same port inside its namespace
(:class:`~jigs.sandbox.SandboxView` ``listen``), and each connection to it is relayed to the
worker's own ``127.0.0.1:port`` (:func:`jigs.sandbox._relay.relay`). Only the declared ports
are relayed; every other port of the worker stays unreachable.

The relays run on an event loop of their own (a blocking portal's thread, started at the first
launch that needs one), because a step holds no task group of its caller between
``create_agent_runner`` and ``close()``; :meth:`LoopbackRelays.close` cancels them and ends the
thread.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

__all__ = ["LoopbackRelays", "loopback_ports"]


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


class LoopbackRelays:
    """Relays for ``ports`` (``port -> worker host``); :meth:`handler` takes each socket a
    launch opened for a port. :meth:`close` is idempotent and bounded."""

    def __init__(self, ports: dict[int, str], log: Any) -> None:
        self.ports = ports
        self._log = log
        self._lock = threading.Lock()
        self._portal_cm: Any = None
        self._portal: Any = None
        self._closed = False

    def handler(self, port: int) -> Callable[[socket.socket], None]:
        def take(sock: socket.socket) -> None:
            self._serve(port, sock)

        return take

    def _serve(self, port: int, sock: socket.socket) -> None:
        from jigs.sandbox._relay import relay, tcp_connector

        with self._lock:
            if self._closed:
                sock.close()
                return
            if self._portal is None:
                from anyio.from_thread import start_blocking_portal

                self._portal_cm = start_blocking_portal()
                self._portal = self._portal_cm.__enter__()
            portal = self._portal
        connect = tcp_connector(self.ports[port], port)
        portal.start_task_soon(
            lambda: relay(sock, connect, log=self._log, name=f"mcp-loopback-{port}")
        )
        self._log.debug("sandbox.relay.opened", port=port)

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
