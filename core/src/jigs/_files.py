"""Files and directories a step makes: written so a reader never sees half of one, private
directories, an anonymous file, and finding an executable.

The last three do the job of :mod:`tempfile` and :func:`shutil.which` without importing them: a
step may run in a fresh process, and before its CLI starts, ``import tempfile`` (which loads
shutil and random) costs about 3 ms, shutil alone (bz2, lzma and zlib) about 1 ms. Each gives the
answer the stdlib gives (``tests/core/test_files.py`` holds them to it) and falls back to the
stdlib where it could not. Elsewhere than POSIX they are the stdlib's.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import IO

__all__ = ["anonymous_file", "make_dir", "remove_tree", "temp_dir", "which", "write_atomic"]


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


def temp_dir() -> str:
    """The directory :func:`tempfile.gettempdir` names: that function itself once tempfile is
    loaded (so an application's ``tempfile.tempdir`` holds), else the first of ``$TMPDIR``,
    ``$TEMP``, ``$TMP``, ``/tmp``, ``/var/tmp``, ``/usr/tmp`` that is a directory this user can
    write in; when none is, tempfile's own answer."""
    loaded = sys.modules.get("tempfile")
    if loaded is None and os.name == "posix":
        names = [os.environ.get(name) for name in ("TMPDIR", "TEMP", "TMP")]
        for candidate in [*(n for n in names if n), "/tmp", "/var/tmp", "/usr/tmp"]:
            directory = os.path.abspath(candidate) if candidate != os.curdir else candidate
            if os.path.isdir(directory) and os.access(directory, os.W_OK | os.X_OK):
                return directory
    import tempfile

    return tempfile.gettempdir()


def make_dir(prefix: str, parent: str | os.PathLike[str] | None = None) -> Path:
    """A new, empty directory (mode 0700) named ``prefix`` plus a random part, in ``parent``
    (default :func:`temp_dir`), as :func:`tempfile.mkdtemp` makes one. Without ``parent``, a
    temp dir that refuses it (full, out of inodes, refused by a security module: ``temp_dir``
    only asked for permission) leaves the choice to mkdtemp, which tries the next one. Raises
    ``OSError`` as mkdtemp does."""
    if os.name == "posix":
        base = os.fspath(parent) if parent is not None else temp_dir()
        for _ in range(100):
            path = os.path.join(base, f"{prefix}{os.urandom(6).hex()}")
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                continue
            except OSError:
                if parent is not None:
                    raise
                break
            return Path(os.path.abspath(path))
    import tempfile

    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Delete ``path`` and everything under it (never following a symlink out of it); whatever
    cannot be deleted is left. shutil is imported here, at a step's close, not before its
    launch. Never raises."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def anonymous_file(prefix: str) -> IO[bytes]:
    """A read-write binary file with no name (gone with its last descriptor), in
    :func:`temp_dir`, as :func:`tempfile.TemporaryFile` opens one (``O_TMPFILE`` where the
    filesystem has it; otherwise tempfile's way, with ``prefix``)."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is not None:
        try:
            fd = os.open(temp_dir(), os.O_RDWR | os.O_EXCL | os.O_CLOEXEC | flag, 0o600)
        except OSError:
            pass
        else:
            return open(fd, "w+b")
    import tempfile

    return tempfile.TemporaryFile(prefix=prefix)


def which(name: str, path: str | None = None) -> str | None:
    """``name`` as :func:`shutil.which` finds it on POSIX: a name with a directory part is
    checked as it is; otherwise the first ``<dir>/<name>`` along ``path`` (a ``PATH`` string;
    default ``$PATH``, else the system's default path) that exists, is executable and is not a
    directory. None when there is none."""
    if os.name != "posix":
        import shutil

        return shutil.which(name, path=path)

    def usable(candidate: str) -> bool:
        return (
            os.path.exists(candidate)
            and os.access(candidate, os.F_OK | os.X_OK)
            and not os.path.isdir(candidate)
        )

    if os.path.dirname(name):
        return name if usable(name) else None
    if path is None:
        path = os.environ.get("PATH")
        if path is None:
            try:
                path = os.confstr("CS_PATH")
            except (AttributeError, ValueError):
                path = os.defpath
    if not path:
        return None
    seen: set[str] = set()
    for directory in os.fsdecode(path).split(os.pathsep):
        if directory in seen:
            continue
        seen.add(directory)
        candidate = os.path.join(directory, name)
        if usable(candidate):
            return candidate
    return None
