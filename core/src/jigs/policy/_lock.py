"""The worktree lock: one agent per worktree, never waiting, whatever the path spelling.

The lock is taken on the worktree directory itself, not on a file named after its path, so
every spelling of it (a symlink, a bind mount, ``..`` components), every data dir, HOME and user
meets the same lock. It is ``flock(2)`` on read-only descriptors of directories:

- ``LOCK_SH | LOCK_NB`` on every ancestor of the worktree, root first, then
- ``LOCK_EX | LOCK_NB`` on the worktree directory itself, last.

A held worktree refuses itself (EX against EX) and any subdirectory (whose opener needs SH on
the held directory), and a held subdirectory refuses its ancestors (EX against SH), while
siblings coexist (SH is shared). Contenders for one worktree all take the same shared locks and
then compete for one exclusive lock, so every race has exactly one winner; a contender refused
on an ancestor is refused by a holder that already owns everything it asked for, or by one whose
worktree lies deeper, so a refusal always names a real or a deeper contender and the deepest
one wins. Nothing waits: a refusal takes one ``open`` and one ``flock`` per path component.

flock locks belong to open file descriptions and die with the last descriptor: a holder that
dies, SIGKILL included, releases them; nothing goes stale. :attr:`WorktreeLock.fds` are meant to
be inherited by the step's processes (``launch(pass_fds=lock.fds)``), so after a worker is
killed the worktree stays locked until the step's last process is gone, and no longer.
:meth:`WorktreeLock.release` closes the worker's copies without ``LOCK_UN``, for the same reason.

A holder record (run id, pid, a random token) is kept under the data dir, keyed by the
directory's device and inode, for the error a second runner gets; when it is missing (another
data dir) the holder's pid is read from ``/proc/locks``. The record is removed only by the holder
whose token it carries. Limits: an ancestor this user cannot open for reading is skipped (it
cannot then be held by this user either); a bind mount of a held worktree's *ancestor* elsewhere
is not seen as containing it; the lock is advisory (it binds jigs, not other programs).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import secrets
from pathlib import Path

from jigs.errors import WorktreeBusyError, WorktreeLockError
from jigs.policy._paths import data_dir

__all__ = ["WorktreeLock", "lock_path_for", "worktree_locked"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _identity(path: Path) -> str:
    """``<device>-<inode>`` in hex (every spelling of the directory has the same), or, for a
    path that cannot be read, a digest of its text."""
    try:
        info = os.stat(path)
    except OSError:
        return hashlib.sha256(str(path).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return f"{info.st_dev:x}-{info.st_ino:x}"


def lock_path_for(worktree: Path) -> Path:
    """The holder record's base name for a worktree: ``<data>/locks/agent-<dev>-<ino>.lock``,
    keyed by the directory's device and inode only (every spelling of the worktree shares it);
    the record itself is the ``.holder`` file next to it."""
    locks = data_dir() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    return locks / f"agent-{_identity(worktree.resolve())}.lock"


def _lockers(path: Path) -> list[tuple[int, str]]:
    """(pid, READ|WRITE) of the flock holders of ``path``'s inode, from ``/proc/locks``."""
    try:
        info = os.stat(path)
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            rows = fh.read().splitlines()
    except OSError:
        return []
    inode = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    found = []
    for row in rows:
        # "1: FLOCK  ADVISORY  WRITE 1234 00:2e:56789 0 EOF" ("->" marks a waiter)
        parts = row.split()
        if "->" in parts or len(parts) < 6 or parts[1] != "FLOCK":
            continue
        if parts[5] == inode and parts[4].lstrip("-").isdigit():
            found.append((int(parts[4]), parts[3]))
    return found


class WorktreeLock:
    """An exclusive, non-blocking lock on one worktree (and shared locks on its ancestors) for
    one run. :attr:`fds` are the descriptors that hold it (pass them to the step's processes)."""

    def __init__(self, worktree: Path, run_id: str) -> None:
        self.worktree = worktree.resolve()
        self.run_id = run_id
        self.path = lock_path_for(self.worktree)
        self._holder_path = self.path.with_suffix(".holder")
        self._token = secrets.token_hex(16)
        self._fds: list[int] = []

    @property
    def held(self) -> bool:
        return bool(self._fds)

    @property
    def fds(self) -> tuple[int, ...]:
        """The descriptors holding the lock (ancestors first, the worktree last); empty when not
        held. They are close-on-exec: pass them explicitly (``launch(pass_fds=lock.fds)``)."""
        return tuple(self._fds)

    def acquire(self) -> None:
        """Take the lock or raise :class:`WorktreeBusyError` at once, naming the holder.

        One attempt, never waits. Raises :class:`WorktreeLockError` when the worktree cannot be
        opened or its filesystem has no ``flock``. Acquiring a held lock again is a no-op.
        """
        if self._fds:
            return
        fds: list[int] = []
        chain = [*reversed(self.worktree.parents), self.worktree]
        try:
            for depth, directory in enumerate(chain):
                last = depth == len(chain) - 1
                try:
                    fd = os.open(directory, _DIR_FLAGS)
                except OSError as exc:
                    if not last:
                        continue  # an unreadable ancestor: nobody here can hold it either
                    raise WorktreeLockError(self.worktree, str(exc)) from None
                fds.append(fd)
                try:
                    fcntl.flock(fd, (fcntl.LOCK_EX if last else fcntl.LOCK_SH) | fcntl.LOCK_NB)
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                        if not last:
                            continue
                        raise WorktreeLockError(self.worktree, str(exc)) from None
                    raise self._busy(directory) from None
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        self._fds = fds
        record = {
            "run_id": self.run_id,
            "pid": os.getpid(),
            "token": self._token,
            "worktree": str(self.worktree),
        }
        tmp = self._holder_path.with_suffix(f".{self._token}.tmp")
        with contextlib.suppress(OSError):
            tmp.write_text(json.dumps(record), encoding="utf-8")
            tmp.replace(self._holder_path)

    def _busy(self, directory: Path) -> WorktreeBusyError:
        """The refusal, naming the holder: its record when this data dir has one, else the pid
        that took the lock that refused us."""
        run_id, pid = _read_holder(lock_path_for(directory).with_suffix(".holder"))
        if run_id is None:
            lockers = _lockers(directory)
            writers = [p for p, mode in lockers if mode == "WRITE"] or [p for p, _ in lockers]
            pid = writers[0] if writers else None
        return WorktreeBusyError(self.worktree, run_id, pid)

    def release(self) -> None:
        """Close this process's descriptors (idempotent); the lock ends once no process of the
        step still holds a copy. Removes the holder record only if it is ours."""
        if not self._fds:
            return
        try:
            record = json.loads(self._holder_path.read_text(encoding="utf-8"))
            if isinstance(record, dict) and record.get("token") == self._token:
                self._holder_path.unlink()
        except (OSError, ValueError):
            pass
        finally:
            fds, self._fds = self._fds, []
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)


def _read_holder(path: Path) -> tuple[str | None, int | None]:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, None
    if not isinstance(record, dict):
        return None, None
    run_id, pid = record.get("run_id"), record.get("pid")
    return (
        run_id if isinstance(run_id, str) else None,
        pid if isinstance(pid, int) else None,
    )


def worktree_locked(worktree: Path) -> bool:
    """True while some agent holds the worktree, a directory inside it, or one containing it.

    It tries the lock and releases it at once, so a concurrent ``acquire`` may be refused during
    those microseconds: use it to observe (tests, diagnostics), never before acquiring.
    """
    probe = WorktreeLock(worktree, "probe")
    try:
        probe.acquire()
    except WorktreeBusyError:
        return True
    probe.release()
    return False
