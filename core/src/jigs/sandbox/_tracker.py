"""The fallback isolation: remembering every descendant of a step's process.

Without a PID namespace, a command the agent detaches (``setsid``, a double fork) is reparented
away from the CLI and a snapshot taken at stop time no longer finds it. A :class:`Watch` knows
the members of the root's session (the launched process leads a new session, and a double fork
or ``nohup`` keeps it) and samples the descendants of its root, and of every process it has
already seen, every :data:`INTERVAL` seconds on one daemon thread shared by all watches
(running only while some watch is open), so a ``setsid`` child is still known when the step
stops. What it cannot see: a process that both leaves the session (``setsid``) and is orphaned
within one interval of being started (``( setsid cmd & )``).
"""

from __future__ import annotations

import threading

from jigs.sandbox._proctree import Proc, live, scan, stat

__all__ = ["INTERVAL", "Watch"]

#: Seconds between two samples of the process table.
INTERVAL = 0.05

_lock = threading.Lock()
_watches: set[Watch] = set()
_wakeup = threading.Condition(_lock)
_threads: list[threading.Thread] = []


class Watch:
    """The descendants ever seen of one root process (pid + start time)."""

    def __init__(self, root: int) -> None:
        self.root = root
        info = stat(root)
        self._known: set[Proc] = {(root, info[1])} if info is not None else set()
        # the session's id is the root's pid: once no member is left the kernel may hand that
        # pid (and so that session id) to an unrelated process, so stop looking at it then
        self._session: int | None = root
        self._known_lock = threading.Lock()
        self.sample()
        with _lock:
            _watches.add(self)
            _ensure_thread()
            _wakeup.notify_all()

    def sample(self) -> list[Proc]:
        """Add the current descendants of every known process still alive (the root first) and
        the members of the root's session; return every known process still alive."""
        with self._known_lock:
            alive = live(self._known)
            roots = [pid for pid, _ in alive]
            tree, members = scan(roots, self._session)
            if not members:
                self._session = None
            self._known = set(alive) | set(tree) | set(members)
            return sorted(self._known)

    def close(self) -> None:
        with _lock:
            _watches.discard(self)


def _ensure_thread() -> None:
    if not any(t.is_alive() for t in _threads):
        thread = threading.Thread(target=_run, name="jigs-descendant-tracker", daemon=True)
        _threads[:] = [thread]
        thread.start()


def _run() -> None:
    while True:
        with _lock:
            while not _watches:
                _wakeup.wait()
            watches = list(_watches)
        for watch in watches:
            watch.sample()
        with _lock:
            _wakeup.wait(INTERVAL)
