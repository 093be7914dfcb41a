"""Where opencode's sessions live: one SQLite database per session, in the run's state dir.

opencode keeps its sessions in a SQLite database (``OPENCODE_DB``). jigs gives every session a
database of its own, ``<state dir>/sessions/<session id>/opencode.db``, so that the session store
carries exactly one session (its ancestors included) and no step ever writes the file another
step's ref names:

- a fresh turn runs on an empty database in a new directory (``pending-<uuid>``); opencode picks
  the session's id, the decoder reports it, and when the step closes the directory is renamed to
  the id;
- a fork (the first turn of a resumed step) copies the resumed session's database into a new
  directory and runs ``opencode run --session <id> --fork`` there: the copy holds the new
  session, the resumed file is only read;
- a later turn of the same step continues its session in its own directory.

At close each database is checkpointed into one self-contained file (``journal_mode=DELETE``,
no ``-wal`` / ``-shm`` beside it), the only artifact the session store keeps.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import sqlite3
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from jigs.errors import AgentSessionError
from jigs.plugin import artifacts_under

__all__ = ["DB_NAME", "SessionDirs", "artifacts", "has_session", "missing", "rehome"]

DB_NAME = "opencode.db"
_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


def _dir(sessions: Path, session_id: str) -> Path | None:
    """The directory of ``session_id``; None for an id that is not a plain token."""
    return sessions / session_id if _SESSION_ID.fullmatch(session_id) else None


def artifacts(sessions: Path, session_id: str, names: Collection[str] | None) -> Mapping[str, Path]:
    """:meth:`~jigs.plugin.Harness.session_artifacts` for one session's database."""
    root = _dir(sessions, session_id)
    if root is None:
        if names:
            raise ValueError(f"{session_id[:80]!r} is not an opencode session id")
        return {}
    return artifacts_under(root, DB_NAME, names)


def has_session(sessions: Path, session_id: str) -> bool:
    """Whether the session's database is here and holds the session (read-only)."""
    root = _dir(sessions, session_id)
    db = root / DB_NAME if root is not None else None
    if db is None or not db.is_file():
        return False
    try:
        with contextlib.closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)) as conn:
            row = conn.execute("SELECT 1 FROM session WHERE id = ?", (session_id,)).fetchone()
    except sqlite3.Error:
        return False
    return row is not None


def rehome(sessions: Path, session_id: str, cwd: Path) -> None:
    """opencode refuses a session whose recorded directory is missing (a session fetched from
    the store on another machine): point the database's sessions recorded in a directory that
    is gone at this step's worktree."""
    root = _dir(sessions, session_id)
    db = root / DB_NAME if root is not None else None
    if db is None or not db.is_file():
        return
    with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(db)) as conn:
        recorded = {row[0] for row in conn.execute("SELECT DISTINCT directory FROM session")}
        gone = [d for d in recorded if isinstance(d, str) and not Path(d).is_dir()]
        for directory in gone:
            conn.execute(
                "UPDATE session SET directory = ? WHERE directory = ?", (str(cwd), directory)
            )
        if gone:
            conn.commit()


def _settle(db: Path) -> None:
    """Fold the write-ahead log into the database file and leave it in rollback mode: one
    self-contained file, nothing beside it that a later copy could mix up."""
    if not db.is_file():
        return
    with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode=DELETE")


def missing(session_id: str, sessions: Path) -> AgentSessionError:
    return AgentSessionError(
        f"opencode session {session_id[:128]} is missing from {sessions}; start without resume",
        kind="opencode",
        session_id=session_id,
    )


@dataclass
class SessionDirs:
    """The databases of one step: where each turn runs, and the renames due at close."""

    root: Path
    #: session id -> the directory its database is in during this step
    active: dict[str, Path] = field(default_factory=dict)
    #: (directory, decoder-reported id holder) of fresh and forked sessions, renamed at close
    pending: list[tuple[Path, list[str]]] = field(default_factory=list)

    def for_turn(self, session_id: str | None, fork: bool) -> tuple[Path, list[str]]:
        """The directory the turn's ``OPENCODE_DB`` is in, and the list its decoder appends
        the reported session id to."""
        if session_id is not None and not fork:
            found = self.active.get(session_id) or _dir(self.root, session_id)
            if found is None or not (found / DB_NAME).is_file():
                raise missing(session_id, self.root)
            return found, []
        pending = self.root / f"pending-{uuid.uuid4().hex}"
        pending.mkdir(parents=True)
        if session_id is not None:  # a fork: a copy of the resumed session's database
            source = _dir(self.root, session_id)
            if source is None or not (source / DB_NAME).is_file():
                raise missing(session_id, self.root)
            _settle(source / DB_NAME)
            shutil.copyfile(source / DB_NAME, pending / DB_NAME)
        reported: list[str] = []
        self.pending.append((pending, reported))
        return pending, reported

    def started(self, directory: Path, session_id: str) -> None:
        """The decoder saw ``session_id`` running in ``directory``."""
        self.active[session_id] = directory

    def close(self) -> None:
        """At close: each fresh or forked database renamed to its session's id, every one
        settled into a single file. A directory whose turn reported no session is removed."""
        for directory, reported in self.pending:
            target = _dir(self.root, reported[0]) if reported else None
            if target is None or target.exists():
                shutil.rmtree(directory, ignore_errors=True)
                continue
            directory.rename(target)
            self.active[reported[0]] = target
        for directory in self.active.values():
            _settle(directory / DB_NAME)
        self.pending.clear()
