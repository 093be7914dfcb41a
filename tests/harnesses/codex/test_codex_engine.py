"""The core's turn engine over the real Codex app server: deadlines, max_turns, usage."""

from __future__ import annotations

import time

import pytest
from jigs._lock import worktree_locked
from jigs.errors import AgentLimitError, AgentTimeoutError
from jigs.events import ModelCallStarted, UsageUpdated
from jigs.processes import live_groups
from jigs.steps import agent_session, run_agent
from jigs_testing import text, tool_call

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli("codex")]


def _nothing_left() -> None:
    assert live_groups() == {}


async def test_a_hung_model_endpoint_ends_in_the_idle_timeout(
    model_server, descriptor, worktree, run_meta
):
    model_server.add(text("too late", delay=60))
    started = time.perf_counter()
    with pytest.raises(AgentTimeoutError) as info:
        await run_agent(
            harness=descriptor(idle_timeout=3),
            cwd=worktree,
            prompt="hello",
            run=run_meta,
            agents_env=[],
        )
    elapsed = time.perf_counter() - started
    assert elapsed < 3 + 5, f"took {elapsed:.1f}s"
    assert info.value.limit == "idle_timeout"
    assert info.value.retryable
    assert info.value.session_id  # the thread, so the step can be continued
    assert not worktree_locked(worktree)
    _nothing_left()
    assert len(model_server.model_requests) == 1


async def test_a_hung_cli_ends_in_the_idle_timeout(worktree, run_meta, tmp_path, monkeypatch):
    from codex_helpers import KEY_ENV, KEY_VALUE
    from jigs import harnesses

    fake = tmp_path / "silent-codex"
    # answers the installation check's --version, then prints nothing and sleeps
    fake.write_text(
        '#!/bin/sh\nif [ "$1" = "--version" ]; then echo codex-cli 0.163.0; exit 0; fi\n'
        "exec sleep 300\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("JIGS_CODEX_EXECUTABLE", str(fake))
    monkeypatch.setenv(KEY_ENV, KEY_VALUE)
    harness = harnesses.codex(
        model="m", base_url="http://127.0.0.1:9/v1", api_key_env=KEY_ENV, idle_timeout=2
    )
    started = time.perf_counter()
    with pytest.raises(AgentTimeoutError) as info:
        await run_agent(harness=harness, cwd=worktree, prompt="hi", run=run_meta, agents_env=[])
    assert time.perf_counter() - started < 2 + 5
    assert info.value.limit == "idle_timeout"
    assert not worktree_locked(worktree)
    _nothing_left()


async def test_max_turns_stops_a_tool_loop_and_the_session_resumes(
    model_server, descriptor, worktree, run_meta
):
    model_server.add(
        tool_call("exec_command", {"cmd": "echo first-tool-ran"}),
        tool_call("exec_command", {"cmd": "echo second"}),
        text("resumed answer"),  # for the resumed turn
    )
    harness = descriptor(max_turns=1)
    events: list[object] = []
    with pytest.raises(AgentLimitError) as info:
        await run_agent(
            harness=harness,
            cwd=worktree,
            prompt="LOOP-PROMPT-5e1",
            run=run_meta,
            agents_env=[],
            on_event=events.append,
        )
    error = info.value
    assert error.limit == "max_turns"
    assert error.session is not None
    assert [type(e) for e in events].count(ModelCallStarted) == 2
    # the first response's usage arrived before the stop
    assert error.usage is not None
    assert error.usage.input_tokens
    assert error.usage.cost_usd is None  # Codex reports no cost
    assert len(model_server.model_requests) == 2  # stopped at the second request
    assert not worktree_locked(worktree)

    result = await agent_session(
        harness=harness,
        cwd=worktree,
        run=run_meta,
        session=error.session,
        resume_prompt="CONTINUE-PROMPT-8a0",
        fresh_prompt="FRESH-PROMPT-never",
        agents_env=[],
    )
    assert result.text == "resumed answer"
    assert result.session is not None
    assert result.session.id != error.session_id  # resuming forks: a new id, same history
    carried = model_server.model_requests[-1].text()
    assert "LOOP-PROMPT-5e1" in carried  # the model sees the earlier history
    assert "first-tool-ran" in carried
    assert "CONTINUE-PROMPT-8a0" in carried
    assert "FRESH-PROMPT-never" not in carried


async def test_usage_on_success_is_the_sum_of_the_turns_responses(
    model_server, descriptor, worktree, run_meta
):
    model_server.add(tool_call("exec_command", {"cmd": "true"}), text("done"))
    events: list[object] = []
    result = await run_agent(
        harness=descriptor(max_turns=2),
        cwd=worktree,
        prompt="go",
        run=run_meta,
        agents_env=[],
        on_event=events.append,
    )
    assert result.text == "done"
    updates = [e.usage for e in events if isinstance(e, UsageUpdated)]
    assert len(updates) == 2
    assert updates[1].input_tokens > updates[0].input_tokens  # cumulative over the turn
    assert result.usage == updates[-1]
    assert result.usage.output_tokens
    assert result.usage.cost_usd is None
    assert [type(e) for e in events].count(ModelCallStarted) == 2
