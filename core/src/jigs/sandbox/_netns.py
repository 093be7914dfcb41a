"""Listening sockets inside a sandbox's network namespace, served by the worker.

A step's sandbox has a network namespace of its own with nothing but loopback. The worker
makes the few things the agent may reach (its credential proxy, relays to declared MCP servers,
the egress proxy) appear *inside* it: a listening socket created in that namespace stays there
(a socket belongs to the namespace it was made in), but its descriptor can be accepted on by
the worker's event loop like any other. No process stays in the sandbox for it, and no byte is
copied twice.

How the socket gets into the namespace (:mod:`jigs.sandbox._listeners` does the plumbing):

- a worker with ``CAP_SYS_ADMIN`` in its own user namespace (root, usually) enters the
  namespace on a short-lived thread of its own (``setns`` changes only the calling thread's
  namespace; the thread ends right after, so no thread of the worker is ever left inside) and
  makes the sockets there, while bwrap holds the command (``--block-fd``);
- any other worker cannot: ``setns`` into a network namespace needs ``CAP_SYS_ADMIN`` in the
  caller's own user namespace too, and the way around it, joining the sandbox's user namespace
  first, is refused to a multi-threaded process. The sandbox's first command is then a tiny
  Python program (:mod:`jigs.sandbox._bridge`) that makes the sockets, hands their descriptors
  to the worker over a socket pair, and executes the CLI.

Why both, chosen by capability (:func:`uses_bridge`): the bridge is an interpreter start
(``python -I -S``, ~7-10 ms here), measured at +9 to +11 ms per sandboxed launch over the setns
way, which adds under 1 ms (``benchmarks/bench_sandbox.py``, 60 rounds on 2 shared cores: a
sandboxed launch is ~7-9 ms to the first line, ~18-21 ms with the bridge, root or nobody).
A root worker keeps the cheaper way; the bridge needs nothing but the worker's Python. Not
taken: a child forked from the worker that joins the sandbox's user and network namespaces
(~3.5 ms, but ``fork`` in a multi-threaded worker, which durable workflow runtimes are, can
deadlock the child).
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO

import anyio

from jigs.sandbox._runtime import runtime_paths
from jigs.sandbox._view import system_paths

__all__ = [
    "BRIDGE",
    "BRIDGE_TIMEOUT",
    "CLONE_NEWNET",
    "bridge_command",
    "bridge_paths",
    "force_bridge",
    "listen_inside",
    "receive_listeners",
    "uses_bridge",
]

CLONE_NEWNET = 0x40000000
_CAP_SYS_ADMIN = 21
#: The program a worker that cannot enter the namespace runs first in the sandbox.
BRIDGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bridge.py")
#: Seconds the worker waits for the bridge's sockets (it needs ~10 ms; a loaded host, more).
BRIDGE_TIMEOUT = 20.0
_MAX_MESSAGE = 4096


def _setns(fd: int) -> None:
    """``setns(fd, CLONE_NEWNET)`` for the calling thread; raises ``OSError``."""
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


#: Seconds to wait for the sandbox's loopback to come up (bwrap brings it up in its child,
#: which may not have done so yet when it reports the child's pid).
_LOOPBACK_WAIT = 5.0


def _listening_when_up(port: int) -> socket.socket:
    """:func:`listening_socket` on ``port`` once the namespace's ``127.0.0.1`` exists: binding
    it before bwrap has brought ``lo`` up fails with ``EADDRNOTAVAIL``, so that is retried
    (briefly: it takes bwrap well under a millisecond). Raises ``OSError`` otherwise."""
    deadline = time.monotonic() + _LOOPBACK_WAIT
    while True:
        try:
            return listening_socket(port)
        except OSError as exc:
            if exc.errno != errno.EADDRNOTAVAIL or time.monotonic() > deadline:
                raise
            time.sleep(0.0005)


def _enter_and_listen(pid: int, ports: Sequence[int], out: list[object]) -> None:
    try:
        fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            _setns(fd)
        finally:
            os.close(fd)
        out.extend(_listening_when_up(port) for port in ports)
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


def _has_sys_admin() -> bool:
    """Whether this process has ``CAP_SYS_ADMIN`` in its own user namespace (what ``setns``
    into a network namespace checks besides the namespace's owner): root usually, but not a
    container's root without that capability, and never an ordinary user."""
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"CapEff:"):
                    return bool(int(line.split()[1], 16) >> _CAP_SYS_ADMIN & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


_answer: dict[str, bool] = {}


def uses_bridge() -> bool:
    """Whether this worker's sandboxed launches open their listeners through
    :mod:`jigs.sandbox._bridge` (it cannot ``setns``); asked once per process."""
    if "bridge" not in _answer:
        _answer["bridge"] = not _has_sys_admin()
    return _answer["bridge"]


def force_bridge(bridge: bool | None) -> None:
    """Benchmarks and tests: make :func:`uses_bridge` answer ``bridge`` (None: ask again)."""
    _answer.pop("bridge", None)
    if bridge is not None:
        _answer["bridge"] = bridge


def _interpreter() -> str:
    """The worker's own Python, resolved (the sandbox shows paths, not the symlinks to them).
    Raises ``OSError`` when it cannot be run (the bridge needs it)."""
    real = os.path.realpath(sys.executable) if sys.executable else ""
    if not real or not os.access(real, os.X_OK):
        raise OSError(
            errno.ENOEXEC,
            f"the sandbox's socket bridge needs the worker's Python, and {sys.executable!r} "
            f"({real or 'unknown'}) is not an executable this user can run",
        )
    return real


def bridge_command(channel_fd: int, ports: Sequence[int]) -> list[str]:
    """The argv prefix that runs the bridge before the sandbox's command (the command follows
    it). Raises ``OSError`` (see :func:`_interpreter`)."""
    return [_interpreter(), "-I", "-S", BRIDGE, str(channel_fd), *map(str, ports), "--"]


def bridge_paths() -> list[str]:
    """What the bridge needs shown read-only in the sandbox: the interpreter's installation
    and the bridge itself (system paths, shown anyway, are left out)."""
    shown = [os.path.realpath(p) for p in system_paths()]
    needed = [p for p in runtime_paths(_interpreter(), {}) if os.path.isabs(p)]
    return [
        p
        for p in [*needed, BRIDGE]
        if not any(p == s or p.startswith(s.rstrip("/") + "/") for s in shown)
    ]


def _received(ancillary: list[tuple[int, int, bytes]]) -> list[socket.socket]:
    fds = [
        int.from_bytes(data[i : i + 4], sys.byteorder, signed=True)
        for level, kind, data in ancillary
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS
        for i in range(0, len(data) - len(data) % 4, 4)
    ]
    return [socket.socket(fileno=fd) for fd in fds]


def _failure(message: bytes, got: int, count: int, stderr: IO[bytes]) -> str:
    if message == b"ok":
        return f"the sandbox's socket bridge sent {got} listening sockets of {count}"
    if message.startswith(b"error:"):
        return f"the sandbox's socket bridge failed: {message[6:].decode(errors='replace').strip()}"
    stderr.seek(0)
    said = stderr.read(2000).decode(errors="replace").strip()
    return f"the sandbox did not start: {said or 'bwrap exited'}"


async def receive_listeners(
    channel: socket.socket, count: int, stderr: IO[bytes]
) -> list[socket.socket]:
    """The ``count`` listening sockets the bridge sends over ``channel`` (non-blocking, in
    port order), waiting at most :data:`BRIDGE_TIMEOUT`. Raises ``OSError`` saying what failed
    (the bridge's own error, or bwrap's stderr from ``stderr``); nothing is left open then."""
    channel.setblocking(False)
    try:
        with anyio.fail_after(BRIDGE_TIMEOUT):
            while True:
                await anyio.wait_readable(channel)
                try:
                    message, ancillary, flags, _ = channel.recvmsg(
                        _MAX_MESSAGE, socket.CMSG_SPACE(4 * count), socket.MSG_CMSG_CLOEXEC
                    )
                    break
                except BlockingIOError:
                    continue
    except TimeoutError:
        raise OSError(
            errno.ETIMEDOUT,
            f"the sandbox's socket bridge ({BRIDGE}) handed over no listening socket within "
            f"{BRIDGE_TIMEOUT:g} s",
        ) from None
    socks = _received(ancillary)
    if message != b"ok" or len(socks) != count or flags & socket.MSG_CTRUNC:
        for sock in socks:
            sock.close()
        raise OSError(errno.EIO, _failure(message, len(socks), count, stderr))
    for sock in socks:
        sock.setblocking(False)
    return socks
