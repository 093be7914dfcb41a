"""Two machines on one host: separate data dirs, HOMEs and worktrees, nothing shared but the
Postgres session store. Step 1 runs on A; step 2 resumes on B and the agent has the history.

The echo kind runs everywhere. claude, codex and pi need their real CLIs (``require_cli``:
a failure in CI when missing) and their ``Harness.session_artifacts`` wired; until a kind
declares its artifacts its case is a strict xfail (it must fail), so wiring it turns the case
on by itself.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from jigs import AgentSessionRef, RunMetadata
from jigs.errors import AgentSessionError
from jigs.plugin import Harness
from jigs.processes import observe_launches
from jigs.registry._registry import default_registry
from jigs.steps import agent_session, run_agent
from jigs_testing import ModelServer
from jigs_testing._environ import patched_environ


def _wired(kind: str) -> bool:
    try:
        harness = default_registry().get(kind)
    except Exception:
        return False
    return type(harness).session_artifacts is not Harness.session_artifacts


def _kind(kind: str) -> Any:
    return pytest.param(
        kind,
        marks=[
            pytest.mark.real_cli(kind),
            pytest.mark.xfail(
                not _wired(kind),
                reason=f"the {kind} kind does not declare session_artifacts yet",
                strict=True,
            ),
        ],
    )


KINDS = ["echo", _kind("claude"), _kind("codex"), _kind("pi"), _kind("opencode")]


class Machine:
    """One worker: its own jigs data dir, HOME and worktree (a checkout of the same repo)."""

    def __init__(self, root: Path, name: str, host_env: dict[str, str]) -> None:
        self.root = root / name
        self.data = self.root / "jigs-data"
        self.home = self.root / "home"
        self.worktree = self.root / "checkout"
        for path in (self.data, self.home, self.worktree):
            path.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(self.worktree)], check=True)
        (self.worktree / "README.md").write_text("the same repository on every machine\n")
        self.env = {"JIGS_DATA_DIR": str(self.data), "HOME": str(self.home), **host_env}

    @contextmanager
    def active(self) -> Iterator[None]:
        with patched_environ(self.env):
            yield

    async def echo_turn(
        self, prompt: str, *, run: RunMetadata, store: Any, resume: Any = None
    ) -> Any:
        """One echo-kind step on this machine's worktree, its session kept in ``store``."""
        from jigs_harness_echo import EchoDescriptor

        return await run_agent(
            harness=EchoDescriptor(),
            cwd=self.worktree,
            prompt=prompt,
            run=run,
            resume=resume,
            session_store=store,
        )

    def leave(self) -> None:
        """The machine is gone: its checkout, data dir and HOME (only the store remains)."""
        shutil.rmtree(self.root)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_step_2_resumes_on_another_machine_through_postgres(
    kind: str,
    tmp_path: Path,
    pg_store_table: dict[str, str],
    require_cli: Callable[[str], Path],
) -> None:
    if kind != "echo":
        require_cli(kind)
    harness = default_registry().get(kind)
    run = RunMetadata(workflow_run_id=f"two-machines-{uuid.uuid4().hex[:8]}")
    async with ModelServer() as server:
        plan = harness.demo_plan(server)
        assert plan is not None
        a = Machine(tmp_path, "a", dict(plan.host_env))
        b = Machine(tmp_path, "b", dict(plan.host_env))
        common = {"run": run, "agents_env": plan.agents_env, "session_store": pg_store_table}

        with a.active():
            first = await run_agent(
                harness=plan.descriptor,
                cwd=a.worktree,
                prompt=plan.write_file(server, "notes.txt", "written on A"),
                **common,
            )
        assert first.session is not None
        assert first.session.store_key is not None, "the session did not reach the store"
        assert first.session.digest is not None
        # the ref crosses the workflow boundary as JSON
        ref = AgentSessionRef.from_data(json.loads(json.dumps(first.session.to_data())))
        # nothing of A is on B, and A is gone
        assert not any(b.data.rglob("*")), "B's data dir is not empty before the resume"
        a.leave()

        before = len(server.model_requests)
        with b.active():
            second = await agent_session(
                harness=plan.descriptor,
                cwd=b.worktree,
                session=ref,
                resume_prompt=plan.recall(server),
                fresh_prompt="(a fresh start means the history was lost)",
                **common,
            )
        if kind == "echo":
            assert "(turn 2)" in second.text, second.text
        else:
            assert "I remember" in second.text, second.text
            assert server.model_requests[before].message_count > 1
        assert second.session is not None
        assert second.session.id != first.session.id  # resuming forks: a new id, same history
        # the session now lives on B as well, and its newer state is in the store
        assert second.session.digest != first.session.digest
        assert any(b.data.rglob("*")) or kind == "claude"


@contextmanager
def _no_launch() -> Iterator[list[Any]]:
    with observe_launches() as launches:
        yield launches
    assert not launches, f"something was launched: {launches[0].argv[:2]}"


async def _first_step(
    tmp_path: Path, store: dict[str, str], *, keep_a: bool = False
) -> tuple[Machine, Machine, Any]:

    a, b = Machine(tmp_path, "a", {}), Machine(tmp_path, "b", {})
    run = RunMetadata(workflow_run_id=f"tamper-{uuid.uuid4().hex[:8]}")
    with a.active():
        first = await a.echo_turn("remember me", run=run, store=store)
    assert first.session is not None
    assert first.session.store_key is not None
    if not keep_a:
        a.leave()
    return a, b, (run, first.session)


def _sql(dsn: str, statement: str, *params: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(statement, params)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


@pytest.mark.anyio
@pytest.mark.parametrize("damage", ["truncate", "alter", "delete-file", "alter-manifest", "prune"])
async def test_a_damaged_store_copy_is_refused_before_anything_starts(
    damage: str, tmp_path: Path, pg_store_table: dict[str, str], postgres_dsn: str
) -> None:

    _a, b, (run, ref) = await _first_step(tmp_path, pg_store_table)
    table = pg_store_table["table"]
    file_key = next(
        k for (k,) in _sql(postgres_dsn, f"SELECT key FROM {table} ORDER BY key") if "/files/" in k
    )
    if damage == "truncate":
        _sql(
            postgres_dsn,
            f"UPDATE {table} SET data = substring(data from 1 for 5), "
            "encoding = 'identity' WHERE key = %s",
            file_key,
        )
    elif damage == "alter":
        # same length, one byte different (the stored digest column is left as it was)
        _sql(
            postgres_dsn,
            f"UPDATE {table} SET data = overlay(data placing '\\x58'::bytea "
            "from 3 for 1) WHERE key = %s",
            file_key,
        )
    elif damage == "delete-file":
        _sql(postgres_dsn, f"DELETE FROM {table} WHERE key = %s", file_key)
    elif damage == "alter-manifest":
        _sql(
            postgres_dsn,
            f"UPDATE {table} SET data = data || '\\x20'::bytea WHERE key = %s",
            ref.store_key,
        )
    else:
        _sql(postgres_dsn, f"DELETE FROM {table}")
    with b.active(), _no_launch(), pytest.raises(AgentSessionError) as info:
        await b.echo_turn("continue", run=run, resume=ref, store=pg_store_table)
    assert info.value.session_id == ref.id
    assert "from the session store" in str(info.value)
    # nothing was placed on B
    assert not list(b.data.rglob(f"{ref.id}.json"))


@pytest.mark.anyio
async def test_a_ref_pointing_at_another_sessions_manifest_is_refused(
    tmp_path: Path, pg_store_table: dict[str, str]
) -> None:

    a, b, (run, ref) = await _first_step(tmp_path, pg_store_table, keep_a=True)
    with a.active():
        other = await a.echo_turn("another", run=run, store=pg_store_table)
    assert other.session is not None
    a.leave()
    forged = ref.replace(store_key=other.session.store_key, digest=other.session.digest)
    with b.active(), _no_launch(), pytest.raises(AgentSessionError):
        await b.echo_turn("x", run=run, resume=forged, store=pg_store_table)


@pytest.mark.anyio
async def test_a_local_copy_that_differs_is_replaced_by_the_snapshot_the_ref_names(
    tmp_path: Path, pg_store_table: dict[str, str]
) -> None:
    """A retried step resumes from exactly the state its ref names (snapshots are immutable),
    even after a later attempt grew the local transcript."""

    a, _b, (run, ref) = await _first_step(tmp_path, pg_store_table, keep_a=True)
    with a.active():
        later = await a.echo_turn("attempt one", run=run, resume=ref, store=pg_store_table)
        assert "(turn 2)" in later.text
        retried = await a.echo_turn("attempt two", run=run, resume=ref, store=pg_store_table)
    assert "(turn 2)" in retried.text, retried.text


@pytest.mark.anyio
async def test_refs_without_store_fields_load_but_never_resume_an_unchecked_copy(
    tmp_path: Path, pg_store_table: dict[str, str]
) -> None:
    """A ref without a digest (its save failed, or it predates session stores) parses, but a
    local copy nothing can check is not resumed; on B there is none: the kind's own check."""

    a, b, (run, ref) = await _first_step(tmp_path, pg_store_table, keep_a=True)
    old = AgentSessionRef.from_data({"harness": "echo", "id": ref.id, "descriptor": ref.descriptor})
    assert old.store_key is None
    with a.active(), _no_launch(), pytest.raises(AgentSessionError, match="carries no store key"):
        await a.echo_turn("x", run=run, resume=old, store=pg_store_table)
    with a.active():  # the ref with its digest resumes the same copy
        again = await a.echo_turn("x", run=run, resume=ref, store=pg_store_table)
    assert "(turn 2)" in again.text
    with b.active(), _no_launch(), pytest.raises(AgentSessionError, match="missing"):
        await b.echo_turn("x", run=run, resume=old, store=pg_store_table)


@pytest.mark.anyio
async def test_runner_session_from_names_a_stored_snapshot(
    tmp_path: Path, pg_store_table: dict[str, str]
) -> None:
    from jigs.models import generate_text
    from jigs.steps import create_agent_runner
    from jigs_harness_echo import EchoDescriptor

    a, b = Machine(tmp_path, "a", {}), Machine(tmp_path, "b", {})
    run = RunMetadata(workflow_run_id=f"runner-{uuid.uuid4().hex[:8]}")
    with a.active():
        async with create_agent_runner(
            EchoDescriptor(), cwd=a.worktree, run=run, session_store=pg_store_table
        ) as runner:
            result = await generate_text(runner.model, prompt="first")
            ref = runner.session_from(result)
    assert ref is not None
    assert ref.store_key is not None
    a.leave()
    with b.active():
        resumed = await b.echo_turn("second", run=run, resume=ref, store=pg_store_table)
    assert "(turn 2)" in resumed.text


@pytest.mark.anyio
@pytest.mark.parametrize(
    "forge",
    [
        "{prefix}/manifests/../../../../etc/passwd",
        "other-run/echo/{id}/manifests/x.json",
        "{prefix}/files/x",
    ],
)
async def test_a_forged_store_key_is_refused(
    forge: str, tmp_path: Path, pg_store_table: dict[str, str]
) -> None:

    _a, b, (run, ref) = await _first_step(tmp_path, pg_store_table)
    assert ref.store_key is not None
    prefix = ref.store_key.rsplit("/manifests/", 1)[0]
    forged = ref.replace(store_key=forge.format(prefix=prefix, id=ref.id))
    with b.active(), _no_launch(), pytest.raises(AgentSessionError):
        await b.echo_turn("x", run=run, resume=forged, store=pg_store_table)


@pytest.mark.anyio
async def test_a_session_does_not_move_to_a_sibling_worktree_while_its_own_exists(
    tmp_path: Path, pg_store_table: dict[str, str]
) -> None:
    """On the machine where its worktree still is, a session is not copied into another
    worktree: the kind's own rules decide (here: echo's session is not in B's state)."""

    a, b, (run, ref) = await _first_step(tmp_path, pg_store_table, keep_a=True)
    with b.active(), _no_launch(), pytest.raises(AgentSessionError) as info:
        await b.echo_turn("x", run=run, resume=ref, store=pg_store_table)
    assert "from the session store" not in str(info.value)
    a.leave()
    with b.active():
        moved = await b.echo_turn("x", run=run, resume=ref, store=pg_store_table)
    assert "(turn 2)" in moved.text


@pytest.mark.anyio
async def test_two_machines_through_object_storage(tmp_path: Path) -> None:
    """The same through obstore (its local file backend; no cloud is reachable here)."""
    store = f"file://{tmp_path / 'bucket'}"
    a, b = Machine(tmp_path, "a", {}), Machine(tmp_path, "b", {})
    run = RunMetadata(workflow_run_id=f"object-{uuid.uuid4().hex[:8]}")
    with a.active():
        first = await a.echo_turn("one", run=run, store=store)
    assert first.session is not None
    assert first.session.store_key is not None
    a.leave()
    with b.active():
        second = await b.echo_turn("two", run=run, resume=first.session, store=store)
    assert "(turn 2)" in second.text


@pytest.mark.anyio
async def test_the_factory_configuration_picks_the_store(
    tmp_path: Path, postgres_dsn: str, pg_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No session_store= argument: each machine's pyproject.toml (beside its checkout) names
    the Postgres table, the DSN comes from the variable it names."""
    from jigs_harness_echo import EchoDescriptor

    monkeypatch.delenv("JIGS_SESSION_STORE", raising=False)
    monkeypatch.setenv("TEST_STORE_DSN", postgres_dsn)
    a, b = Machine(tmp_path, "a", {}), Machine(tmp_path, "b", {})
    for machine in (a, b):
        (machine.root / "pyproject.toml").write_text(
            "[tool.jigs.session_store]\n"
            f'type = "postgres"\ndsn_env = "TEST_STORE_DSN"\ntable = "{pg_table}"\n'
        )
    run = RunMetadata(workflow_run_id=f"configured-{uuid.uuid4().hex[:8]}")
    with a.active():
        first = await run_agent(harness=EchoDescriptor(), cwd=a.worktree, prompt="one", run=run)
    assert first.session is not None
    assert first.session.store_key is not None
    a.leave()
    with b.active():
        second = await run_agent(
            harness=EchoDescriptor(), cwd=b.worktree, prompt="two", run=run, resume=first.session
        )
    assert "(turn 2)" in second.text
    rows = _sql(postgres_dsn, f"SELECT count(*) FROM {pg_table}")
    assert rows[0][0] >= 3  # two manifests and at least one artifact
