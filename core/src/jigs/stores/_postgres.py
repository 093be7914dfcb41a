"""The Postgres store: one table in the database the workflow engine already uses.

::

    CREATE TABLE jigs_session_artifacts (
        key      text PRIMARY KEY,
        encoding text NOT NULL,          -- 'identity' or 'zlib'
        data     bytea NOT NULL,
        size     bigint NOT NULL,        -- bytes before compression
        sha256   text NOT NULL,          -- of the bytes before compression
        modified timestamptz NOT NULL DEFAULT now()
    )

The table is created on first use. A put is one ``INSERT ... ON CONFLICT DO UPDATE``
statement, so a reader sees the old row or the new one, never half of either. Artifacts of
:data:`COMPRESS_ABOVE` bytes or more are stored zlib-compressed when that saves at least a
tenth: transcripts are JSON lines that shrink 4-10x, which means less to send over the wire and
to keep in the table; zlib is in the standard library (no native wheel to ship) and at level 1
compresses a 1 MB transcript in a few milliseconds. ``psycopg`` (3) is imported only when a
store is used: ``pip install 'jigs-core[postgres]'``.
"""

from __future__ import annotations

import contextlib
import re
import threading
import zlib
from typing import TYPE_CHECKING, Any

from jigs.errors import SessionStoreError
from jigs.stores._protocol import ArtifactInfo, check_key, sha256_hex

if TYPE_CHECKING:
    import psycopg

__all__ = ["COMPRESS_ABOVE", "DEFAULT_TABLE", "PostgresStore"]

DEFAULT_TABLE = "jigs_session_artifacts"
#: Artifacts this size or larger are compressed (when it pays).
COMPRESS_ABOVE = 4096
#: zlib level: 1 is 3-5x faster than the default 6 and loses only a little on JSON lines.
ZLIB_LEVEL = 1
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


class PostgresStore:
    """Artifacts in a Postgres table, through one connection kept per store (thread-safe)."""

    name = "postgres"

    def __init__(
        self, dsn: str, *, table: str = DEFAULT_TABLE, connect_timeout: float = 10.0
    ) -> None:
        if not _IDENT.fullmatch(table):
            raise SessionStoreError(
                f"{table[:80]!r} is not a plain table name (letters, digits, _); set "
                f"session_store.table to one",
                store="postgres",
                operation="configure",
            )
        self._dsn = dsn
        self.table = table
        self.connect_timeout = connect_timeout
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    def describe(self) -> str:
        try:
            from psycopg.conninfo import conninfo_to_dict

            info = conninfo_to_dict(self._dsn)
            where = f"{info.get('host', 'local')}:{info.get('port', 5432)}/{info.get('dbname', '')}"
        except Exception:
            where = "?"
        return f"postgres:{where} table {self.table}"

    # ------------------------------------------------------------------ connection

    def _connect(self) -> psycopg.Connection[Any]:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        try:
            import psycopg
        except ImportError:
            raise SessionStoreError(
                "the Postgres session store needs psycopg 3; pip install 'jigs-core[postgres]'",
                store="postgres",
                operation="connect",
            ) from None
        conn = psycopg.connect(
            self._dsn, autocommit=True, connect_timeout=max(1, int(self.connect_timeout))
        )
        table = self.table
        with contextlib.suppress(psycopg.errors.UniqueViolation):  # two workers at once
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {table} (key text PRIMARY KEY, "  # table checked
                "encoding text NOT NULL, data bytea NOT NULL, size bigint NOT NULL, "
                "sha256 text NOT NULL, modified timestamptz NOT NULL DEFAULT now())"
            )
        self._conn = conn
        return conn

    def _run(self, operation: str, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        import psycopg

        with self._lock:
            for attempt in (1, 2):
                try:
                    conn = self._connect()
                    cur = conn.execute(sql, params)
                    return cur.fetchall() if cur.description else []
                except psycopg.OperationalError as exc:
                    self.close_quietly()
                    if attempt == 2:
                        raise _error(self, operation, exc) from None
                except psycopg.Error as exc:
                    raise _error(self, operation, exc) from None
        raise AssertionError("unreachable")

    def close_quietly(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def close(self) -> None:
        """Close the connection (a later call opens a new one)."""
        with self._lock:
            self.close_quietly()

    # ------------------------------------------------------------------ the protocol

    def put(self, key: str, data: bytes) -> ArtifactInfo:
        check_key(key)
        digest = sha256_hex(data)
        encoding, body = "identity", data
        if len(data) >= COMPRESS_ABOVE:
            packed = zlib.compress(data, ZLIB_LEVEL)
            if len(packed) <= len(data) * 0.9:
                encoding, body = "zlib", packed
        rows = self._run(
            "put",
            f"INSERT INTO {self.table} (key, encoding, data, size, sha256, modified) "
            "VALUES (%s, %s, %s, %s, %s, now()) ON CONFLICT (key) DO UPDATE SET "
            "encoding = EXCLUDED.encoding, data = EXCLUDED.data, size = EXCLUDED.size, "
            "sha256 = EXCLUDED.sha256, modified = EXCLUDED.modified "
            "RETURNING extract(epoch from modified)",
            (key, encoding, body, len(data), digest),
        )
        return ArtifactInfo(key, len(data), digest, float(rows[0][0]))

    def get(self, key: str) -> bytes | None:
        check_key(key)
        rows = self._run("get", f"SELECT encoding, data FROM {self.table} WHERE key = %s", (key,))
        if not rows:
            return None
        encoding, body = rows[0]
        body = bytes(body)
        if encoding == "identity":
            return body
        if encoding == "zlib":
            try:
                return zlib.decompress(body)
            except zlib.error:
                raise SessionStoreError(
                    f"the artifact {key} in {self.describe()} is damaged (its zlib stream does "
                    f"not decompress); delete it and start without resume",
                    store=self.describe(),
                    operation="get",
                ) from None

        raise SessionStoreError(
            f"the artifact {key} in {self.describe()} has an unknown encoding; a newer jigs "
            f"wrote it: upgrade jigs-core",
            store=self.describe(),
            operation="get",
        )

    def exists(self, key: str) -> bool:
        check_key(key)
        return bool(self._run("exists", f"SELECT 1 FROM {self.table} WHERE key = %s", (key,)))

    def delete(self, key: str) -> bool:
        check_key(key)
        return bool(
            self._run("delete", f"DELETE FROM {self.table} WHERE key = %s RETURNING 1", (key,))
        )

    def list(self, prefix: str = "") -> list[ArtifactInfo]:
        check_key(prefix, prefix=True)
        pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self._run(
            "list",
            f"SELECT key, size, sha256, extract(epoch from modified) FROM {self.table} "
            "WHERE key LIKE %s ORDER BY key",
            (pattern,),
        )
        return [ArtifactInfo(str(k), int(s), str(d), float(m)) for k, s, d, m in rows]


def _error(store: PostgresStore, operation: str, exc: Exception) -> Exception:

    # psycopg's messages can name the host and user, never the password; keep only the class
    # and the SQLSTATE to be safe
    state = getattr(exc, "sqlstate", None)
    return SessionStoreError(
        f"the Postgres session store ({store.describe()}) failed to {operation} "
        f"({type(exc).__name__}{f' {state}' if state else ''}); check that the database is up "
        f"and the DSN's user may use the table",
        store=store.describe(),
        operation=operation,
        retryable=True,
    )
