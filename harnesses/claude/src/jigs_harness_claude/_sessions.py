"""Where Claude Code keeps a session's transcript, and proof that one can be resumed.

Transcripts live in the operator's Claude Code config dir (``$CLAUDE_CONFIG_DIR``, else
``$HOME/.claude``) under ``projects/<cwd with every non-alphanumeric character as "->/<id>.jsonl``.
A project dir name longer than 200 characters is cut to 200 and suffixed with ``-<hash>`` (the
CLI's 32-bit string hash in base 36); jigs computes the same name, so a transcript is matched to
*that* worktree, never to another one.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from pathlib import Path

from jigs.errors import AgentSessionError

__all__ = ["config_dir", "project_dir_name", "transcript_path", "verify_transcript"]

_NON_ALNUM = re.compile(r"[^a-zA-Z0-9]")
_MAX_NAME = 200
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def config_dir(env: Mapping[str, str]) -> Path:
    """The Claude Code config dir the agent uses under ``env``."""
    explicit = env.get("CLAUDE_CONFIG_DIR")
    if explicit:
        return Path(explicit)
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / ".claude"


def _hash36(text: str) -> str:
    value = 0
    units = text.encode("utf-16-le")
    for i in range(0, len(units), 2):  # JavaScript strings are UTF-16 code units
        value = (value * 31 + int.from_bytes(units[i : i + 2], "little")) & 0xFFFFFFFF
    signed = value - (1 << 32) if value >= 1 << 31 else value
    number = abs(signed)
    digits = ""
    while number:
        number, rest = divmod(number, 36)
        digits = _DIGITS[rest] + digits
    return digits or "0"


def project_dir_name(cwd: Path) -> str:
    """The directory name Claude Code gives the project at ``cwd``."""
    text = str(cwd)
    name = _NON_ALNUM.sub("-", text)
    if len(name) <= _MAX_NAME:
        return name
    return f"{name[:_MAX_NAME]}-{_hash36(text)}"


def transcript_path(env: Mapping[str, str], cwd: Path, session_id: str) -> Path:
    """The transcript file of ``session_id`` for the worktree ``cwd``."""
    return config_dir(env) / "projects" / project_dir_name(cwd) / f"{session_id}.jsonl"


def verify_transcript(env: Mapping[str, str], cwd: Path, session_id: str) -> Path:
    """The transcript of ``session_id`` in ``cwd``, or :class:`AgentSessionError` saying why it
    cannot be resumed (not a Claude Code session id, or no transcript for this worktree)."""
    try:
        uuid.UUID(session_id)
    except ValueError:
        raise AgentSessionError(
            f"{session_id!r} is not a Claude Code session id (a UUID); start without resume",
            kind="claude",
            session_id=session_id,
        ) from None
    path = transcript_path(env, cwd, session_id)
    try:
        ok = path.is_file() and path.stat().st_size > 0
    except OSError:
        ok = False
    if not ok:
        raise AgentSessionError(
            f"Claude session {session_id} is missing for {cwd}: no transcript at {path}. "
            f"It may have been recorded in another worktree, under another user or "
            f"CLAUDE_CONFIG_DIR, or cleaned up; start without resume",
            kind="claude",
            session_id=session_id,
        )
    return path
