"""Files and directories a step makes: written so a reader never sees half of one, private
directories and an anonymous file, named for what the step needs from :mod:`tempfile` and
:mod:`shutil`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO

__all__ = ["anonymous_file", "make_dir", "remove_tree", "write_atomic"]


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


def make_dir(prefix: str, parent: str | os.PathLike[str] | None = None) -> Path:
    """A new, private (0700), empty directory named ``prefix`` plus a random part, in ``parent``
    (default: the temp dir): :func:`tempfile.mkdtemp`, as a :class:`~pathlib.Path`."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Delete ``path`` and everything under it (never following a symlink out of it); whatever
    cannot be deleted is left. Never raises."""
    shutil.rmtree(path, ignore_errors=True)


def anonymous_file(prefix: str) -> IO[bytes]:
    """A read-write binary file with no name (gone with its last descriptor) in the temp dir:
    :func:`tempfile.TemporaryFile` (``O_TMPFILE`` where the filesystem has it)."""
    return tempfile.TemporaryFile(prefix=prefix)
