"""The local directory store (the default): ``<root>/<key>`` files, written atomically.

The default root is ``<jigs data dir>/store``. A directory shared between machines (NFS, a
mounted volume) works as well: a put writes a temporary file beside the target, flushes it and
renames it over the target (atomic on POSIX filesystems), so a reader never sees half a file.
"""

from __future__ import annotations

import os
from pathlib import Path

from jigs.errors import SessionStoreError
from jigs.policy._files import write_atomic
from jigs.policy._paths import data_dir
from jigs.stores._protocol import ArtifactInfo, check_key, sha256_hex

__all__ = ["LocalStore"]

_TMP_MARK = ".jigs-tmp-"


class LocalStore:
    """Artifacts as files under ``root`` (created on first put)."""

    name = "local"

    def __init__(self, root: Path | str | None = None) -> None:
        if root is None:
            root = data_dir() / "store"
        self.root = Path(root)

    def describe(self) -> str:
        return f"local:{self.root}"

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*check_key(key).split("/"))

    def put(self, key: str, data: bytes) -> ArtifactInfo:
        path = self._path(key)
        try:
            write_atomic(path, data, temp_name=f"{path.name}{_TMP_MARK}{os.urandom(6).hex()}")
            modified = path.stat().st_mtime
        except OSError as exc:
            raise _error(self, "put", exc) from None
        return ArtifactInfo(key, len(data), sha256_hex(data), modified)

    def get(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _error(self, "get", exc) from None

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def delete(self, key: str) -> bool:
        path = self._path(key)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise _error(self, "delete", exc) from None
        # drop now-empty parents up to the root
        parent = path.parent
        while parent != self.root and self.root in parent.parents:
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent
        return True

    def list(self, prefix: str = "") -> list[ArtifactInfo]:
        check_key(prefix, prefix=True)
        base = self.root.joinpath(*[p for p in prefix.split("/") if p])
        if not prefix.endswith("/") and prefix:
            base = base.parent
        if not base.is_dir():
            return []
        found: list[ArtifactInfo] = []
        for path in sorted(base.rglob("*")):
            if not path.is_file() or _TMP_MARK in path.name:
                continue
            key = path.relative_to(self.root).as_posix()
            if not key.startswith(prefix):
                continue
            stat = path.stat()
            found.append(ArtifactInfo(key, stat.st_size, None, stat.st_mtime))
        return found


def _error(store: LocalStore, operation: str, exc: OSError) -> Exception:
    return SessionStoreError(
        f"the local session store {store.root} failed to {operation} an artifact "
        f"({type(exc).__name__}: {exc.strerror or exc}); check the directory's permissions and "
        f"free space",
        store=store.describe(),
        operation=operation,
    )
