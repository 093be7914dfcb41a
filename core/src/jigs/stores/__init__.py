"""Session stores: where a step's session artifacts (transcripts, rollouts, session files) go
at close, and where a resume on another machine fetches them from.

- :class:`LocalStore` -- files under ``<jigs data dir>/store`` (the default) or any directory;
- :class:`PostgresStore` -- a table, through ``psycopg`` 3 (``jigs-core[postgres]``);
- :class:`ObjectStore` -- S3, GCS, Azure, a local directory, through ``obstore``
  (``jigs-core[object-store]``);
- a third-party store: any class with the :class:`SessionStore` methods, registered in the
  entry point group ``jigs.session_stores``.

:func:`resolve_store` picks one from an argument, ``JIGS_SESSION_STORE`` or the factory's
configuration (see :mod:`jigs.stores._config`).
"""

from __future__ import annotations

from jigs.stores._config import ENTRY_POINT_GROUP, ENV_VAR, resolve_store, store_from_url
from jigs.stores._local import LocalStore
from jigs.stores._object import ObjectStore
from jigs.stores._postgres import PostgresStore
from jigs.stores._protocol import ArtifactInfo, SessionStore, check_key, sha256_hex

__all__ = [
    "ENTRY_POINT_GROUP",
    "ENV_VAR",
    "ArtifactInfo",
    "LocalStore",
    "ObjectStore",
    "PostgresStore",
    "SessionStore",
    "check_key",
    "resolve_store",
    "sha256_hex",
    "store_from_url",
]
