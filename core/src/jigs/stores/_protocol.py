"""The :class:`SessionStore` protocol: where a step's session artifacts go at close and come
back from before a resume.

A store maps keys (``/``-separated relative names, see :func:`check_key`) to bytes. Methods
are **blocking** (a store may use a synchronous driver); the core calls them off the event
loop, in a worker thread, with a time bound. A third-party store is any class with these
methods, registered under the entry point group ``jigs.session_stores``::

    [project.entry-points."jigs.session_stores"]
    mystore = "my_package.store:from_config"   # from_config(table: dict) -> SessionStore
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from jigs.errors import SessionStoreError

__all__ = ["ArtifactInfo", "SessionStore", "check_key", "sha256_hex"]

#: One path segment of a key: what :func:`jigs.policy._paths._safe` produces, plus ``=`` and ``+``.
_SEGMENT = re.compile(r"^[A-Za-z0-9._=+-]{1,200}$")
#: The longest key jigs writes or reads.
MAX_KEY = 1024


@dataclass(frozen=True)
class ArtifactInfo:
    """One stored artifact: its key, its size in bytes (as given to ``put``), its sha256 (hex;
    None when the store does not keep it and :meth:`SessionStore.list` would have to read the
    bytes) and when it was written (seconds since the epoch)."""

    key: str
    size: int
    sha256: str | None
    modified: float


@runtime_checkable
class SessionStore(Protocol):
    """Bytes by key. Every implementation guarantees:

    - ``put`` is atomic: a concurrent ``get`` returns the old bytes or the new ones, never
      part of either (write-then-rename, one SQL statement, one object PUT);
    - ``get`` returns exactly the bytes ``put`` was given (compression is internal), or None
      when the key is absent;
    - failures of the backend raise :class:`~jigs.errors.SessionStoreError` (never a raw
      driver error that could echo a DSN).
    """

    #: A short name shown in ``jigs runs list`` (``local``, ``postgres``, ``object``, ...).
    name: str

    def describe(self) -> str:
        """Where the store is, without any secret (no password, no token)."""
        ...

    def put(self, key: str, data: bytes) -> ArtifactInfo:
        """Store ``data`` under ``key`` atomically, replacing what was there."""
        ...

    def get(self, key: str) -> bytes | None:
        """The bytes under ``key``, or None."""
        ...

    def exists(self, key: str) -> bool:
        """True when ``key`` holds an artifact."""
        ...

    def delete(self, key: str) -> bool:
        """Remove ``key``; True when something was removed. Idempotent."""
        ...

    def list(self, prefix: str = "") -> list[ArtifactInfo]:
        """Every artifact whose key starts with ``prefix`` (a whole-segment prefix ending in
        ``/``, or empty for all), sorted by key."""
        ...


def check_key(key: str, *, prefix: bool = False) -> str:
    """``key`` if it is a valid store key, else :class:`~jigs.errors.SessionStoreError`.

    A key is 1..1024 characters of ``/``-separated segments, each of ``A-Za-z0-9._=+-`` and
    neither ``.`` nor ``..``: it can never leave a store's root directory or prefix. With
    ``prefix`` an empty string and a trailing ``/`` are accepted too."""
    body = key
    if prefix:
        if key == "":
            return key
        body = key.removesuffix("/")
    segments = body.split("/")
    if (
        not body
        or len(key) > MAX_KEY
        or any(s in {".", ".."} or not _SEGMENT.fullmatch(s) for s in segments)
    ):
        shown = key if len(key) <= 80 and key.isprintable() else "<not shown>"
        raise SessionStoreError(
            f"{shown!r} is not a session store key (segments of letters, digits and ._=+- "
            f"separated by '/', no '..'); it was not produced by jigs",
            store="-",
            operation="key",
        )
    return key


def sha256_hex(data: bytes) -> str:
    """The sha256 of ``data``, in hex."""
    return hashlib.sha256(data).hexdigest()
