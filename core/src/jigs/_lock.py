"""The worktree lock: one agent per worktree, never waiting.

The lock file lives outside the worktree (under the jigs data dir), keyed by the resolved path.
It is an OS advisory lock (``flock`` through :mod:`filelock`), so a holder that dies, SIGKILL
included, releases it with its file descriptors; nothing goes stale. A side file names the holder
(run id, pid, a random token) for the error a second runner gets; it is removed only by the holder
whose token it carries, so releasing never removes somebody else's record.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from pathlib import Path

from jigs._paths import data_dir
from jigs.errors import WorktreeBusyError

__all__ = ["WorktreeLock", "lock_path_for", "worktree_locked"]


def lock_path_for(worktree: Path) -> Path:
    """The lock file for a worktree: ``<data>/locks/agent-<name>-<sha256[:16]>.lock``."""
    resolved = worktree.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:16]
    locks = data_dir() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    return locks / f"agent-{resolved.name[:40]}-{digest}.lock"


class WorktreeLock:
    """An exclusive, non-blocking lock on one worktree for one run."""

    def __init__(self, worktree: Path, run_id: str) -> None:
        self.worktree = worktree.resolve()
        self.run_id = run_id
        self.path = lock_path_for(self.worktree)
        self._holder_path = self.path.with_suffix(".holder")
        self._token = secrets.token_hex(16)
        import filelock  # 24 ms at import time: only a step that locks pays it

        self._timeout_error = filelock.Timeout
        self._lock = filelock.FileLock(self.path, timeout=0, thread_local=False)

    @property
    def held(self) -> bool:
        return self._lock.is_locked

    def acquire(self) -> None:
        """Take the lock or raise :class:`WorktreeBusyError` at once, naming the holder."""
        try:
            self._lock.acquire(timeout=0)
        except self._timeout_error:
            run_id, pid = self._read_holder()
            raise WorktreeBusyError(self.worktree, run_id, pid) from None
        record = {
            "run_id": self.run_id,
            "pid": os.getpid(),
            "token": self._token,
            "worktree": str(self.worktree),
        }
        tmp = self._holder_path.with_suffix(f".{self._token}.tmp")
        tmp.write_text(json.dumps(record), encoding="utf-8")
        tmp.replace(self._holder_path)

    def _read_holder(self) -> tuple[str | None, int | None]:
        try:
            record = json.loads(self._holder_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None, None
        if not isinstance(record, dict):
            return None, None
        run_id, pid = record.get("run_id"), record.get("pid")
        return (
            run_id if isinstance(run_id, str) else None,
            pid if isinstance(pid, int) else None,
        )

    def release(self) -> None:
        """Release if held (idempotent). Removes the holder record only if it is ours."""
        if not self._lock.is_locked:
            return
        try:
            record = json.loads(self._holder_path.read_text(encoding="utf-8"))
            if isinstance(record, dict) and record.get("token") == self._token:
                self._holder_path.unlink()
        except (OSError, ValueError):
            pass
        finally:
            self._lock.release(force=True)


def worktree_locked(worktree: Path) -> bool:
    """True while some agent holds the worktree (tries the lock without keeping it)."""
    probe = WorktreeLock(worktree, "probe")
    try:
        probe.acquire()
    except WorktreeBusyError:
        return True
    probe.release()
    return False
