"""CPU of a whole process tree, its dead included: one cgroup (v1 ``cpuacct``) per run.

``RUSAGE_CHILDREN`` counts only the processes this one reaps, and what they reaped. A process
that dies inside a step's PID namespace (the Codex app server, killed with its namespace) is
reaped by the namespace's init, not by us, so its CPU went uncounted (issue 35: a cold Codex
step showed 0.024 of the raw CLI's CPU). A cgroup counts every task that ever ran in it, and a
child's descendants stay in it through their namespaces. Used by the whole-process benchmarks
(run as scripts, so importable by its name).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup/cpuacct")


def available() -> bool:
    """True where this process may make cpuacct groups (root, cgroup v1 mounted)."""
    return ROOT.is_dir() and os.access(ROOT, os.W_OK)


class CpuGroup:
    """One run's group: :meth:`wrap` its argv, read :meth:`seconds` after, then :meth:`remove`."""

    def __init__(self, name: str) -> None:
        self.path = ROOT / f"jigs-bench-{os.getpid()}-{name}"
        self.path.mkdir()

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` started by a shell that first joins the group (every descendant inherits it)."""
        join = f'echo $$ > {self.path}/cgroup.procs && exec "$@"'
        return ["sh", "-c", join, "sh", *argv]

    def seconds(self) -> float:
        """CPU seconds of every task that ran in the group so far."""
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def remove(self, wait: float = 5.0) -> None:
        """Remove the group once its last task is gone (a namespace's processes die just after
        the run's own process)."""
        deadline = time.monotonic() + wait
        while True:
            with contextlib.suppress(OSError):
                self.path.rmdir()
                return
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
