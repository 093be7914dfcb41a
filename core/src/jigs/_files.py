"""Writing a file so that a reader never sees half of it."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(
    path: Path, data: bytes, *, temp_name: str | None = None, durable: bool = True
) -> None:
    """Write ``data`` to ``path`` (0600) through a temporary file beside it, fsynced, then
    renamed over ``path``. ``temp_name`` names the temporary file (default: a hidden name with
    a random part); it is removed on every path. ``durable=False`` skips the fsync, for a file
    that only lists or describes (a reader never sees half of it, but a crash of the machine
    may leave it empty or missing: its readers must take that). Raises ``OSError`` as the
    filesystem does."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(temp_name or f".{path.name}.jigs-{os.urandom(6).hex()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        tmp.replace(path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
