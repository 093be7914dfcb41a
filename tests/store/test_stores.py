"""Every built-in store keeps the SessionStore contract: round trip, digests, listing, deletes,
keys that cannot escape, atomic puts under concurrent reads, errors without secrets."""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from jigs.errors import SessionStoreError
from jigs.stores import (
    LocalStore,
    ObjectStore,
    PostgresStore,
    SessionStore,
    resolve_store,
    sha256_hex,
)

STORES = ["local", "postgres", "object-file", "object-memory"]


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    name = request.param
    made: SessionStore
    if name == "local":
        made = LocalStore(tmp_path / "store")
    elif name == "postgres":
        dsn = request.getfixturevalue("postgres_dsn")
        made = PostgresStore(dsn, table=request.getfixturevalue("pg_table"))
    elif name == "object-file":
        made = ObjectStore(f"file://{tmp_path / 'objects'}")
    else:
        made = ObjectStore("memory://")
    yield made
    close = getattr(made, "close", None)
    if close is not None:
        close()


def test_round_trip_digest_list_and_delete(store: SessionStore) -> None:
    data = b'{"type":"user","text":"hello"}\n' * 5000  # compressible, above the threshold
    info = store.put("run-1/echo/s1/files/a", data)
    assert info.sha256 == sha256_hex(data)
    assert info.size == len(data)
    store.put("run-1/echo/s1/manifests/m.json", b"{}")
    store.put("run-2/echo/s2/files/b", b"")
    assert store.get("run-1/echo/s1/files/a") == data
    assert store.get("run-2/echo/s2/files/b") == b""
    assert store.get("run-1/echo/s1/files/missing") is None
    assert store.exists("run-1/echo/s1/files/a")
    assert not store.exists("run-1/echo/s1/files/missing")
    keys = [a.key for a in store.list("run-1/")]
    assert keys == ["run-1/echo/s1/files/a", "run-1/echo/s1/manifests/m.json"]
    assert {a.key for a in store.list("")} == {*keys, "run-2/echo/s2/files/b"}
    sizes = {a.key: a.size for a in store.list("run-1/")}
    assert sizes["run-1/echo/s1/files/a"] == len(data)
    # a prefix matches whole segments only: run-1/ never lists run-10/
    store.put("run-10/echo/s/files/c", b"x")
    assert all(a.key.startswith("run-1/") for a in store.list("run-1/"))
    # replace, then delete (idempotent)
    store.put("run-1/echo/s1/files/a", b"new")
    assert store.get("run-1/echo/s1/files/a") == b"new"
    assert store.delete("run-1/echo/s1/files/a") is True
    assert store.delete("run-1/echo/s1/files/a") is False
    assert store.get("run-1/echo/s1/files/a") is None


@pytest.mark.parametrize(
    "key", ["../escape", "/abs", "a//b", "a/./b", "a/../b", "", "a/b c", "a\\b", "a/\x00"]
)
def test_keys_that_could_escape_are_refused(store: SessionStore, key: str, tmp_path: Path) -> None:
    with pytest.raises(SessionStoreError):
        store.put(key, b"x")
    with pytest.raises(SessionStoreError):
        store.get(key)
    assert not (tmp_path / "escape").exists()


def test_put_is_atomic_for_concurrent_readers(store: SessionStore) -> None:
    """A reader sees the old artifact or the new one, whole, never a part of either."""
    a, b = b"a" * 600_000, b"b" * 900_000
    store.put("r/k/s/files/x", a)
    stop = threading.Event()
    seen: list[int] = []
    bad: list[int] = []

    def read() -> None:
        while not stop.is_set():
            got = store.get("r/k/s/files/x")
            if got not in (a, b):
                bad.append(len(got or b""))
            seen.append(1)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(20):
            store.put("r/k/s/files/x", b if i % 2 == 0 else a)
    finally:
        stop.set()
        reader.join(10)
    assert not bad, f"a reader saw partial artifacts of sizes {bad[:5]}"
    assert seen


def test_local_store_leaves_no_temporary_files(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s")
    for i in range(5):
        store.put("r/k/s/files/x", str(i).encode())
    assert [p.name for p in (tmp_path / "s" / "r" / "k" / "s" / "files").iterdir()] == ["x"]


def test_postgres_compresses_large_artifacts(postgres_dsn: str, pg_table: str) -> None:
    import psycopg

    store = PostgresStore(postgres_dsn, table=pg_table)
    transcript = b"".join(
        b'{"type":"assistant","message":{"content":"line %d of the answer"}}\n' % i
        for i in range(20_000)
    )
    store.put("r/k/s/files/t", transcript)
    store.put("r/k/s/files/small", b"tiny")
    with psycopg.connect(postgres_dsn) as conn:
        rows = dict(conn.execute(f"SELECT key, octet_length(data) FROM {pg_table}").fetchall())
        encodings = dict(conn.execute(f"SELECT key, encoding FROM {pg_table}").fetchall())
    assert encodings == {"r/k/s/files/t": "zlib", "r/k/s/files/small": "identity"}
    assert rows["r/k/s/files/t"] < len(transcript) / 4
    assert store.get("r/k/s/files/t") == transcript
    # a damaged compressed row is an error, never garbage bytes
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            f"UPDATE {pg_table} SET data = %s WHERE key = 'r/k/s/files/t'",
            (zlib.compress(b"x")[:-3],),
        )
    with pytest.raises(SessionStoreError, match="damaged"):
        store.get("r/k/s/files/t")
    store.close()


def test_postgres_unreachable_is_a_retryable_error_without_the_password() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store = PostgresStore(
        f"postgresql://jigs:hunter2-secret@127.0.0.1:{port}/db", connect_timeout=2
    )
    with pytest.raises(SessionStoreError) as info:
        store.get("r/k/s/files/x")
    assert info.value.retryable is True
    assert "hunter2" not in str(info.value)
    assert "hunter2" not in store.describe()


def test_postgres_table_name_is_checked() -> None:
    with pytest.raises(SessionStoreError, match="table name"):
        PostgresStore("postgresql://x@127.0.0.1/db", table="t; DROP TABLE users")


# ---------------------------------------------------------------------- configuration


def _factory_dir(tmp_path: Path, text: str, *, name: str = "jigs.toml") -> Path:
    factory = tmp_path / "factory"
    (factory / "worktree").mkdir(parents=True)
    (factory / name).write_text(text)
    return factory / "worktree"


def test_configuration_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JIGS_SESSION_STORE", raising=False)
    worktree = _factory_dir(tmp_path, f'[session_store]\ntype = "local"\npath = "{tmp_path}/cfg"\n')
    # a file inside the worktree never counts (an agent can write there)
    (worktree / "jigs.toml").write_text('[session_store]\ntype = "local"\npath = "/evil"\n')
    store = resolve_store(None, cwd=worktree)
    assert isinstance(store, LocalStore)
    assert store.root == tmp_path / "cfg"
    monkeypatch.setenv("JIGS_SESSION_STORE", f"local:{tmp_path}/env")
    assert resolve_store(None, cwd=worktree).root == tmp_path / "env"  # type: ignore[attr-defined]
    assert resolve_store(f"local:{tmp_path}/arg", cwd=worktree).root == tmp_path / "arg"  # type: ignore[attr-defined]
    mine = LocalStore(tmp_path / "mine")
    assert resolve_store(mine, cwd=worktree) is mine


def test_pyproject_table_and_dsn_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JIGS_SESSION_STORE", raising=False)
    worktree = _factory_dir(
        tmp_path,
        '[tool.jigs.session_store]\ntype = "postgres"\ndsn_env = "MY_DSN"\ntable = "t1"\n',
        name="pyproject.toml",
    )
    with pytest.raises(SessionStoreError, match="MY_DSN"):
        resolve_store(None, cwd=worktree)
    monkeypatch.setenv("MY_DSN", "postgresql://u:pw@127.0.0.1:1/db")
    store = resolve_store(None, cwd=worktree)
    assert isinstance(store, PostgresStore)
    assert store.table == "t1"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('[session_store]\ntype = "nope"\n', "unknown session store type"),
        ('[session_store]\ntype = "postgres"\n', "needs dsn_env"),
        ('session_store = "x"\n', "must be a table"),
        ("[session_store\n", "cannot read"),
    ],
)
def test_bad_configuration_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, match: str
) -> None:
    monkeypatch.delenv("JIGS_SESSION_STORE", raising=False)
    with pytest.raises(SessionStoreError, match=match):
        resolve_store(None, cwd=_factory_dir(tmp_path, text))


def test_unknown_url_is_refused_without_echoing_it() -> None:
    with pytest.raises(SessionStoreError) as info:
        resolve_store("ftp://user:secret@host/x")
    assert "secret" not in str(info.value)


class _PluginStore(LocalStore):
    name = "plugin"


def plugin_factory(table: dict[str, object]) -> SessionStore:
    return _PluginStore(str(table["path"]))


def test_third_party_store_through_the_entry_point_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.metadata as md

    ep = md.EntryPoint(name="mine", value=f"{__name__}:plugin_factory", group="jigs.session_stores")
    real: Callable[..., object] = md.entry_points

    def fake(**kw: object) -> object:
        if kw.get("group") == "jigs.session_stores":
            return md.EntryPoints([ep])
        return real(**kw)

    monkeypatch.setattr(md, "entry_points", fake)
    store = resolve_store({"type": "mine", "path": str(tmp_path / "p")})
    assert isinstance(store, _PluginStore)
    store.put("a/b", b"1")
    assert (tmp_path / "p" / "a" / "b").read_bytes() == b"1"


def test_object_store_description_drops_credentials() -> None:
    store = ObjectStore("memory://")
    assert store.describe() == "object:memory://"
    shown = ObjectStore("https://user:hunter2@example.invalid/bucket?token=abc").describe()
    assert "hunter2" not in shown
    assert "abc" not in shown
