"""A probe's answer per key, found once per process by a probe process that may start early.

Both host probes (:mod:`jigs.sandbox._isolation`'s namespace chain, :mod:`jigs.sandbox._probe`'s
bubblewrap) work the same way: the first step of a fresh process starts the probe's process as
soon as it can (:meth:`EarlyProbe.start_soon`, no thread: the process runs beside the
interpreter), and the first caller that needs the answer collects it (:meth:`EarlyProbe.answer`)
or probes itself. A started probe nobody collected is reaped at exit; a forked child holds none
of its parent's (waiting on a pid that is not its child would read as success).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["EarlyProbe"]

Key = TypeVar("Key", bound=Hashable)
Answer = TypeVar("Answer")
Process = subprocess.Popen[bytes]


class EarlyProbe(Generic[Key, Answer]):
    """``probe(key, started)`` finds the answer for ``key``, collecting ``started`` (the
    process :meth:`start_soon` began for that key, or None) whatever it decides; ``reap``
    ends a started process whose answer is not used. ``answers`` and ``started`` are read by
    tests only."""

    def __init__(
        self, probe: Callable[[Key, Process | None], Answer], reap: Callable[[Process], None]
    ) -> None:
        self._probe = probe
        self._reap = reap
        self._lock = threading.Lock()
        self.answers: dict[Key, Answer] = {}
        self.started: dict[Key, Process] = {}
        atexit.register(self._reap_started)  # a step that failed before it asked leaves one
        os.register_at_fork(after_in_child=self._forget_in_child)

    def answer(self, key: Key) -> Answer:
        """The answer for ``key``, probed (or collected) on the first call only."""
        with self._lock:
            if key not in self.answers:
                self.answers[key] = self._probe(key, self.started.pop(key, None))
            return self.answers[key]

    def start_soon(self, key: Key, begin: Callable[[], Answer | Process | None]) -> None:
        """Unless ``key`` is answered or probing: ``begin()`` starts the probe's process, or
        gives the answer at once, or None (the probe is left to :meth:`answer`). Never waits for
        a probe running in another thread, never raises."""
        if not self._lock.acquire(blocking=False):
            return  # a probe is running (in answer())
        try:
            if key in self.answers or key in self.started:
                return
            with contextlib.suppress(Exception):
                found = begin()
                if isinstance(found, subprocess.Popen):
                    self.started[key] = found
                elif found is not None:
                    self.answers[key] = found
        finally:
            self._lock.release()

    def collect_started(self) -> None:
        """Answer every key whose probe started (the answers are kept)."""
        with self._lock:
            for key in list(self.started):
                self.answers.setdefault(key, self._probe(key, self.started.pop(key)))

    def reap_started(self, *, forget_answers: bool = False) -> None:
        """End and reap every started probe not collected (and forget the answers)."""
        with self._lock:
            if forget_answers:
                self.answers.clear()
            self._reap_started()

    def _reap_started(self) -> None:
        for process in self.started.values():
            self._reap(process)
        self.started.clear()

    def _forget_in_child(self) -> None:
        """In a forked child: the parent's probes are not this process's children, and the
        lock may be held by a thread that did not come along."""
        self._lock = threading.Lock()
        for process in self.started.values():
            process.returncode = 0  # so that dropping it never waits on (or warns about) that pid
            for pipe in (process.stdout, process.stderr):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
        self.started.clear()
