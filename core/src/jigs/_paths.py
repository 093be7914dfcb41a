"""Where jigs keeps its own state: ``$JIGS_DATA_DIR`` or the platform's user data dir.

On Linux the user data dir follows the XDG Base Directory spec (``$XDG_DATA_HOME`` when it is
an absolute path, else ``~/.local/share``; a relative ``HOME`` counts as unset and the user
database is asked), as current platformdirs releases apply it (older 4.x releases took a
relative ``XDG_DATA_HOME`` as given), computed here without importing platformdirs: a step may
run in a fresh process, and platformdirs' import and first call cost about 5 ms before the CLI
can start (``benchmarks/bench_cold.py``). ``tests/core/test_paths.py`` holds both to the same
answer with the platformdirs the workspace locks. Elsewhere (macOS, Windows) platformdirs
answers.
"""

from __future__ import annotations

import os
import posixpath
import re
import sys
from pathlib import Path

__all__ = ["data_dir", "run_state_dir"]

#: The shared data directory under the user's home, per the XDG Base Directory spec.
_XDG_DEFAULT = "~/.local/share"


def _xdg_data_home() -> str:
    """``$XDG_DATA_HOME`` when absolute, else ``~/.local/share`` (a relative ``HOME`` counts as
    unset: the user database says where home is), as platformdirs reads them on Linux.

    Raises :class:`~jigs.errors.InvalidInputError` when no absolute home can be found.
    """
    xdg = os.environ.get("XDG_DATA_HOME", "")
    if posixpath.isabs(xdg):
        return xdg
    home = os.environ.get("HOME")
    if home is None or posixpath.isabs(home):
        expanded = os.path.expanduser(_XDG_DEFAULT)
    else:
        expanded = _XDG_DEFAULT
        try:
            import pwd

            expanded = pwd.getpwuid(os.getuid()).pw_dir.rstrip("/") + _XDG_DEFAULT[1:]
        except (ImportError, KeyError):
            pass
    if not posixpath.isabs(expanded):
        from jigs.errors import InvalidInputError

        raise InvalidInputError(
            "jigs cannot tell where its data directory goes: HOME is not an absolute path and "
            "the user database has no home for this user; set JIGS_DATA_DIR (or an absolute "
            "HOME or XDG_DATA_HOME)",
            argument="JIGS_DATA_DIR",
        )
    return expanded


def data_dir() -> Path:
    """The jigs data directory (created on first use): ``$JIGS_DATA_DIR``, else ``jigs`` in the
    user data dir. Raises :class:`~jigs.errors.InvalidInputError` when there is no absolute
    home to find that in (see :func:`_xdg_data_home`)."""
    override = os.environ.get("JIGS_DATA_DIR")
    if override:
        path = Path(override)
    elif sys.platform == "linux":
        path = Path(_xdg_data_home(), "jigs")
    else:
        import platformdirs

        path = platformdirs.user_data_path("jigs", appauthor=False)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _safe(part: str) -> str:
    """A file name for ``part``; a name that had to change gets a digest suffix, so two run ids
    never share a directory."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", part)[:100]
    if cleaned == part and cleaned not in {".", ".."}:
        return cleaned
    import hashlib

    return f"{cleaned}-{hashlib.sha256(part.encode()).hexdigest()[:12]}"


def run_state_dir(run_id: str, kind: str) -> Path:
    """Durable per-run, per-kind state (session stores): survives the step, so a later step of
    the same run can resume."""
    path = data_dir() / "runs" / _safe(run_id) / _safe(kind)
    path.mkdir(parents=True, exist_ok=True)
    return path
