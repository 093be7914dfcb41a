"""A step's pipeline end to end, through the echo kind (a real entry point, a real child): its
stages in order, checks, resume, structured output, cancellation and a bounded close. The
environment it builds is tested in test_env, the worktree lock in test_worktree_lock, the turn
engine's faults in test_turn_faults."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Literal

import anyio
import jigs.registry._registry
import pytest
from jigs import AgentSessionRef, harnesses
from jigs.descriptors import HarnessDescriptor
from jigs.errors import (
    AgentSessionError,
    JitCheckError,
    ModelNotAvailableError,
)
from jigs.models import ToolCallPart, generate_text, stream_text
from jigs.plugin import Harness
from jigs.policy import _secrets
from jigs.policy._lock import worktree_locked
from jigs.processes import live_groups
from jigs.registry._registry import Registry
from jigs.sandbox._proctree import processes_under
from jigs.steps import agent_session, create_agent_runner, run_agent
from structlog.testing import capture_logs

pytestmark = pytest.mark.anyio


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


async def test_stages_run_in_order_and_each_logs_run_id_kind_and_duration(worktree, run_meta):
    with capture_logs() as logs:
        async with create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta) as runner:
            await generate_text(runner.model, prompt="hi")
    events = [e["event"] for e in logs if e["event"].startswith("runner.")]
    assert events == [
        "runner.resolve",
        "runner.env.built",
        "runner.lock.acquired",
        "runner.checks.descriptor",
        "runner.checks.jit",
        "runner.engine.opened",
        "runner.opened",
        "runner.lock.released",
        "runner.closed",
    ]
    for event in logs:
        if event["event"].startswith("runner.") and event["event"] != "runner.resolve":
            assert event["run_id"] == run_meta.workflow_run_id
            assert event["kind"] == "echo"
    timed = [e for e in logs if e["event"] in {"runner.env.built", "runner.lock.acquired"}]
    assert all(isinstance(e["seconds"], float) for e in timed)


async def test_a_steps_secrets_are_redacted_everywhere_while_it_runs_and_dropped_at_close(
    worktree, run_meta, monkeypatch
):
    """Each step keeps its secret values in a registry of its own: while it runs they are
    redacted in every task (here one started before the step, outside its context), and its
    close drops them, so a worker's registry, which every log event's redaction scans, does not
    grow with the steps it ran (it grew by two values a step: a proxy's URL and token)."""
    secret = f"deploy-words-{os.urandom(8).hex()}"
    monkeypatch.setenv("JIGS_TEST_DEPLOY_WORDS", secret)
    before = _secrets._process.values()
    seen: list[str] = []
    asked, answered = anyio.Event(), anyio.Event()

    async def elsewhere() -> None:
        await asked.wait()
        seen.append(_secrets.redact_known(f"said {secret}"))
        answered.set()

    async with anyio.create_task_group() as group:
        group.start_soon(elsewhere)
        async with create_agent_runner(
            harnesses.echo(), cwd=worktree, run=run_meta, agents_env=["JIGS_TEST_DEPLOY_WORDS"]
        ) as runner:
            asked.set()
            await answered.wait()
            await generate_text(runner.model, prompt="hi")
    result = await run_agent(
        harness=harnesses.echo(),
        cwd=worktree,
        prompt="hi",
        run=run_meta,
        agents_env=["JIGS_TEST_DEPLOY_WORDS"],
    )
    assert result.text.startswith("echo: hi")
    assert seen == ["said [redacted]"]
    assert _secrets._process.values() == before
    assert _secrets.redact_known(secret) == secret  # no longer any open step's
    assert _secrets._open_scopes == []


async def test_generate_text_returns_text_warnings_and_session(worktree, run_meta):
    async with create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta) as runner:
        result = await generate_text(runner.model, prompt="hello there", temperature=0)
        session = runner.session_from(result)
    assert result.text == "echo: hello there (turn 1)"
    assert [w.setting for w in result.warnings] == ["temperature"]
    assert session is not None
    assert session.harness == "echo"
    assert session.descriptor == '{"kind":"echo"}'


async def test_a_failed_jit_check_raises_before_any_process_and_releases_the_lock(
    worktree, run_meta
):
    (worktree / ".echo-deny").write_text("not today")
    with capture_logs() as logs, pytest.raises(JitCheckError) as info:
        await create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta)
    assert str(info.value).startswith("Echo worktree: ")
    assert "not today" in str(info.value)
    assert info.value.failures[0].repair.startswith("remove ")
    events = [e["event"] for e in logs]
    # the lock is taken once, before the checks (exactly one winner in a race), and released
    assert events.index("runner.lock.acquired") < events.index("runner.checks.jit")
    assert "runner.lock.released" in events
    assert "runner.engine.opened" not in events
    assert not worktree_locked(worktree)


async def test_cancelling_a_step_stops_the_whole_process_group_within_2s(
    worktree, run_meta, tmp_path
):
    pidfile = worktree / "pid"  # the sandbox shows the agent its worktree, not tmp_path
    parts: list[object] = []
    with anyio.move_on_after(30) as outer:
        async with create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta) as runner:
            with anyio.CancelScope() as scope:

                async def cancel_when_started() -> None:
                    while not pidfile.exists():
                        await anyio.sleep(0.02)
                    await anyio.sleep(0.2)
                    scope.cancel()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(cancel_when_started)
                    stream = stream_text(runner.model, prompt=f"pidfile:{pidfile} child sleep:60")
                    async for part in stream:
                        parts.append(part)
            started = time.perf_counter()
    assert not outer.cancelled_caught
    assert pidfile.read_text()
    # the agent runs in a PID namespace: its own pid means nothing here; its cwd does
    deadline = time.perf_counter() + 2
    while processes_under(worktree) and time.perf_counter() < deadline:
        await anyio.sleep(0.05)
    assert not processes_under(worktree)
    assert time.perf_counter() - started < 2
    assert not live_groups()
    assert not worktree_locked(worktree)


async def test_close_is_idempotent_and_the_awaitable_form_works(worktree, run_meta):
    runner = await create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta)
    try:
        await generate_text(runner.model, prompt="x")
    finally:
        await runner.close()
    await runner.close()
    assert runner.closed
    assert not worktree_locked(worktree)
    assert not live_groups()


async def test_resume_carries_the_session_and_a_stale_one_raises_before_any_process(
    worktree, run_meta
):
    async with create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta) as runner:
        first = await generate_text(runner.model, prompt="one")
        session = runner.session_from(first)
    assert session is not None
    async with create_agent_runner(
        harnesses.echo(), cwd=worktree, run=run_meta, resume=session
    ) as runner:
        second = await generate_text(runner.model, prompt="two")
    assert second.text == "echo: two (turn 2)"

    stale = AgentSessionRef(harness="echo", id="no-such-session", descriptor='{"kind":"echo"}')
    with capture_logs() as logs, pytest.raises(AgentSessionError) as info:
        await create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta, resume=stale)
    assert info.value.session_id == "no-such-session"
    assert not [e for e in logs if e["event"] == "process.launched"]
    assert not worktree_locked(worktree)


async def test_resume_recorded_on_another_kind_is_refused(worktree, run_meta):
    other = AgentSessionRef(harness="claude", id="abc", descriptor="{}")
    with pytest.raises(AgentSessionError, match="recorded on the claude harness"):
        await create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta, resume=other)


async def test_tool_calls_stream_and_change_the_worktree(worktree, run_meta):
    async with create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta) as runner:
        stream = stream_text(runner.model, prompt="write:made.txt:content")
        calls = [p.call for p in [p async for p in stream] if isinstance(p, ToolCallPart)]
    assert calls[0].name == "write"
    assert (worktree / "made.txt").read_text() == "content"


class NoModelDescriptor(HarnessDescriptor):
    kind: Literal["nomodel"] = "nomodel"


class NoModelHarness(Harness[NoModelDescriptor]):
    kind = "nomodel"
    contract = "2.0"
    display_name = "No model"
    descriptor_type = NoModelDescriptor
    has_model = False

    def resolve_executable(self, env):
        raise NotImplementedError

    def launch_turn(self, turn, ctx, state):
        raise NotImplementedError

    def decoder(self, turn):
        raise NotImplementedError


async def test_a_kind_without_a_model_is_refused_before_anything_is_acquired(
    worktree, run_meta, monkeypatch
):
    registry = Registry()
    registry.register(NoModelHarness())
    monkeypatch.setattr(jigs.registry._registry, "_default", [registry])
    with capture_logs() as logs, pytest.raises(ModelNotAvailableError) as info:
        await create_agent_runner({"kind": "nomodel"}, cwd=worktree, run=run_meta)
    assert isinstance(info.value, NotImplementedError)
    assert "run_agent" in str(info.value)
    assert [e["event"] for e in logs] == ["runner.resolve"]
    assert not worktree_locked(worktree)


async def test_run_agent_runs_a_whole_turn_with_structured_output(worktree, run_meta):
    from pydantic import BaseModel

    class Answer(BaseModel):
        answer: int

    result = await run_agent(
        harness=harnesses.echo(prefix=""), cwd=worktree, prompt="x", run=run_meta
    )
    assert result.text == "echo: x (turn 1)"
    assert result.session is not None
    from jigs.errors import StructuredOutputError

    good = await run_agent(
        harness=harnesses.echo(),
        cwd=worktree,
        prompt='json:{"answer":%2042}',
        run=run_meta,
        output=Answer,
    )
    assert good.output == Answer(answer=42)
    with capture_logs() as logs:
        fixed = await run_agent(
            harness=harnesses.echo(),
            cwd=worktree,
            prompt='jsonlater:{"answer":7}',
            run=run_meta,
            output=Answer,
        )
    assert fixed.output == Answer(answer=7)
    # asked again in the same step: one lock, two turns, the second resuming the first
    assert [e["event"] for e in logs].count("runner.lock.acquired") == 1
    assert [e["resumed"] for e in logs if e["event"] == "turn.started"] == [False, True]
    with pytest.raises(StructuredOutputError, match="not JSON for Answer"):
        await run_agent(
            harness=harnesses.echo(), cwd=worktree, prompt="x", run=run_meta, output=Answer
        )
    assert not worktree_locked(worktree)


async def test_agent_session_resumes_when_the_descriptor_matches_else_starts_fresh(
    worktree, run_meta
):
    first = await run_agent(harness=harnesses.echo(), cwd=worktree, prompt="one", run=run_meta)
    again = await agent_session(
        harness=harnesses.echo(),
        cwd=worktree,
        run=run_meta,
        session=first.session,
        resume_prompt="more",
        fresh_prompt="fresh",
    )
    assert again.text == "echo: more (turn 2)"
    changed = await agent_session(
        harness=harnesses.echo(prefix="v2 "),
        cwd=worktree,
        run=run_meta,
        session=first.session,
        resume_prompt="more",
        fresh_prompt="fresh",
    )
    assert changed.text == "v2 echo: fresh (turn 1)"
    stale = AgentSessionRef(harness="echo", id="gone", descriptor='{"kind":"echo"}')
    with capture_logs() as logs:
        recovered = await agent_session(
            harness=harnesses.echo(),
            cwd=worktree,
            run=run_meta,
            session=stale,
            resume_prompt="more",
            fresh_prompt="fresh",
        )
    assert recovered.text == "echo: fresh (turn 1)"
    assert any(e["event"] == "agent_session.fresh" and "gone" in e["reason"] for e in logs)


async def test_a_closed_runner_refuses_to_start_the_agent_again(worktree, run_meta):
    from jigs.errors import RunnerClosedError

    runner = await create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta)
    model = runner.model
    await runner.close()
    with pytest.raises(RunnerClosedError, match="open a new one with create_agent_runner"):
        runner.model  # noqa: B018
    with pytest.raises(RunnerClosedError):
        await generate_text(model, prompt="after close")
    assert not live_groups()


async def test_cleanup_that_hangs_is_bounded_and_the_lock_still_released(
    worktree, run_meta, monkeypatch
):
    import jigs.engine._pipeline

    monkeypatch.setattr(jigs.engine._pipeline, "CLOSE_TIMEOUT", 0.5)
    runner = await create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta)

    async def hang() -> None:
        await anyio.sleep(60)

    runner._step.stack.push_async_callback(hang)
    started = time.perf_counter()
    with anyio.CancelScope() as outer:
        outer.cancel()  # a cancelled caller still gets a bounded, complete close
        await runner.close()
    assert time.perf_counter() - started < 3
    assert not worktree_locked(worktree)


WORKER = textwrap.dedent(
    """
    import sys, anyio
    from jigs import harnesses, RunMetadata
    from jigs.models import generate_text
    from jigs.steps import create_agent_runner

    async def main():
        async with create_agent_runner(
            harnesses.echo(), cwd=sys.argv[1], run=RunMetadata(workflow_run_id="worker")
        ) as runner:
            await generate_text(runner.model, prompt=f"pidfile:{sys.argv[2]} child sleep:60")

    anyio.run(main)
    """
)


def test_sigterm_to_the_worker_stops_its_agents(worktree, tmp_path):
    pidfile = tmp_path / "agent.pid"
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(worktree), str(pidfile)], env=os.environ.copy()
    )
    try:
        deadline = time.monotonic() + 20
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # the grandchild is started
        assert len(processes_under(worktree)) >= 2
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=10) == -signal.SIGTERM
        deadline = time.monotonic() + 2
        while processes_under(worktree) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not processes_under(worktree)
        assert not worktree_locked(worktree)
    finally:
        worker.kill()
        worker.wait()


async def test_a_session_said_complete_is_stored_while_the_close_runs(worktree, run_meta):
    """ctx.sessions_complete() during close stores the session at once (a kind calls it once
    its killed CLI can write nothing more, then waits for it to be gone): stored once, before
    the lock is released; outside close it does nothing."""
    runner = await create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta)
    result = await generate_text(runner.model, prompt="hello")
    ctx = runner._step.ctx
    during: list[list[str]] = []
    with capture_logs() as logs:
        ctx.sessions_complete()  # not closing: nothing happens
        assert [e["event"] for e in logs] == []

        async def a_cli_that_takes_its_time_to_die() -> None:
            ctx.sessions_complete()
            ctx.sessions_complete()  # a second call: nothing more
            for _ in range(300):
                if any(e["event"] == "store.session.saved" for e in logs):
                    break
                await anyio.sleep(0.01)
            during.append([e["event"] for e in logs])

        runner._step.stack.push_async_callback(a_cli_that_takes_its_time_to_die)
        await runner.close()
    events = [e["event"] for e in logs]
    assert "store.session.saved" in during[0]  # stored while the close still waited
    assert events.count("store.session.saved") == 1
    assert events.index("store.session.saved") < events.index("runner.lock.released")
    session = runner.session_from(result)
    assert session is not None
    assert session.store_key is not None
    again = await run_agent(
        harness=harnesses.echo(), cwd=worktree, prompt="again", run=run_meta, resume=session
    )
    assert again.text


async def test_a_cleanup_that_fails_comes_out_of_close_as_itself(worktree, run_meta):
    """An error a kind's cleanup raises leaves close() as that error (not in an exception
    group), after the rest of the close ran: the lock is free."""

    class CleanupFailedError(Exception):
        pass

    runner = await create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta)
    await generate_text(runner.model, prompt="hello")

    def fail() -> None:
        raise CleanupFailedError("cleanup failed")

    runner._step.stack.callback(fail)
    with pytest.raises(CleanupFailedError):
        await runner.close()
    assert not worktree_locked(worktree)
