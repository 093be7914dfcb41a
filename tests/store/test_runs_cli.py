"""Retention through the real ``jigs`` entry point: ``jigs runs list/show/prune --json``.

Runs are made in-process with the echo kind (local state and a Postgres store); the command
runs in a subprocess against the same data dir and store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from jigs import RunMetadata
from jigs.policy._lock import WorktreeLock
from jigs.steps import run_agent
from jigs.stores import PostgresStore

JIGS = str(Path(sys.executable).parent / "jigs")


def jigs(*args: str, store: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    if store is not None:
        env["JIGS_SESSION_STORE"] = store
    return subprocess.run(
        [JIGS, "runs", *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
        timeout=60,
    )


def runs_json(store: str | None) -> dict[str, dict[str, Any]]:
    done = jigs("list", "--json", store=store)
    assert done.returncode == 0, done.stderr
    return {r["run_id"]: r for r in json.loads(done.stdout)}


async def _step(tree: Path, run_id: str, store: object, prompt: str = "hello") -> Any:
    from jigs_harness_echo import EchoDescriptor

    result = await run_agent(
        harness=EchoDescriptor(),
        cwd=tree,
        prompt=prompt,
        run=RunMetadata(workflow_run_id=run_id),
        session_store=store,
    )
    assert result.session is not None
    assert result.session.store_key is not None
    return result


def _tree(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


@pytest.mark.anyio
async def test_list_show_and_prune_a_run(
    tmp_path: Path,
    postgres_dsn: str,
    pg_table: str,
    jigs_data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = PostgresStore(postgres_dsn, table=pg_table)
    tree = _tree(tmp_path, "tree")
    table = {"type": "postgres", "dsn": postgres_dsn, "table": pg_table}
    r1, r2 = f"review/PR-{uuid.uuid4().hex[:6]}", f"nightly {uuid.uuid4().hex[:6]}"
    await _step(tree, r1, table)
    await _step(tree, r1, table, "again")
    await _step(tree, r2, table)
    # the command finds the store the way a factory configures it: jigs.toml from here upward
    factory = tmp_path / "factory"
    factory.mkdir()
    (factory / "jigs.toml").write_text(
        f'[session_store]\ntype = "postgres"\ndsn = "{postgres_dsn}"\ntable = "{pg_table}"\n'
    )
    monkeypatch.chdir(factory)
    monkeypatch.delenv("JIGS_SESSION_STORE", raising=False)

    runs = runs_json(None)
    assert set(runs) == {r1, r2}, runs
    one = runs[r1]
    assert one["kinds"] == ["echo"]
    assert len(one["sessions"]) == 2
    assert one["local_bytes"] > 0
    assert one["store_bytes"] > 0
    assert one["size"] == one["local_bytes"] + one["store_bytes"]
    assert one["age_seconds"] < 120
    assert any(s.startswith("postgres:127.0.0.1") for s in one["stores"])
    assert one["locked"] is False
    r1_keys = [a.key for a in store.list(runs[r1]["name"] + "/")]
    r2_keys = [a.key for a in store.list(runs[r2]["name"] + "/")]
    assert r1_keys
    assert r2_keys

    shown = jigs("show", r1, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["run_id"] == r1
    assert jigs("show", "no-such-run").returncode == 1
    text = jigs("list")
    assert text.returncode == 0
    assert r1 in text.stdout
    assert "postgres:127.0.0.1" in text.stdout

    dry = jigs("prune", "--run", r1, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["removed"][0]["dry_run"] is True
    assert set(runs_json(None)) == {r1, r2}, "a dry run removed something"

    pruned = jigs("prune", "--run", r1, "--json")
    assert pruned.returncode == 0, pruned.stderr
    report = json.loads(pruned.stdout)
    assert [r["run_id"] for r in report["removed"]] == [r1]
    assert sorted(report["removed"][0]["store_keys"]) == sorted(r1_keys)
    assert report["refused"] == []
    # exactly that: r1 is gone locally and from the store, r2 is untouched
    assert set(runs_json(None)) == {r2}
    assert [a.key for a in store.list("")] == r2_keys
    assert not (jigs_data_dir / "runs" / runs[r1]["name"]).exists()
    assert (jigs_data_dir / "runs" / runs[r2]["name"]).is_dir()
    assert jigs("prune", "--run", r1).returncode == 1  # nothing left to prune
    store.close()


@pytest.mark.anyio
async def test_prune_refuses_a_locked_run_and_honours_the_age(
    tmp_path: Path, jigs_data_dir: Path
) -> None:
    local = f"local:{tmp_path / 'store'}"
    old_run, live_run = "old-run", "live-run"
    await _step(_tree(tmp_path, "a"), old_run, local)
    await _step(_tree(tmp_path, "b"), live_run, local)
    await _step(_tree(tmp_path, "c"), "fresh-run", local)
    # age the first two by ten days (local files and store files)
    past = time.time() - 10 * 86400
    for name in ("old-run", "live-run"):
        for root in (jigs_data_dir / "runs" / name, tmp_path / "store" / name):
            for path in [root, *root.rglob("*")]:
                os.utime(path, (past, past))
    lock = WorktreeLock(tmp_path / "b", live_run)
    lock.acquire()
    try:
        refused = jigs("prune", "--run", live_run, "--json", store=local)
        assert refused.returncode == 1
        assert [r["run_id"] for r in json.loads(refused.stdout)["refused"]] == [live_run]
        listed = runs_json(local)
        assert listed[live_run]["locked"] is True

        aged = jigs("prune", "--older-than", "7d", "--json", store=local)
        assert aged.returncode == 1  # the locked one was refused
        report = json.loads(aged.stdout)
        assert [r["run_id"] for r in report["removed"]] == [old_run]
        assert [r["run_id"] for r in report["refused"]] == [live_run]
        assert set(runs_json(local)) == {live_run, "fresh-run"}
        assert not (tmp_path / "store" / old_run).exists()
        assert (tmp_path / "store" / live_run).is_dir()
    finally:
        lock.release()
    # released: now it goes
    gone = jigs("prune", "--older-than", "7d", "--json", store=local)
    assert gone.returncode == 0, gone.stdout
    assert set(runs_json(local)) == {"fresh-run"}


def test_usage_errors() -> None:
    assert jigs("prune").returncode == 2
    assert jigs("prune", "--older-than", "7 days").returncode == 2
    assert jigs("prune", "--run", "x", "--older-than", "1d").returncode == 2
    listed = jigs("list")
    assert listed.returncode == 0
    assert "no runs are kept" in listed.stdout


@pytest.mark.anyio
async def test_listing_files_a_machine_crash_emptied_are_taken_and_written_again(
    tmp_path: Path, jigs_data_dir: Path
) -> None:
    """run.json and the stored-session records only list (they are not fsynced): emptied, as
    a crash may leave them, `jigs runs` still lists the run, and its next step writes run.json
    again."""
    tree = _tree(tmp_path, "tree")
    run_id = f"review/PR-{uuid.uuid4().hex[:6]}"
    await _step(tree, run_id, None)
    (run_dir,) = [p for p in (jigs_data_dir / "runs").iterdir() if p.is_dir()]
    emptied = [run_dir / "run.json", *run_dir.glob("*/stored/*.json")]
    assert len(emptied) == 2
    for path in emptied:
        path.write_bytes(b"")
    runs = runs_json(None)
    assert list(runs) == [run_dir.name]  # the safe name stands in for the lost real id
    await _step(tree, run_id, None, "again")
    runs = runs_json(None)
    assert list(runs) == [run_id]
    assert len(runs[run_id]["sessions"]) == 2  # both steps' sessions, from the store
