"""The real Claude Code CLI against the local model server: turns, tools, resume, streaming."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from claude_helpers import AGENTS_ENV, descriptor_for
from jigs import RunMetadata
from jigs.errors import ToolGateError
from jigs.events import (
    AgentEvent,
    ModelCallStarted,
    SessionStarted,
    TextDelta,
    TurnCompleted,
    UsageUpdated,
)
from jigs.models import (
    FinishPart,
    TextDeltaPart,
    ToolCallPart,
    generate_object,
    generate_text,
    stream_text,
)
from jigs.processes import live_groups
from jigs.steps import (
    Allow,
    Deny,
    GatedCall,
    create_agent_runner,
    run_agent,
)
from jigs_testing import ModelServer, text, tool_call
from pydantic import BaseModel

pytestmark = pytest.mark.anyio


async def test_one_turn_returns_text_usage_and_session(
    claude_cli: Path, server: ModelServer, worktree: Path, run_meta: RunMetadata
) -> None:
    server.add(text("hello from the fake model"))
    events: list[AgentEvent] = []
    async with create_agent_runner(
        descriptor_for(server, model="fake-model"),
        cwd=worktree,
        run=run_meta,
        agents_env=AGENTS_ENV,
    ) as runner:
        result = await generate_text(
            runner.model,
            prompt="say hello",
            temperature=0.3,
            provider_options={"claude": {"on_event": events.append}},
        )
        session = runner.session_from(result)
    assert result.text == "hello from the fake model"
    assert result.finish_reason == "stop"
    assert [w.setting for w in result.warnings] == ["temperature"]
    assert result.usage.output_tokens
    assert result.usage.output_tokens > 0
    assert result.usage.cost_usd is not None
    assert session is not None
    assert session.harness == "claude"
    meta = result.provider_metadata["claude"]
    assert meta["session_id"] == session.id
    assert meta["api_key_source"] == "ANTHROPIC_API_KEY"
    assert meta["model"] == "fake-model"
    assert meta["num_turns"] == 1
    # the event callback saw the turn as typed events: the session first, the result last
    assert events[0] == SessionStarted(session_id=session.id)
    assert [type(e) for e in events[-2:]] == [UsageUpdated, TurnCompleted]
    assert ModelCallStarted() in events
    assert TextDelta(text="hello from the fake model") in events
    assert events[-2].usage == result.usage  # type: ignore[union-attr]
    # the request reached the server with the descriptor's model and the prompt
    [request] = server.model_requests
    assert request.model == "fake-model"
    assert "say hello" in request.text()


async def test_two_turns_with_resume_carry_history(
    claude_cli: Path, server: ModelServer, worktree: Path, run_meta: RunMetadata
) -> None:
    server.add(text("first answer"), text("second answer"))
    descriptor = descriptor_for(server)
    first = await run_agent(
        harness=descriptor,
        cwd=worktree,
        prompt="FIRST-PROMPT-CANARY",
        run=run_meta,
        agents_env=AGENTS_ENV,
    )
    assert first.text == "first answer"
    assert first.session is not None
    second = await run_agent(
        harness=descriptor,
        cwd=worktree,
        prompt="second prompt",
        run=run_meta,
        resume=first.session,
        agents_env=AGENTS_ENV,
    )
    assert second.text == "second answer"
    assert second.session is not None
    assert second.session.id != first.session.id  # resuming forks: a new id, same history
    one, two = server.model_requests
    assert two.message_count > one.message_count
    history = two.text()
    assert "FIRST-PROMPT-CANARY" in history
    assert "first answer" in history
    assert "second prompt" in history


async def test_second_call_on_one_runner_continues_the_session(
    claude_cli: Path, server: ModelServer, worktree: Path, run_meta: RunMetadata
) -> None:
    server.add(text("one"), text("two"))
    async with create_agent_runner(
        descriptor_for(server), cwd=worktree, run=run_meta, agents_env=AGENTS_ENV
    ) as runner:
        a = await generate_text(runner.model, prompt="RUNNER-TURN-ONE")
        b = await generate_text(runner.model, prompt="runner turn two")
        assert runner.session_from(a) == runner.session_from(b)
    assert "RUNNER-TURN-ONE" in server.model_requests[1].text()


async def test_tool_call_writes_a_file_in_the_worktree(
    claude_cli: Path, server: ModelServer, worktree: Path, run_meta: RunMetadata
) -> None:
    target = worktree / "made-by-agent.txt"
    server.add(
        tool_call("Write", {"file_path": str(target), "content": "written by the agent\n"}),
        text("done"),
    )
    async with create_agent_runner(
        descriptor_for(server), cwd=worktree, run=run_meta, agents_env=AGENTS_ENV
    ) as runner:
        parts = [part async for part in stream_text(runner.model, prompt="write the file")]
    assert target.read_text() == "written by the agent\n"
    calls = [p.call for p in parts if isinstance(p, ToolCallPart)]
    assert [c.name for c in calls] == ["Write"]
    assert isinstance(parts[-1], FinishPart)
    assert parts[-1].result.text == "done"
    assert parts[-1].result.tool_results[0].is_error is False
    # streamed text arrives as deltas before the finish part
    assert "".join(p.text for p in parts if isinstance(p, TextDeltaPart)) == "done"


class Verdict(BaseModel):
    name: str
    score: int


async def test_generate_object_uses_the_cli_json_schema(
    claude_cli: Path, server: ModelServer, worktree: Path, run_meta: RunMetadata
) -> None:
    server.add(tool_call("StructuredOutput", {"name": "ok", "score": 7}), text("submitted"))
    async with create_agent_runner(
        descriptor_for(server), cwd=worktree, run=run_meta, agents_env=AGENTS_ENV
    ) as runner:
        answer = await generate_object(runner.model, schema=Verdict, prompt="judge")
    assert answer.object == Verdict(name="ok", score=7)
    first = server.model_requests[0]
    assert "StructuredOutput" in first.tool_names()
    tool = next(t for t in first.body["tools"] if t.get("name") == "StructuredOutput")
    assert json.dumps(tool).count("score") >= 1


async def test_a_denied_call_reaches_the_agent_with_its_reason_and_a_raising_gate_fails_the_turn(
    claude_cli: Path, server: ModelServer, worktree: Path, run_meta: RunMetadata
) -> None:
    target = worktree / "refused.txt"
    server.add(
        tool_call("Write", {"file_path": str(target), "content": "x"}),
        text("gave up"),
        tool_call("Bash", {"command": "touch never.txt", "description": "x"}),
    )
    seen: list[GatedCall] = []

    class StepRefusal(Exception):
        pass

    async def gate(call: GatedCall) -> Allow | Deny:
        seen.append(call)
        if call.category == "shell":
            raise StepRefusal(call.tool)
        return Deny("REFUSED-BY-STEP-CANARY")

    async with create_agent_runner(
        descriptor_for(server), cwd=worktree, run=run_meta, agents_env=AGENTS_ENV, approve_tool=gate
    ) as runner:
        result = await generate_text(runner.model, prompt="write")
        assert result.text == "gave up"
        assert "REFUSED-BY-STEP-CANARY" in server.model_requests[1].text()
        # the gate's own exception fails the turn; the CLI is stopped before the tool runs
        with pytest.raises(ToolGateError) as info:
            await generate_text(runner.model, prompt="again")
        assert isinstance(info.value.__cause__, StepRefusal)
        assert live_groups() == {}
    assert not target.exists()
    assert not (worktree / "never.txt").exists()
    assert [(c.tool, c.category) for c in seen] == [("Write", "file_edit"), ("Bash", "shell")]
    assert seen[0].arguments["file_path"] == str(target)
    assert seen[0].call_id


async def test_run_agent_output_uses_the_native_schema_and_keeps_usage(
    claude_cli: Path, server: ModelServer, worktree: Path, run_meta: RunMetadata
) -> None:
    server.add(tool_call("StructuredOutput", {"name": "native", "score": 3}), text("submitted"))
    result = await run_agent(
        harness=descriptor_for(server),
        cwd=worktree,
        prompt="judge it",
        run=run_meta,
        output=Verdict,
        agents_env=AGENTS_ENV,
    )
    assert result.output == Verdict(name="native", score=3)
    assert result.usage.cost_usd is not None
    # the schema went to the CLI (its StructuredOutput tool), not into the prompt
    first = server.model_requests[0]
    assert "StructuredOutput" in first.tool_names()
    assert '"score"' not in first.text()
