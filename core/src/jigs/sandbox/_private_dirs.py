"""A step's private temp dirs (``HarnessContext.private_dir``), and the sweep of those a killed
worker left behind.

A step removes its private dirs when it closes; a worker killed by SIGKILL cannot, and its
``/tmp/jigs-<kind>-*`` dirs (an MCP config, a shell prefix, a CLI's state) stay. Each dir holds a
marker, :data:`MARKER`, naming its owner: the worker's pid, that process's start time and its
PID namespace. :func:`sweep` removes the dirs in the temp dir, this user's only, whose owner is
gone (no such process, or another process now has its pid). A dir whose owner is alive is never
touched, nor one without a readable marker (being made, or not jigs'), nor one whose owner lives
in another PID namespace (its pid means nothing here). It runs beside a step, on a thread started
at the step's first private dir (at most once a minute per process), and in ``jigs runs prune``.
Linux only (it reads ``/proc``); elsewhere it removes nothing.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

from jigs.policy._files import make_dir, remove_tree
from jigs.sandbox._proctree import stat

__all__ = ["MARKER", "make_owned_dir", "stale_dirs", "sweep", "sweep_now_and_then"]

#: The owner record inside each private dir: ``<pid> <start time> <pid namespace>``.
MARKER = ".jigs-owner"
_PREFIX = "jigs-"
_EVERY = 60.0
_last: list[float] = []
_lock = threading.Lock()


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def make_owned_dir(prefix: str) -> Path:
    """A fresh 0700 dir in the temp dir (:func:`jigs.policy._files.make_dir`) holding the marker
    that names this process as its owner."""
    path = make_dir(prefix)
    found = stat(os.getpid())
    namespace = _pid_namespace()
    if found is not None and namespace is not None:
        record = f"{os.getpid()} {found[1]} {namespace}\n".encode()
        fd = os.open(path / MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, record)
        finally:
            os.close(fd)
    return path


def _owner_gone(path: str, namespace: str) -> bool:
    """Whether the marker in ``path`` names a process of this PID namespace that is gone."""
    try:
        fd = os.open(os.path.join(path, MARKER), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            fields = os.read(fd, 512).decode("ascii").split()
        finally:
            os.close(fd)
        pid, start, owner_namespace = int(fields[0]), fields[1], fields[2]
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        return False  # no marker (being made, or not a private dir): keep it
    if owner_namespace != namespace or pid <= 0:
        return False
    found = stat(pid)
    return found is None or found[1] != start


def stale_dirs(base: str | os.PathLike[str] | None = None) -> list[Path]:
    """This user's private dirs in ``base`` (default: the temp dir) whose owner is gone."""
    namespace = _pid_namespace()
    if namespace is None:  # no /proc: whether an owner lives cannot be told
        return []
    directory = os.fspath(base) if base is not None else tempfile.gettempdir()
    found = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if not entry.name.startswith(_PREFIX) or not entry.is_dir(follow_symlinks=False):
                    continue
                if entry.stat(follow_symlinks=False).st_uid != os.getuid():
                    continue
                if _owner_gone(entry.path, namespace):
                    found.append(Path(entry.path))
    except OSError:
        return found
    return sorted(found)


def sweep(base: str | os.PathLike[str] | None = None, *, dry_run: bool = False) -> list[Path]:
    """Remove (unless ``dry_run``) the private dirs whose owner is gone; returns them."""
    stale = stale_dirs(base)
    if not dry_run:
        for path in stale:
            remove_tree(path)
    return stale


def sweep_now_and_then() -> threading.Thread | None:
    """:func:`sweep`, at most once a minute in this process, on a thread of its own: a step's
    launch does not wait for a walk of the temp dir (its length grows with what is in it); the
    step joins it when it closes. Returns the thread (None: swept lately). Never raises."""
    now = time.monotonic()
    with _lock:
        if _last and now - _last[0] < _EVERY:
            return None
        _last[:] = [now]
    thread = threading.Thread(target=_sweep_quietly, name="jigs-sweep", daemon=True)
    try:
        thread.start()
    except RuntimeError:  # no thread to be had: housekeeping waits for the next step
        return None
    return thread


def _sweep_quietly() -> None:
    try:
        sweep()
    except Exception:  # a sweep is housekeeping: it never fails a step
        return
