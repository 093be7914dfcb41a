"""Stopping the app server *and* the commands it started.

Codex runs each agent command in a session of its own (``setsid``), so killing the app server's
process group does not reach them: a graceful Codex kills them on SIGTERM, but a Codex that has
to be SIGKILLed (or crashed) would leave them running. :func:`stop_tree` snapshots every
descendant first, stops the group the usual way, then SIGKILLs any descendant still alive (each
identified by pid *and* start time, so a recycled pid is never hit). Linux /proc only; elsewhere
it stops the group alone.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from jigs.processes import ManagedProcess

__all__ = ["descendants", "stop_tree"]

_Proc = tuple[int, str]  # (pid, start time in clock ticks)


def _stat(pid: int) -> tuple[int, str] | None:
    """(ppid, start time) of a live, non-zombie process, or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            rest = fh.read().rsplit(")", 1)[-1].split()
    except OSError:
        return None
    # rest: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    #       cutime cstime priority nice num_threads itrealvalue starttime ...
    if len(rest) < 20 or rest[0] == "Z":
        return None
    return int(rest[1]), rest[19]


def descendants(root: int) -> list[_Proc]:
    """Every live descendant of ``root`` (children, grandchildren, ...), from /proc."""
    try:
        entries = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return []
    parent: dict[int, tuple[int, str]] = {}
    for pid in entries:
        info = _stat(pid)
        if info is not None:
            parent[pid] = info
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in parent.items():
        children.setdefault(ppid, []).append(pid)
    found: list[_Proc] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append((pid, parent[pid][1]))
        todo.extend(children.get(pid, []))
    return found


def _kill_survivors(procs: list[_Proc]) -> list[int]:
    killed = []
    for pid, started in procs:
        info = _stat(pid)
        if info is not None and info[1] == started:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except OSError:
                pass
    return killed


async def stop_tree(process: ManagedProcess, log: Any) -> None:
    """Stop ``process``'s group, then SIGKILL whatever it started in other sessions."""
    tree = descendants(process.pid)
    await process.stop()
    killed = _kill_survivors(tree)
    if killed:
        log.info("codex.app_server.orphans_killed", count=len(killed))
