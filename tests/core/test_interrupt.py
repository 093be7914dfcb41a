"""interrupt() and steer() on a runner, through the echo kind (a CLI without a control
protocol: its turn is stopped, its steer refused). The kit's interrupt and steer checks run the
same on every real CLI (tests/harnesses/test_conformance_kinds.py)."""

import time

import anyio
import pytest
from jigs import harnesses
from jigs.errors import AgentInterrupted, PromptError, SteerRefusedError
from jigs.models import generate_text
from jigs.policy._lock import worktree_locked
from jigs.sandbox._proctree import processes_under
from jigs.steps import create_agent_runner

pytestmark = pytest.mark.anyio


async def test_a_runner_interrupts_its_turn_and_keeps_its_lock(worktree, run_meta):
    pidfile = worktree / "pid"  # the sandbox shows the agent its worktree
    async with create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta) as runner:
        assert await runner.interrupt() is False  # no turn running
        with pytest.raises(SteerRefusedError) as idle:
            await runner.steer("later")
        assert idle.value.reason == "idle"
        caught: list[BaseException] = []

        async def turn() -> None:
            try:
                await generate_text(runner.model, prompt=f"pidfile:{pidfile} child sleep:60")
            except AgentInterrupted as exc:
                caught.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(turn)
            while not pidfile.exists():
                await anyio.sleep(0.02)
            with pytest.raises(SteerRefusedError) as refused:
                await runner.steer("also do this")
            assert refused.value.reason == "unsupported"
            assert "takes no user input" in str(refused.value)
            with pytest.raises(PromptError):
                await runner.steer("")
            asked = time.monotonic()
            assert await runner.interrupt() is True
        took = time.monotonic() - asked
        assert took < 2, f"the interrupted turn took {took:.2f}s to end"
        [error] = caught
        assert isinstance(error, AgentInterrupted)
        assert not error.retryable
        assert error.reason == "interrupted"
        assert error.session is not None
        assert not processes_under(worktree)
        assert worktree_locked(worktree), "a runner keeps its lock until it closes"
        assert not runner.closed
    assert not worktree_locked(worktree)
