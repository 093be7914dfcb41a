"""Which isolation a step's processes get, and the argv prefix that gives it.

**namespace** (where the kernel allows it): the CLI runs under
``setpriv --pdeathsig KILL -- unshare [--user --map-user=UID --map-group=GID] --pid --mount
--mount-proc --fork --kill-child -- timeout 0 CLI...``:

- ``setpriv`` gives the process jigs starts a parent-death signal, so a worker that dies (SIGKILL
  included) takes it along;
- ``unshare`` makes a PID and a mount namespace with a fresh ``/proc`` (the agent sees only its
  own step's processes, never the worker's environment), plus a user namespace that maps the
  worker's uid and gid to themselves when the worker is not root (a root worker creates the
  namespaces without one, so root stays fully root, as outside); ``--kill-child`` SIGKILLs the
  namespace's first process when ``unshare`` dies, and the kernel then kills everything in the
  namespace (``setsid``, ``nohup`` and double-forked descendants included);
- coreutils ``timeout 0`` (no time limit) is that first process: a PID namespace's first process
  ignores signals it has no handler for, so the CLI must not be it. ``timeout`` forwards
  TERM/INT/HUP to the CLI's group and exits with its status (a signal death ``N`` becomes exit
  ``128+N``, which :class:`~jigs.processes.ManagedProcess` turns back into ``-N``).

Two limits of the death links: a parent-death signal follows the *thread* that forked, so
``launch`` must run on the thread that runs the step's event loop (anyio always does); and a
worker killed in the millisecond between its fork and ``setpriv``'s ``prctl`` leaves that one
namespace running (it still holds the worktree lock's descriptors, so nobody else is let into the
worktree while it lives).

Why util-linux and coreutils rather than bubblewrap: both are essential packages on every Debian
and Ubuntu image (nothing to install), ``--kill-child`` and ``--pdeathsig`` are the two death
links the design needs, and the chain adds about 2.5 ms per launch.

**tree** (the fallback, where user namespaces are disabled or the tools are missing, or forced
with ``JIGS_ISOLATION=tree``): the CLI still gets the parent-death signal when ``setpriv``
exists; every descendant is tracked from ``/proc`` (sampled while the step runs) and killed when
the step stops. Weaker: a process that detaches within one sampling interval escapes, a
SIGKILLed worker leaves the CLI's descendants running, and the agent can read other processes'
``/proc`` entries. :func:`isolation` says which one is in force, why, and the fix.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from dataclasses import dataclass
from shutil import which
from typing import Literal

from jigs.sandbox._early import EarlyProbe

__all__ = [
    "ENV_VAR",
    "PLAIN",
    "Isolation",
    "isolation",
    "probe_soon",
    "reset_isolation_cache",
]

#: ``auto`` (the default: namespace where possible) or ``tree`` (force the fallback).
ENV_VAR = "JIGS_ISOLATION"

_FIX = (
    "allow unprivileged user namespaces (sysctl user.max_user_namespaces=15000; on Debian "
    "kernel.unprivileged_userns_clone=1; on Ubuntu 24.04+ kernel.apparmor_restrict_unprivileged"
    "_userns=0 or an AppArmor profile for python), run the worker where unshare(1) works (in "
    "Docker: --security-opt seccomp=unconfined or a pod with user namespaces), and make sure "
    "util-linux >= 2.36 (setpriv, unshare) and coreutils (timeout) are on PATH"
)


@dataclass(frozen=True)
class Isolation:
    """The isolation in force for this process's launches.

    ``mode`` is ``namespace`` or ``tree`` (``none``, a plain process group, is never probed: only
    benchmarks and tests ask for it); ``prefix`` is what goes before the CLI's argv;
    ``detail`` says what is in force (and, for ``tree``, why); ``fix`` is empty for
    ``namespace`` and says how to get it otherwise.
    """

    mode: Literal["namespace", "tree", "none"]
    prefix: tuple[str, ...]
    detail: str
    fix: str

    @property
    def namespaced(self) -> bool:
        return self.mode == "namespace"


#: No isolation at all: the launch as it was before namespaces (for benchmarks and controls).
PLAIN = Isolation("none", (), "a plain process group (no isolation)", "")


def reset_isolation_cache() -> None:
    """Forget the probe's answer (tests that change ``JIGS_ISOLATION`` call it)."""
    _EARLY.reap_started(forget_answers=True)


def _key() -> tuple[int, str]:
    return os.geteuid(), os.environ.get(ENV_VAR, "auto").strip().lower() or "auto"


def isolation() -> Isolation:
    """The isolation launches get, probed once per process (a few milliseconds, cached).

    Never raises: when the namespace chain cannot start, the answer is ``tree`` with the reason.
    When :func:`probe_soon` started the probe, this collects its answer (waiting for it only if
    it is still running).
    """
    found = _EARLY.answer(_key())
    _EARLY.reap_started()  # any left was started under another JIGS_ISOLATION or euid
    return found


def probe_soon() -> None:
    """Start the probe's first process unless the answer is known or the probe started, so a
    fresh process's first step does its own work while the namespace chain starts and exits
    (a few milliseconds) instead of waiting for it when it first needs :func:`isolation`, which
    collects it (a thread instead would need the GIL a dozen times while the step's imports
    hold it, and took 50 ms to finish the probe in a fresh process). Never raises (on any
    failure the probe is left to :func:`isolation`)."""
    key = _key()
    _EARLY.start_soon(key, lambda: _begin(key[1]))


def _begin(wanted: str) -> Isolation | subprocess.Popen[bytes]:
    """The answer when no probe is needed, else the first candidate's process."""
    plan = _plan(wanted)
    return plan if isinstance(plan, Isolation) else _spawn(plan[0])


def _tree(setpriv: str | None, why: str) -> Isolation:
    prefix = (setpriv, "--pdeathsig", "KILL", "--") if setpriv else ()
    return Isolation("tree", prefix, f"descendant tracking only ({why})", _FIX)


def _plan(wanted: str) -> Isolation | list[tuple[str, ...]]:
    """The answer when no probe is needed (forced or missing tools), else the namespace chain
    prefixes to try, in order."""
    setpriv = which("setpriv")
    if wanted == "tree":
        return _tree(setpriv, f"{ENV_VAR}=tree")
    if wanted != "auto":
        return _tree(setpriv, f"{ENV_VAR}={wanted!r} is not 'auto' or 'tree'")
    unshare, timeout = which("unshare"), which("timeout")
    tools = (("setpriv", setpriv), ("unshare", unshare), ("timeout", timeout))
    missing = [name for name, path in tools if not path]
    if setpriv is None or unshare is None or timeout is None:
        return _tree(setpriv, f"{', '.join(missing)} not found on PATH")
    namespaces = ["--pid", "--mount", "--mount-proc", "--fork", "--kill-child"]
    user = ["--user", f"--map-user={os.geteuid()}", f"--map-group={os.getegid()}"]
    # root creates the namespaces itself (and stays root with all its powers); anybody else, or a
    # root without CAP_SYS_ADMIN (a default Docker container), needs the user namespace
    candidates = [namespaces, user + namespaces] if os.geteuid() == 0 else [user + namespaces]
    return [
        (setpriv, "--pdeathsig", "KILL", "--", unshare, *flags, "--", timeout, "0")
        for flags in candidates
    ]


def _argv(prefix: tuple[str, ...]) -> list[str]:
    return [*prefix, which("echo") or "/bin/echo", _PROOF.decode()]


def _spawn(prefix: tuple[str, ...]) -> subprocess.Popen[bytes]:
    """The chain running ``echo`` of :data:`_PROOF` (stdout and stderr piped)."""
    return subprocess.Popen(
        _argv(prefix),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PATH": os.environ.get("PATH", os.defpath)},
    )


#: What the probed chain prints: a success is the chain's output, not only an exit status (a
#: process another part of the application reaped reads as exit 0 in :mod:`subprocess`).
_PROOF = b"jigs-namespace-probe-ok"


def _reap(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(Exception):
        process.kill()
        process.communicate(timeout=5)


def _outcome(process: subprocess.Popen[bytes]) -> str | None:
    """None when ``process`` (the chain) worked; else what went wrong, in a line."""
    try:
        stdout, stderr = process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        _reap(process)
        return "the namespace chain did not exit within 10 s"
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        _reap(process)
        return str(exc)
    if process.returncode == 0 and stdout.strip() == _PROOF:
        return None
    lines = stderr.decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else f"exit {process.returncode}"


def _probe(wanted: str, started: subprocess.Popen[bytes] | None = None) -> Isolation:
    """Run the plan's candidates until one works. ``started``: the first one's process, started
    early by :func:`probe_soon`; only its success is taken. A failure is tried again here: the
    early process gets its parent-death signal when the *thread* that started it ends, which
    may be any thread of the application."""
    try:
        plan = _plan(wanted)
        if isinstance(plan, Isolation):
            return plan
        errors = []
        for prefix in plan:
            if started is not None and started.args == _argv(prefix):
                early, started = started, None
                if _outcome(early) is None:
                    return _namespace(prefix)
            try:
                error = _outcome(_spawn(prefix))
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                error = str(exc)
            if error is None:
                return _namespace(prefix)
            errors.append(error)
        return _tree(which("setpriv"), f"unshare failed: {'; '.join(errors)}")
    finally:
        if started is not None:  # PATH changed since the early start: that answer is not used
            _reap(started)


#: The answer per (euid, ``$JIGS_ISOLATION``), and the probe :func:`probe_soon` started.
_EARLY: EarlyProbe[tuple[int, str], Isolation] = EarlyProbe(
    lambda key, started: _probe(key[1], started), _reap
)


def _namespace(prefix: tuple[str, ...]) -> Isolation:
    kinds = "user + PID + mount" if "--user" in prefix else "PID + mount"
    return Isolation(
        "namespace", prefix, f"a {kinds} namespace per step with a fresh /proc (unshare)", ""
    )
