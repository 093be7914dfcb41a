"""One sandboxed launch's listeners: the descriptors it needs, the command around the CLI, and
the hand-over of each listening socket made inside the sandbox to its server.

Two ways, chosen once per worker (:func:`jigs.sandbox._netns.uses_bridge`), see
:mod:`jigs.sandbox._netns` for why:

- ``setns`` (a worker with ``CAP_SYS_ADMIN``): bwrap reports the sandbox's pid on an info pipe
  and holds the command on a block pipe; the worker makes the sockets inside, then releases it;
- the bridge (any other worker): a ``SOCK_SEQPACKET`` socket pair; the sandbox's first command
  is :mod:`jigs.sandbox._bridge`, which makes the sockets, sends them back and executes the
  command. The interpreter and the bridge are shown read-only for that launch only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import socket
from pathlib import Path
from typing import IO, TYPE_CHECKING

import anyio

from jigs.sandbox._netns import (
    bridge_command,
    bridge_paths,
    listen_inside,
    receive_listeners,
    uses_bridge,
)

if TYPE_CHECKING:
    from jigs.sandbox._view import SandboxView

__all__ = ["Listeners"]


class Listeners:
    """The listening plumbing of one launch in ``view`` (``view.listen`` not empty). Call
    :meth:`spawned` once the process exists, then :meth:`open`; :meth:`close` is idempotent and
    leaves no descriptor of it open in the worker."""

    def __init__(self, view: SandboxView) -> None:
        self.view = view
        self.ports = sorted(view.listen)
        self.bridge = uses_bridge()
        self._channel: socket.socket | None = None
        self._child: list[int] = []  # what the launched bwrap inherits
        self._ours: list[int] = []  # setns: the info pipe's read end, the block pipe's write end
        if self.bridge:
            self._channel, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            self._child = [theirs.detach()]
        else:
            info_r, info_w = os.pipe()
            block_r, block_w = os.pipe()
            self._child, self._ours = [info_w, block_r], [info_r, block_w]

    @property
    def inherited(self) -> tuple[int, ...]:
        """The descriptors the launched bwrap (and, for the bridge, the sandbox) inherits."""
        return tuple(self._child)

    def bwrap_fds(self) -> tuple[int | None, int | None]:
        """bwrap's ``--info-fd`` and ``--block-fd`` (none for the bridge)."""
        return (None, None) if self.bridge else (self._child[0], self._child[1])

    def shown(self) -> SandboxView:
        """The view for this launch: ``view``, plus, for the bridge, what it runs from (for
        this launch only). Raises ``OSError`` when the worker's Python cannot be run."""
        if not self.bridge:
            return self.view

        readable = [*self.view.readable, *map(Path, bridge_paths())]
        return dataclasses.replace(self.view, readable=readable)

    def first(self) -> list[str]:
        """What runs before the sandbox's command (the bridge's argv), or nothing."""
        return bridge_command(self._child[0], self.ports) if self.bridge else []

    def spawned(self) -> None:
        """Close the child's ends in the worker (the launched process holds its own copies)."""
        _close(self._child)

    async def open(self, stderr: IO[bytes]) -> None:
        """Make the sockets inside, hand each to its server and let the command start. Closes
        every descriptor of the launch; raises ``OSError``."""
        try:
            if self._channel is not None:
                socks = await receive_listeners(self._channel, len(self.ports), stderr)
            else:
                socks = listen_inside(await _sandbox_pid(self._ours[0], stderr), self.ports)
            for handed, (port, sock) in enumerate(zip(self.ports, socks, strict=True)):
                try:
                    self.view.listen[port](sock)
                except BaseException:
                    for rest in socks[handed + 1 :]:  # never handed: nobody else closes them
                        rest.close()
                    raise
            if self._ours:
                os.write(self._ours[1], b"\0")  # bwrap starts the command
        finally:
            self.close()

    def close(self) -> None:
        _close(self._child)
        _close(self._ours)
        if self._channel is not None:
            self._channel.close()


def _close(fds: list[int]) -> None:
    while fds:
        with contextlib.suppress(OSError):
            os.close(fds.pop())


async def _sandbox_pid(info: int, stderr: IO[bytes]) -> int:
    """The sandbox's first process, as bwrap reports it on its info descriptor."""
    buffer = b""
    decoder = json.JSONDecoder()
    while True:
        await anyio.wait_readable(info)
        chunk = os.read(info, 4096)
        if not chunk:
            stderr.seek(0)
            said = stderr.read(2000).decode(errors="replace").strip()
            raise OSError(errno.EIO, f"the sandbox did not start: {said or 'bwrap exited'}")
        buffer += chunk
        try:
            found, _ = decoder.raw_decode(buffer.decode())
        except ValueError:
            continue
        return int(found["child-pid"])
