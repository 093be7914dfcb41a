"""Where jigs keeps its own state: ``$JIGS_DATA_DIR`` or the platform's user data dir, as
:mod:`platformdirs` names it (on Linux ``$XDG_DATA_HOME/jigs`` or ``~/.local/share/jigs``).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import platformdirs

from jigs.errors import InvalidInputError

__all__ = ["data_dir", "run_state_dir"]


def data_dir() -> Path:
    """The jigs data directory (created on first use): ``$JIGS_DATA_DIR``, else ``jigs`` in the
    user data dir. Raises :class:`~jigs.errors.InvalidInputError` when platformdirs finds no
    home to put that in (a relative ``HOME`` and no user-database entry)."""
    override = os.environ.get("JIGS_DATA_DIR")
    if override:
        path = Path(override)
    else:
        try:
            path = platformdirs.user_data_path("jigs", appauthor=False)
        except RuntimeError:  # platformdirs' answer when it cannot find a home
            raise InvalidInputError(
                "jigs cannot tell where its data directory goes: HOME is not an absolute path "
                "and the user database has no home for this user; set JIGS_DATA_DIR (or an "
                "absolute HOME or XDG_DATA_HOME)",
                argument="JIGS_DATA_DIR",
            ) from None
    path.mkdir(parents=True, exist_ok=True)
    return path


def _safe(part: str) -> str:
    """A file name for ``part``; a name that had to change gets a digest suffix, so two run ids
    never share a directory."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", part)[:100]
    if cleaned == part and cleaned not in {".", ".."}:
        return cleaned
    return f"{cleaned}-{hashlib.sha256(part.encode()).hexdigest()[:12]}"


def run_state_dir(run_id: str, kind: str) -> Path:
    """Durable per-run, per-kind state (session stores): survives the step, so a later step of
    the same run can resume."""
    path = data_dir() / "runs" / _safe(run_id) / _safe(kind)
    path.mkdir(parents=True, exist_ok=True)
    return path
