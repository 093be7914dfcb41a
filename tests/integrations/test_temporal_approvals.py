"""Approvals that wait in Temporal, with the real Codex CLI against the scripted model server: a
turn defers a shell command, the worker is SIGKILLed while the workflow waits, another worker
takes the decision (an update; its validator refuses a wrong call id) and resumes the session.

Workers are separate processes running ``examples/temporal_workflow.py``; the test is the
model server and the client.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from .conftest import RealCli, assert_decided, wait_no_processes_in
from .test_temporal import EXAMPLE, Engine

pytestmark = pytest.mark.anyio
COMMAND = "echo ran >> approved.marker"  # appends: a second run would show as a second line


async def _pending(handle: Any, timeout: float) -> dict[str, Any]:
    from jigs_temporal import APPROVAL_QUERY

    deadline = time.monotonic() + timeout
    while True:
        found: dict[str, Any] | None = await handle.query(APPROVAL_QUERY)
        if found:
            return found
        assert time.monotonic() < deadline, "the turn never deferred"
        await asyncio.sleep(0.1)


async def _example(*argv: str) -> None:
    """Run the example once as a client (``--decide``, ``--answer``)."""
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, EXAMPLE, *argv],
        check=False, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.real_cli("codex")
@pytest.mark.parametrize("allow", [True, False], ids=["approved", "denied"])
async def test_a_deferred_command_waits_in_temporal_across_a_killed_worker(
    allow: bool, require_cli: Any, temporal_address: str, tmp_path: Path
) -> None:
    from jigs.steps import Allow
    from jigs_temporal import APPROVAL_UPDATE
    from jigs_testing import ModelServer
    from temporalio.client import Client, WorkflowUpdateFailedError
    from temporalio.contrib.pydantic import pydantic_data_converter

    require_cli("codex")
    with ModelServer.run_in_thread() as server:
        cli = RealCli("codex", server, tmp_path)
        engine = Engine(temporal_address, tmp_path, workers=1, env=cli.env)
        try:
            tree = cli.worktree(tmp_path / "wt")
            marker = tree / "approved.marker"
            client = await Client.connect(temporal_address, data_converter=pydantic_data_converter)
            handle = await client.start_workflow(
                "Gated",
                args=[cli.descriptor, str(tree), cli.plan.run_command(server, COMMAND)],
                id=f"gated-{uuid.uuid4().hex[:10]}",
                task_queue=engine.queue,
                result_type=list[str],
            )
            pending = await _pending(handle, 180)
            assert len(pending["calls"]) == 1
            assert "approved.marker" in json.dumps(pending["calls"][0]["arguments"])
            assert not marker.exists()  # deferred: it did not run
            engine.workers[0].kill()  # the workflow waits in its history, not in the worker
            await asyncio.to_thread(wait_no_processes_in, tree, 2.0)
            server.script.skip_remaining()
            # the scripted model makes the identical call again, approved or not: a refused
            # one must not run even when the agent insists
            cli.plan.run_command(server, COMMAND)
            seen = len(server.model_requests)
            engine.workers.append(engine.worker(tmp_path / "worker-2.log"))
            await asyncio.to_thread(engine.workers[-1].wait_line, "serving", 90)
            with pytest.raises(WorkflowUpdateFailedError):  # the validator: no such call
                await handle.execute_update(APPROVAL_UPDATE, {"not-a-call": Allow()})
            verdict = ["--allow"] if allow else ["--deny", "no writes today"]
            await _example("--address", temporal_address, "--decide", handle.id, *verdict)
            texts = await asyncio.wait_for(handle.result(), 180)
            asked = "\n".join(r.text() for r in server.model_requests[seen:])
        finally:
            engine.close()
    assert_decided(texts, tree, marker, asked, allow=allow)


def _approval_pending() -> Any:
    from jigs.errors import ApprovalPending
    from jigs.steps import GatedCall, PendingApproval

    call = GatedCall(kind="codex", tool="exec_command", category="shell", arguments={"cmd": "ls"})
    pending = PendingApproval(session=None, calls=(call.model_copy(update={"call_id": "c1"}),))
    return ApprovalPending("deferred", kind="codex", pending=pending)


def test_the_pending_calls_travel_in_the_application_error() -> None:
    """An activity's ApprovalPending leaves as a non-retryable ApplicationError whose details
    carry the pending calls as JSON; pending_of rebuilds them, and nothing from other errors."""
    from jigs.errors import AgentTurnError
    from jigs_temporal import application_error, pending_of
    from temporalio.exceptions import ActivityError, RetryState

    error = _approval_pending()
    mapped = application_error(error)
    assert mapped.non_retryable  # type: ignore[attr-defined]
    json.dumps(mapped.details)  # type: ignore[attr-defined]
    wrapped = ActivityError(
        "activity failed", scheduled_event_id=1, started_event_id=2, identity="w",
        activity_type="gated_turn", activity_id="1", retry_state=RetryState.NON_RETRYABLE_FAILURE,
    )  # fmt: skip
    wrapped.__cause__ = mapped
    assert pending_of(wrapped) == error.pending
    assert pending_of(mapped) == error.pending
    assert pending_of(application_error(AgentTurnError("no", kind="codex"))) is None
    assert pending_of(RuntimeError("x")) is None


QUESTION = "Which database should the migration target?"


@pytest.mark.real_cli("codex")
async def test_a_question_waits_in_temporal_across_a_killed_worker_and_its_answer_resumes_it(
    require_cli: Any, temporal_address: str, tmp_path: Path
) -> None:
    """``ask_human``: the agent's question waits in the workflow's history; the worker is
    SIGKILLed, another takes the answer (an update; an approval of a question is refused) and
    resumes the session with it."""
    from jigs.steps import Allow
    from jigs_temporal import APPROVAL_UPDATE
    from jigs_testing import ModelServer, text, tool_call
    from temporalio.client import Client, WorkflowUpdateFailedError
    from temporalio.contrib.pydantic import pydantic_data_converter

    require_cli("codex")
    with ModelServer.run_in_thread() as server:
        cli = RealCli("codex", server, tmp_path)
        engine = Engine(temporal_address, tmp_path, workers=1, env=cli.env)
        try:
            tree = cli.worktree(tmp_path / "wt")
            server.add(tool_call("mcp__tools__ask_human", {"question": QUESTION}), text("waiting"))
            client = await Client.connect(temporal_address, data_converter=pydantic_data_converter)
            handle = await client.start_workflow(
                "Asking",
                args=[cli.descriptor, str(tree), "plan the migration"],
                id=f"asking-{uuid.uuid4().hex[:10]}",
                task_queue=engine.queue,
                result_type=list[str],
            )
            pending = await _pending(handle, 180)
            assert [c["arguments"]["question"] for c in pending["calls"]] == [QUESTION]
            engine.workers[0].kill()
            await asyncio.to_thread(wait_no_processes_in, tree, 2.0)
            server.script.skip_remaining()
            server.add(text("Migrating to postgres."))
            seen = len(server.model_requests)
            engine.workers.append(engine.worker(tmp_path / "worker-2.log"))
            await asyncio.to_thread(engine.workers[-1].wait_line, "serving", 90)
            call_id = pending["calls"][0]["call_id"]
            with pytest.raises(WorkflowUpdateFailedError):  # a question is answered, not allowed
                await handle.execute_update(APPROVAL_UPDATE, {call_id: Allow()})
            await _example("--address", temporal_address, "--answer", handle.id, "postgres-17")
            texts = await asyncio.wait_for(handle.result(), 180)
            asked = "\n".join(r.text() for r in server.model_requests[seen:])
        finally:
            engine.close()
    assert texts == ["Migrating to postgres."]
    assert "postgres-17" in asked
    assert QUESTION in asked
