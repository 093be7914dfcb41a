"""Which session store a step uses: an argument, ``JIGS_SESSION_STORE``, the factory's
configuration, or the local directory.

Precedence: the ``session_store=`` argument of ``create_agent_runner`` / ``run_agent`` /
``agent_session`` (a :class:`SessionStore`, a URL string or a table), then the environment
variable ``JIGS_SESSION_STORE`` (a URL string), then ``[session_store]`` in ``jigs.toml`` or
``[tool.jigs.session_store]`` in ``pyproject.toml`` found from the worktree's *parent* upward
(like ``agents.env``: files inside the worktree never count, an agent can write there), then
:class:`LocalStore` under the jigs data dir.

A URL string: ``local`` or ``local:/dir`` (local directory), ``postgresql://…`` (Postgres),
``s3://``, ``gs://``, ``az://``, ``abfs://``, ``file://``, ``memory://`` (object storage).
A table::

    [tool.jigs.session_store]
    type = "postgres"              # "local" | "postgres" | "object" | an entry point's name
    dsn_env = "JIGS_STORE_DSN"     # postgres: the variable holding the DSN (or dsn = "...")
    table = "jigs_session_artifacts"
    # local:  path = "/shared/jigs-store"
    # object: url = "s3://bucket/jigs", options = { region = "eu-west-1" }

A type that is not built in names an entry point of the group ``jigs.session_stores`` whose
value is a callable taking the table (a dict) and returning a :class:`SessionStore`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jigs.errors import SessionStoreError
from jigs.registry._registry import entry_points
from jigs.stores._local import LocalStore
from jigs.stores._object import ObjectStore
from jigs.stores._postgres import DEFAULT_TABLE, PostgresStore
from jigs.stores._protocol import SessionStore

__all__ = [
    "ENTRY_POINT_GROUP",
    "ENV_VAR",
    "configured_store",
    "find_store_config",
    "resolve_store",
    "store_from_url",
]

ENV_VAR = "JIGS_SESSION_STORE"
ENTRY_POINT_GROUP = "jigs.session_stores"
_OBJECT_SCHEMES = (
    "s3://",
    "s3a://",
    "gs://",
    "az://",
    "azure://",
    "abfs://",
    "abfss://",
    "file://",
    "memory://",
    "https://",
    "http://",
)


def _error(message: str) -> Exception:
    return SessionStoreError(message, store="-", operation="configure")


def store_from_url(url: str) -> SessionStore:
    """A store for a URL string (see the module docs)."""
    if url == "local":
        return LocalStore()
    if url.startswith("local:"):
        return LocalStore(url.removeprefix("local:"))
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresStore(url)
    if url.startswith(_OBJECT_SCHEMES):
        return ObjectStore(url)
    raise _error(
        "the session store URL is not one jigs knows (use local, local:/dir, postgresql://..., "
        "s3://..., gs://..., az://..., file://... or memory://); the value is not shown"
    )


def _store_from_table(table: Mapping[str, Any], where: str) -> SessionStore:
    kind = table.get("type", "local")
    if not isinstance(kind, str):
        raise _error(f"{where}: type must be a string")

    def text(name: str) -> str | None:
        value = table.get(name)
        if value is not None and not isinstance(value, str):
            raise _error(f"{where}: {name} must be a string")
        return value

    if kind == "local":
        return LocalStore(text("path"))
    if kind == "postgres":
        dsn = text("dsn")
        name = text("dsn_env")
        if name:
            dsn = os.environ.get(name)
            if not dsn:
                raise _error(
                    f"{where}: dsn_env names {name}, which is not set; export the database's "
                    f"DSN in {name}"
                )
        if not dsn:
            raise _error(f"{where}: a postgres store needs dsn_env (or dsn)")
        return PostgresStore(dsn, table=text("table") or DEFAULT_TABLE)
    if kind == "object":
        options = table.get("options", {})
        if not isinstance(options, Mapping):
            raise _error(f"{where}: options must be a table")
        return ObjectStore(text("url"), options=options)

    for ep in entry_points(ENTRY_POINT_GROUP):
        if ep.name == kind:
            try:
                factory = ep.load()
                store = factory(dict(table))
            except Exception as exc:
                raise _error(
                    f"{where}: the session store plugin {kind!r} ({ep.value}) failed to load "
                    f"({type(exc).__name__}: {str(exc)[:200]}); fix or reinstall it"
                ) from None
            if not isinstance(store, SessionStore):
                raise _error(
                    f"{where}: the session store plugin {kind!r} returned "
                    f"{type(store).__name__}, which lacks the SessionStore methods"
                )
            return store
    raise _error(
        f"{where}: unknown session store type {kind[:60]!r}; use local, postgres, object or "
        f"install the plugin that provides it (entry point group {ENTRY_POINT_GROUP})"
    )


def find_store_config(start: Path) -> tuple[Mapping[str, Any], str] | None:
    """The nearest ``[session_store]`` (jigs.toml) or ``[tool.jigs.session_store]``
    (pyproject.toml) table from ``start`` upward, with where it was read."""
    for directory in (start, *start.parents):
        for filename in ("jigs.toml", "pyproject.toml"):
            path = directory / filename
            if not path.is_file():
                continue

            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                raise _error(f"cannot read {path} ({type(exc).__name__}); fix the file") from None
            if filename == "pyproject.toml":
                table = data.get("tool", {}).get("jigs", {}).get("session_store")
                where = f"{path} [tool.jigs.session_store]"
            else:
                table = data.get("session_store")
                where = f"{path} [session_store]"
            if table is None:
                continue
            if not isinstance(table, Mapping):
                raise _error(f"{where} must be a table")
            return table, where
    return None


def resolve_store(spec: object = None, *, cwd: Path | None = None) -> SessionStore:
    """The store for a step: ``spec`` (a store, a URL, a table), else ``JIGS_SESSION_STORE``,
    else the configuration found from ``cwd``'s parent upward, else the local directory.
    Raises :class:`~jigs.errors.SessionStoreError` for a bad configuration."""
    if spec is not None:
        if isinstance(spec, str):
            return store_from_url(spec)
        if isinstance(spec, Mapping):
            return _store_from_table(spec, "session_store=")
        if isinstance(spec, SessionStore):
            return spec
        raise _error(
            f"session_store must be a SessionStore, a URL or a table, got {type(spec).__name__}"
        )
    return configured_store(cwd.resolve().parent if cwd is not None else None)


def configured_store(start: Path | None) -> SessionStore:
    """``JIGS_SESSION_STORE``, else the configuration found from ``start`` upward (None: none
    is searched), else the local directory. What ``jigs runs`` uses (from the current dir)."""
    url = os.environ.get(ENV_VAR)
    if url:
        return store_from_url(url)
    if start is not None:
        found = find_store_config(start)
        if found is not None:
            return _store_from_table(*found)

    return LocalStore()
