"""Reading the process table from ``/proc``: parents, start times, descendants, namespaces.

Every process is named by its pid *and* its start time (clock ticks since boot), so a pid the
kernel recycled is never mistaken for the process jigs saw. Linux only: where ``/proc`` is
missing every function returns an empty answer.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable

__all__ = [
    "Proc",
    "catches",
    "children_of",
    "descendants",
    "group_members",
    "kill_procs",
    "live",
    "namespace_members",
    "outer_pid",
    "pid_namespace",
    "processes_under",
    "scan",
    "signal_procs",
    "stat",
    "wait_stopped",
]

#: A process: (pid, start time in clock ticks).
Proc = tuple[int, str]


def stat(pid: int) -> tuple[int, str, int, int] | None:
    """(ppid, start time, pgid, session id) of a live, non-zombie process, or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            rest = fh.read().rsplit(")", 1)[-1].split()
    except OSError:
        return None
    # rest: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    #       cutime cstime priority nice num_threads itrealvalue starttime ...
    if len(rest) < 20 or rest[0] in ("Z", "X"):
        return None
    return int(rest[1]), rest[19], int(rest[2]), int(rest[3])


def catches(pid: int, sig: signal.Signals) -> bool:
    """Whether a live process has a handler for ``sig`` (``SigCgt`` in its status)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def wait_stopped(pid: int, seconds: float) -> bool:
    """Wait (busily, up to ``seconds``) until ``pid`` is stopped or gone; True if it is."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
                state = fh.read().rsplit(")", 1)[-1].split()[0]
        except (OSError, IndexError):
            return True
        if state in ("T", "t", "Z", "X"):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.0005)


def _pids() -> list[int]:
    try:
        return [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return []


def _table() -> dict[int, tuple[int, str, int, int]]:
    table: dict[int, tuple[int, str, int, int]] = {}
    for pid in _pids():
        info = stat(pid)
        if info is not None:
            table[pid] = info
    return table


def children_of(pid: int) -> list[int]:
    """Live children of ``pid`` (from ``/proc/<pid>/task/*/children`` when the kernel has it)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as fh:
                found += [int(p) for p in fh.read().split()]
        except OSError:
            return [p for p, info in _table().items() if info[0] == pid]
    return found


def descendants(roots: Iterable[int]) -> list[Proc]:
    """Every live descendant of the ``roots`` (children, grandchildren, ...), roots excluded."""
    return scan(roots, None)[0]


def scan(roots: Iterable[int], session: int | None) -> tuple[list[Proc], list[Proc]]:
    """(descendants of ``roots``, members of ``session``) in one pass over ``/proc``."""
    table = _table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: list[Proc] = []
    seen: set[int] = set()
    todo = [c for r in roots for c in children.get(r, [])]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        found.append((pid, table[pid][1]))
        todo.extend(children.get(pid, []))
    members = [] if session is None else [(p, i[1]) for p, i in table.items() if i[3] == session]
    return found, members


def group_members(pgid: int) -> list[Proc]:
    """Live members of a process group."""
    return [(pid, info[1]) for pid, info in _table().items() if info[2] == pgid]


def live(procs: Iterable[Proc]) -> list[Proc]:
    """The processes of ``procs`` still alive (same pid, same start time, not a zombie)."""
    alive = []
    for pid, started in procs:
        info = stat(pid)
        if info is not None and info[1] == started:
            alive.append((pid, started))
    return alive


def signal_procs(procs: Iterable[Proc], sig: signal.Signals) -> int:
    """Send ``sig`` to each process still alive as recorded; returns how many were signalled."""
    sent = 0
    for pid, _ in live(procs):
        with contextlib.suppress(OSError):
            os.kill(pid, sig)
            sent += 1
    return sent


def kill_procs(procs: Iterable[Proc]) -> int:
    """SIGKILL each process still alive as recorded; returns how many were signalled."""
    return signal_procs(procs, signal.SIGKILL)


def pid_namespace(pid: int) -> str | None:
    """The PID namespace of a process (``pid:[inode]``), or None when it is gone."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def namespace_members(namespace: str) -> list[Proc]:
    """Live processes (as this process sees them) that belong to the PID namespace."""
    members: list[Proc] = []
    for pid in _pids():
        if pid_namespace(pid) == namespace:
            info = stat(pid)
            if info is not None:
                members.append((pid, info[1]))
    return members


def processes_under(directory: str | os.PathLike[str]) -> list[Proc]:
    """Live processes (other than this one) whose working directory is ``directory`` or lies
    inside it: how a test finds a step's processes from outside its namespace."""
    root = os.path.realpath(directory)
    found: list[Proc] = []
    for pid in _pids():
        if pid == os.getpid():
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd == root or cwd.startswith(root + os.sep):
            info = stat(pid)
            if info is not None:
                found.append((pid, info[1]))
    return found


def outer_pid(inner: int, under: str | os.PathLike[str]) -> int | None:
    """This process's name for the process that calls itself ``inner`` in its own PID namespace
    (the last ``NSpid`` entry) and works in ``under``: how a test turns a pid an agent reported
    from inside its namespace into one it can watch. None when there is no such live process."""
    for pid, _ in processes_under(under):
        try:
            with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except OSError:
            continue
        nspids = fields.get("NSpid", "").split()
        if nspids and nspids[-1] == str(inner):
            return pid
    return None
