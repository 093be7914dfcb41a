"""Approvals that wait in DBOS, with the real Codex CLI against the scripted model server: a
turn defers a shell command, the worker is SIGKILLed while the workflow waits in ``recv``,
the decision is sent while no worker runs, and another worker resumes the session with it.

Workers are separate processes running ``examples/dbos_workflow.py --gated``; the test is the
model server and the client.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from jigs.steps import Allow, PendingApproval

from .conftest import EXAMPLES, RealCli, Worker, assert_decided, wait_no_processes_in

EXAMPLE = str(EXAMPLES / "dbos_workflow.py")
COMMAND = "echo ran >> approved.marker"  # appends: a second run would show as a second line


def _pending(db: str, workflow_id: str, worker: Worker) -> PendingApproval:
    """What the workflow publishes while it waits for a human (read as a client would)."""
    from dbos import DBOSClient
    from jigs_dbos import APPROVAL_TOPIC, JigsSerializer

    client = DBOSClient(system_database_url=db, serializer=JigsSerializer())
    try:
        pending = client.get_event(workflow_id, APPROVAL_TOPIC, timeout_seconds=180)
    finally:
        client.destroy()
    assert isinstance(pending, PendingApproval), worker.log.read_text()[-3000:]
    return pending


def _example(env: dict[str, str], *argv: str) -> None:
    """Run the example once as a client (``--decide``, ``--answer``) while no worker runs."""
    done = subprocess.run(
        [sys.executable, EXAMPLE, *argv],
        check=False, capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


def _recover(db: str, workflow_id: str, env: dict[str, str], tmp_path: Path) -> Any:
    """A second worker recovers the workflow; its texts once it finished."""
    second = Worker([EXAMPLE, "--db", db, "--recover", workflow_id], env, tmp_path / "w2.log")
    try:
        return second.wait_line("texts", 180)["texts"]
    finally:
        second.stop()


@pytest.mark.real_cli("codex")
@pytest.mark.parametrize(
    ("database", "allow"),
    [("sqlite", True), ("sqlite", False), ("postgres", True)],
    ids=["sqlite-approved", "sqlite-denied", "postgres-approved"],
)
def test_a_deferred_command_waits_in_dbos_across_a_killed_worker(
    database: str, allow: bool, require_cli: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from dbos import DBOSClient
    from jigs_dbos import APPROVAL_TOPIC, JigsSerializer
    from jigs_testing import ModelServer

    require_cli("codex")
    db = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    if database == "postgres":
        db = request.getfixturevalue("postgres_url")
    workflow_id = f"gated-{uuid.uuid4().hex[:10]}"
    env = dict(os.environ)
    # a fresh executor: a recovering worker on the shared Postgres picks up only this workflow
    env.update(
        JIGS_DATA_DIR=str(tmp_path / "jigs-data"),
        JIGS_EXAMPLE_EXECUTOR=workflow_id,
        JIGS_EXAMPLE_LOG_LEVEL="WARNING",
    )
    with ModelServer.run_in_thread() as server:
        cli = RealCli("codex", server, tmp_path)
        env.update(cli.env)
        tree = cli.worktree(tmp_path / "wt")
        marker = tree / "approved.marker"
        prompt = cli.plan.run_command(server, COMMAND)
        argv = ["--db", db, "--harness", cli.harness_json, "--worktree", str(tree)]
        first = Worker(
            [EXAMPLE, *argv, "--gated", "--first", prompt, "--id", workflow_id],
            env,
            tmp_path / "w1.log",
        )
        try:
            first.wait_line("workflow_id", 90)  # the worker made the system database
            pending = _pending(db, workflow_id, first)
            assert len(pending.calls) == 1
            assert "approved.marker" in json.dumps(pending.calls[0].arguments), pending.calls
            assert not marker.exists()  # deferred: it did not run
            first.kill()  # the workflow waits in recv, in the database, not in the worker
            wait_no_processes_in(tree, 2.0)
        finally:
            first.stop()
        server.script.skip_remaining()
        # the scripted model makes the identical call again, approved or not: a refused one
        # must not run even when the agent insists
        cli.plan.run_command(server, COMMAND)
        seen = len(server.model_requests)
        client = DBOSClient(system_database_url=db, serializer=JigsSerializer())
        try:  # a decision for no pending call is dropped: the workflow waits on
            client.send(workflow_id, {"not-a-call": Allow()}, APPROVAL_TOPIC)
        finally:
            client.destroy()
        verdict = ["--allow"] if allow else ["--deny", "no writes today"]
        _example(env, "--db", db, "--decide", workflow_id, *verdict)
        assert not marker.exists()  # nothing ran while no worker was alive
        texts = _recover(db, workflow_id, env, tmp_path)
        asked = "\n".join(r.text() for r in server.model_requests[seen:])
    assert_decided(texts, tree, marker, asked, allow=allow)


QUESTION = "Which database should the migration target?"


@pytest.mark.real_cli("codex")
def test_a_question_waits_in_dbos_across_a_killed_worker_and_its_answer_resumes_it(
    require_cli: Any, tmp_path: Path
) -> None:
    """``ask_human``: the agent's question waits in the workflow; the worker is SIGKILLed, the
    answer is sent while none runs, and the recovering worker resumes the session with it."""
    from jigs_testing import ModelServer, text, tool_call

    require_cli("codex")
    db = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    workflow_id = f"asking-{uuid.uuid4().hex[:10]}"
    env = dict(os.environ, JIGS_DATA_DIR=str(tmp_path / "jigs-data"))
    env.update(JIGS_EXAMPLE_EXECUTOR=workflow_id, JIGS_EXAMPLE_LOG_LEVEL="WARNING")
    with ModelServer.run_in_thread() as server:
        cli = RealCli("codex", server, tmp_path)
        env.update(cli.env)
        tree = cli.worktree(tmp_path / "wt")
        server.add(tool_call("mcp__tools__ask_human", {"question": QUESTION}), text("waiting"))
        argv = ["--db", db, "--harness", cli.harness_json, "--worktree", str(tree)]
        first = Worker(
            [EXAMPLE, *argv, "--ask", "--first", "plan the migration", "--id", workflow_id],
            env,
            tmp_path / "w1.log",
        )
        try:
            first.wait_line("workflow_id", 90)
            pending = _pending(db, workflow_id, first)
            assert [q.question for q in pending.questions] == [QUESTION]
            first.kill()
            wait_no_processes_in(tree, 2.0)
        finally:
            first.stop()
        server.script.skip_remaining()
        server.add(text("Migrating to postgres."))
        seen = len(server.model_requests)
        _example(env, "--db", db, "--answer", workflow_id, "postgres-17")
        texts = _recover(db, workflow_id, env, tmp_path)
        asked = "\n".join(r.text() for r in server.model_requests[seen:])
    assert texts == ["Migrating to postgres."]
    assert "postgres-17" in asked
    assert QUESTION in asked
