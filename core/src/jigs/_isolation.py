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
import shutil
import subprocess
import threading
from typing import Literal

import msgspec

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


class Isolation(msgspec.Struct, frozen=True):
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

_cache: dict[tuple[int, str], Isolation] = {}
_cache_lock = threading.Lock()


def reset_isolation_cache() -> None:
    """Forget the probe's answer (tests that change ``JIGS_ISOLATION`` call it)."""
    with _cache_lock:
        _cache.clear()


def _key() -> tuple[int, str]:
    return os.geteuid(), os.environ.get(ENV_VAR, "auto").strip().lower() or "auto"


def isolation() -> Isolation:
    """The isolation launches get, probed once per process (a few milliseconds, cached).

    Never raises: when the namespace chain cannot start, the answer is ``tree`` with the reason.
    While :func:`probe_soon`'s thread is probing, this waits for its answer.
    """
    key = _key()
    wanted = key[1]
    with _cache_lock:
        found = _cache.get(key)
        if found is None:
            found = _cache[key] = _probe(wanted)
    return found


def probe_soon() -> None:
    """Start the probe on a daemon thread unless its answer is already known, so a fresh
    process's first step does its own work meanwhile instead of waiting for the probe's
    subprocess (a few milliseconds) when it first needs :func:`isolation`. Never raises (a
    thread that cannot start leaves the probe to the first :func:`isolation` call)."""
    if _key() in _cache:
        return
    with contextlib.suppress(RuntimeError):
        threading.Thread(target=isolation, name="jigs-isolation-probe", daemon=True).start()


def _tree(setpriv: str | None, why: str) -> Isolation:
    prefix = (setpriv, "--pdeathsig", "KILL", "--") if setpriv else ()
    return Isolation("tree", prefix, f"descendant tracking only ({why})", _FIX)


def _probe(wanted: str) -> Isolation:
    setpriv = shutil.which("setpriv")
    if wanted == "tree":
        return _tree(setpriv, f"{ENV_VAR}=tree")
    if wanted != "auto":
        return _tree(setpriv, f"{ENV_VAR}={wanted!r} is not 'auto' or 'tree'")
    unshare, timeout = shutil.which("unshare"), shutil.which("timeout")
    tools = (("setpriv", setpriv), ("unshare", unshare), ("timeout", timeout))
    missing = [name for name, path in tools if not path]
    if setpriv is None or unshare is None or timeout is None:
        return _tree(setpriv, f"{', '.join(missing)} not found on PATH")
    true = shutil.which("true") or "/bin/true"
    namespaces = ["--pid", "--mount", "--mount-proc", "--fork", "--kill-child"]
    user = ["--user", f"--map-user={os.geteuid()}", f"--map-group={os.getegid()}"]
    # root creates the namespaces itself (and stays root with all its powers); anybody else, or a
    # root without CAP_SYS_ADMIN (a default Docker container), needs the user namespace
    candidates = [namespaces, user + namespaces] if os.geteuid() == 0 else [user + namespaces]
    errors = []
    for flags in candidates:
        prefix = (setpriv, "--pdeathsig", "KILL", "--", unshare, *flags, "--", timeout, "0")
        try:
            done = subprocess.run(
                [*prefix, true],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=10,
                env={"PATH": os.environ.get("PATH", os.defpath)},
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            errors.append(str(exc))
            continue
        if done.returncode == 0:
            kinds = "user + PID + mount" if "--user" in flags else "PID + mount"
            return Isolation(
                "namespace",
                prefix,
                f"a {kinds} namespace per step with a fresh /proc (unshare)",
                "",
            )
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        errors.append(lines[-1] if lines else f"exit {done.returncode}")
    return _tree(setpriv, f"unshare failed: {'; '.join(errors)}")
