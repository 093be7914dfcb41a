"""The core's deadlines and limits around the real Claude Code CLI: a hung model endpoint ends at
``idle_timeout``; ``max_turns`` and ``max_budget_usd`` (enforced by Claude Code itself) stop a turn
with an error that keeps the session (``agent_session`` continues it), usage and cost."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from claude_helpers import AGENTS_ENV, descriptor_for
from jigs import RunMetadata
from jigs.errors import AgentLimitError, AgentTimeoutError
from jigs.events import AgentEvent, ModelCallStarted, UsageUpdated
from jigs.processes import live_groups
from jigs.steps import agent_session, create_agent_runner, run_agent
from jigs_testing import ModelServer, text, tool_call

pytestmark = pytest.mark.anyio


def _loop(count: int) -> list[object]:
    """A scripted model that keeps calling Bash."""
    return [
        tool_call("Bash", {"command": f"echo LOOP-{i}", "description": f"loop {i}"})
        for i in range(count)
    ]


async def test_hung_model_endpoint_ends_at_idle_timeout(
    claude_cli: Path, server: ModelServer, worktree: Path, run_meta: RunMetadata
) -> None:
    server.add(text("far too late", delay=60))
    started = time.monotonic()
    with pytest.raises(AgentTimeoutError) as caught:
        await run_agent(
            harness=descriptor_for(server, idle_timeout=2, max_retries=0),
            cwd=worktree,
            prompt="answer slowly",
            run=run_meta,
            agents_env=AGENTS_ENV,
        )
    assert time.monotonic() - started < 2 + 5
    error = caught.value
    assert error.limit == "idle_timeout"
    assert error.retryable
    assert "idle_timeout" in str(error)
    assert error.session_id, "the session Claude Code reported before hanging is kept"
    assert len(server.model_requests) == 1, "the CLI never reached the model"
    assert live_groups() == {}
    # the worktree lock is released: another step opens at once
    async with create_agent_runner(
        descriptor_for(server), cwd=worktree, run=run_meta, agents_env=AGENTS_ENV
    ):
        pass


async def test_max_turns_stops_the_turn_and_the_session_continues(
    claude_cli: Path, server: ModelServer, worktree: Path, run_meta: RunMetadata
) -> None:
    server.add(*_loop(2))
    descriptor = descriptor_for(server, max_turns=2)
    events: list[AgentEvent] = []
    with pytest.raises(AgentLimitError) as caught:
        await run_agent(
            harness=descriptor,
            cwd=worktree,
            prompt="LIMIT-FIRST-PROMPT loop forever",
            run=run_meta,
            agents_env=AGENTS_ENV,
            on_event=events.append,
        )
    error = caught.value
    assert error.limit == "max_turns"
    assert error.value == 2
    assert error.reason == "max_turns"
    assert not error.retryable
    assert "max_turns" in str(error)
    assert sum(isinstance(e, ModelCallStarted) for e in events) == 2
    assert len(server.model_requests) == 2
    # usage and cost of the stopped turn
    assert error.usage is not None
    assert error.usage.output_tokens
    assert error.cost_usd is not None
    assert error.cost_usd > 0
    assert [e for e in events if isinstance(e, UsageUpdated)][-1].usage == error.usage
    assert live_groups() == {}
    # the error's session resumes: the model sees the earlier history
    assert error.session is not None
    server.add(text("CONTINUED"))
    result = await agent_session(
        harness=descriptor,
        cwd=worktree,
        run=run_meta,
        session=error.session,
        resume_prompt="RESUME-PROMPT go on",
        fresh_prompt="FRESH-PROMPT",
        agents_env=AGENTS_ENV,
    )
    assert result.text == "CONTINUED"
    assert result.session is not None
    assert result.session.id != error.session_id  # resuming forks: a new id, same history
    history = server.model_requests[-1].text()
    assert "LIMIT-FIRST-PROMPT" in history
    assert "LOOP-1" in history
    assert "RESUME-PROMPT" in history
    assert "FRESH-PROMPT" not in history
    assert result.usage.cost_usd is not None


async def test_max_budget_usd_stops_the_turn_with_its_cost(
    claude_cli: Path, server: ModelServer, worktree: Path, run_meta: RunMetadata
) -> None:
    server.add(*_loop(4), text("never reached"))
    with pytest.raises(AgentLimitError) as caught:
        await run_agent(
            harness=descriptor_for(server, model="claude-sonnet-4-5", max_budget_usd=0.000001),
            cwd=worktree,
            prompt="spend",
            run=run_meta,
            agents_env=AGENTS_ENV,
        )
    error = caught.value
    assert error.limit == "max_budget_usd"
    assert error.cost_usd is not None
    assert error.cost_usd > 0.000001
    assert error.session is not None
    assert len(server.model_requests) < 5
    assert live_groups() == {}
