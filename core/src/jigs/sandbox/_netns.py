"""Listening sockets inside a sandbox's network namespace, served by the worker.

A step's sandbox has a network namespace of its own with nothing but loopback. The worker
makes the few things the agent may reach (its credential proxy, relays to declared MCP servers,
the egress proxy) appear *inside* it: a listening socket created in that namespace stays there
(a socket belongs to the namespace it was made in), but its descriptor can be accepted on by
the worker's event loop like any other. No process runs in the sandbox for it, and no byte is
copied twice.

How the socket gets into the namespace:

- a root worker enters the namespace on a short-lived thread of its own (``setns`` changes only
  the calling thread's namespace; the thread ends right after, so no thread of the worker is
  ever left inside) and makes the sockets there;
- any other worker cannot (``setns`` into a network namespace needs ``CAP_SYS_ADMIN`` in the
  worker's own user namespace): the sandbox's first command is then a tiny Python program
  (:mod:`jigs.sandbox._bridge`) that makes the sockets, hands their descriptors to the worker
  over a socket pair, and executes the CLI.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Sequence

__all__ = ["CLONE_NEWNET", "listen_inside"]

CLONE_NEWNET = 0x40000000


def _setns(fd: int) -> None:
    """``setns(fd, CLONE_NEWNET)`` for the calling thread; raises ``OSError``."""
    import ctypes  # only for a sandboxed launch

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"setns into the sandbox's network: {os.strerror(error)}")


def listening_socket(port: int) -> socket.socket:
    """A non-blocking TCP socket listening on ``127.0.0.1:port`` (0: a fresh port) in the
    calling thread's network namespace. Raises ``OSError``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(socket.SOMAXCONN)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _enter_and_listen(pid: int, ports: Sequence[int], out: list[object]) -> None:
    try:
        fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            _setns(fd)
        finally:
            os.close(fd)
        out.extend(listening_socket(port) for port in ports)
    except BaseException as exc:
        for made in out:
            if isinstance(made, socket.socket):
                made.close()
        out[:] = [exc]


def listen_inside(pid: int, ports: Sequence[int]) -> list[socket.socket]:
    """Sockets listening on ``127.0.0.1:<port>`` for each of ``ports``, inside the network
    namespace of process ``pid``. Only for a worker with ``CAP_SYS_ADMIN`` (root). Blocks for
    well under a millisecond. Raises ``OSError`` (nothing is left open then)."""
    out: list[object] = []
    thread = threading.Thread(
        target=_enter_and_listen, args=(pid, ports, out), name="jigs-netns", daemon=True
    )
    thread.start()
    thread.join()
    if out and isinstance(out[0], BaseException):
        raise out[0]
    return [s for s in out if isinstance(s, socket.socket)]
