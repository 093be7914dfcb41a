"""What one step's sandbox shows its agent, and the bubblewrap arguments that build it.

The agent's whole process tree runs in a fresh root built from nothing (bubblewrap's own
tmpfs root, then made read-only):

- the system read-only: ``/usr`` (and the ``/bin``, ``/lib*``, ``/sbin`` links or directories
  beside it) and ``/etc``, with the files that hold machine secrets masked (``/etc/shadow``,
  ``/etc/gshadow``, SSH host keys, ``/etc/ssl/private``);
- a fresh ``/proc`` (only the step's processes), a minimal ``/dev``, a private ``/tmp``;
- ``$HOME`` as an empty, private tmpfs: nothing of the operator's home (``~/.ssh``, ``~/.aws``,
  logins, the jigs data dir) unless a path under it is exposed below;
- read-only: the paths the CLI runs from (:attr:`SandboxView.readable`);
- read-write: the worktree, the run's state dir for the kind, the step's private dirs
  (:attr:`SandboxView.writable`);
- symlinks a kind asks for (:attr:`SandboxView.links`), e.g. a CLI's config file in the empty
  ``$HOME`` pointing at a copy in the step's private dir.

Everything else of the machine (other worktrees, other steps' private dirs, the session store,
the worker's venv unless the CLI runs from it) is not in the sandbox at all. Inside, the agent
has no capability (``--cap-drop ALL``, in a user namespace of its own, root workers included),
so it cannot remount or unmount anything (``umount /proc`` fails).
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from jigs.policy._paths import data_dir

__all__ = [
    "MASKED",
    "NetworkMode",
    "SandboxView",
    "bwrap_args",
    "shows_hidden",
    "system_paths",
]

#: Network modes: ``deny`` (a network namespace of its own, only what jigs serves inside it),
#: ``host`` (the worker's network, an explicit opt-out).
NetworkMode = Literal["deny", "host"]

#: System paths under ``/etc`` that hold machine secrets: masked even though ``/etc`` is shown
#: (a root worker's agent is root-owned-file-reading root inside its user namespace).
MASKED: tuple[str, ...] = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/security/opasswd",
)

#: Top-level system entries shown read-only (a symlink is recreated as the same symlink).
_SYSTEM: tuple[str, ...] = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")


@dataclass
class SandboxView:
    """One step's sandbox: what its agent may read and write, and its network.

    ``writable`` and ``readable`` are absolute paths; a path that does not exist when a process
    launches is skipped (a CLI may not have made its directory yet). ``home`` is the ``HOME`` the
    agent sees (an empty tmpfs; paths under it listed here are shown on top).
    ``links`` maps a path inside the sandbox to what the symlink made there points at (an
    exposed path: a link never shows anything by itself).
    ``listen`` maps loopback ports jigs serves inside the step's network namespace (the
    credential proxy, relays) to what takes the listening socket made there for each launch:
    in ``deny`` mode the only addresses the agent can reach.
    """

    writable: list[Path] = field(default_factory=list)
    readable: list[Path] = field(default_factory=list)
    home: str | None = None
    network: NetworkMode = "deny"
    links: dict[Path, Path] = field(default_factory=dict)
    listen: dict[int, Callable[[socket.socket], None]] = field(default_factory=dict)

    def expose(self, path: str | os.PathLike[str], *, writable: bool = False) -> None:
        """Show ``path`` in the sandbox (read-only unless ``writable``) from the next launch."""
        target = Path(os.path.abspath(path))
        into = self.writable if writable else self.readable
        if target not in into:
            into.append(target)


def shows_hidden(path: str | os.PathLike[str]) -> bool:
    """Whether showing ``path`` would show what every step's sandbox hides: it is ``/``, or it
    is or holds the temp dir (every step's private dirs, often their worktrees), ``HOME`` (the
    operator's keys and logins) or the jigs data dir (sessions, other runs). A worker started
    from ``/tmp`` or from its home has that directory on ``sys.path``."""
    real = os.path.realpath(path).rstrip("/") + "/"
    hidden = (tempfile.gettempdir(), os.path.expanduser("~"), str(data_dir()))
    return any((os.path.realpath(h).rstrip("/") + "/").startswith(real) for h in hidden)


def system_paths() -> list[str]:
    """The system directories every sandbox shows read-only (those that exist here)."""
    return [p for p in _SYSTEM if os.path.isdir(p)]


def _system_args() -> list[str]:
    args: list[str] = []
    for path in _SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in MASKED:
        if os.path.isdir(path) and not os.path.islink(path):
            args += ["--tmpfs", path, "--remount-ro", path]
        elif os.path.lexists(path):
            args += ["--ro-bind", "/dev/null", path]
    return args


def _binds(paths: Iterable[Path], option: str) -> list[tuple[str, str, str]]:
    found = []
    for path in paths:
        if os.path.lexists(path):
            real = os.path.realpath(path)
            found.append((option, real, str(path)))
            if real != str(path):  # shown at its real path too: symlinks inside resolve there
                found.append((option, real, real))
    return found


def bwrap_args(
    view: SandboxView,
    *,
    cwd: Path,
    info_fd: int | None,
    block_fd: int | None,
    die_with_parent: bool,
) -> list[str]:
    """bubblewrap's options (after the executable, before ``--`` and the command) for ``view``.

    Binds are applied parents first, so a writable worktree inside a read-only path (or the
    reverse) gets the mode asked for it. ``info_fd``/``block_fd``: bubblewrap reports the
    sandbox's first process there, and waits to start the command until a byte arrives
    (so jigs can open its listeners inside the network namespace first)."""
    args = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",
        "--as-pid-1",
        "--new-session",
    ]
    if view.network == "deny":
        args.append("--unshare-net")
    if die_with_parent:
        args.append("--die-with-parent")
    if info_fd is not None:
        args += ["--info-fd", str(info_fd)]
    if block_fd is not None:
        args += ["--block-fd", str(block_fd)]
    args += _system_args()
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run"]
    if view.home and view.home != "/":
        args += ["--tmpfs", view.home]
    binds = _binds(view.readable, "--ro-bind") + _binds(view.writable, "--bind")
    for option, source, dest in sorted(binds, key=lambda b: (b[2].count("/"), b[2])):
        args += [option, source, dest]
    for link, target in sorted(view.links.items()):
        args += ["--symlink", str(target), str(link)]
    args += ["--chdir", str(cwd), "--remount-ro", "/"]
    return args
