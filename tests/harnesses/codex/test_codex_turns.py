"""The real Codex CLI against the local model server: turns, resume, tools, env, proxy."""

from __future__ import annotations

import json

import pytest
from codex_helpers import KEY_ENV, KEY_VALUE
from jigs.models import ToolCallPart, ToolResultPart, generate_object, generate_text, stream_text
from jigs.policy._paths import run_state_dir
from jigs.steps import create_agent_runner, run_agent
from jigs_testing import reply, text, tool_call
from pydantic import BaseModel
from structlog.testing import capture_logs

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli("codex")]


async def test_two_turns_second_runner_resumes_the_thread(
    model_server, descriptor, worktree, run_meta
):
    model_server.add(
        text("the first answer"),
        reply(lambda r: f"second answer after {r.message_count} items"),
    )
    harness = descriptor()
    with capture_logs() as logs:
        async with create_agent_runner(
            harness, cwd=worktree, run=run_meta, agents_env=[]
        ) as runner:
            first = await generate_text(runner.model, prompt="FIRST-QUESTION-7f3", temperature=0)
            session = runner.session_from(first)
    # the rollout was whole at close, so the app server was killed and its home removed while
    # the kernel tore it down: the resume below proves the stored session lacks nothing
    events = [e["event"] for e in logs]
    (stopped,) = [e for e in logs if e["event"] == "codex.app_server.stopped"]
    assert stopped["how"] == "killed, rollout complete"
    assert events.index("codex.home.removed") < events.index("codex.app_server.stopped")
    # the session was complete once Codex was killed: its storing starts while Codex dies (it
    # may end after the teardown, under load: no order is asserted between the two), once
    assert events.count("store.session.saved") == 1
    assert events.count("codex.home.removed") == 1  # the close stack's pass found nothing left
    assert list((run_state_dir(run_meta.workflow_run_id, "codex") / "homes").iterdir()) == []
    assert first.text == "the first answer"
    assert session is not None
    assert session.harness == "codex"
    assert first.provider_metadata["codex"]["thread_id"] == session.id
    assert [w.setting for w in first.warnings if w.setting] == ["temperature"]
    assert first.usage.input_tokens
    assert first.usage.output_tokens

    async with create_agent_runner(
        harness, cwd=worktree, run=run_meta, resume=session, agents_env=[]
    ) as runner:
        second = await generate_text(runner.model, prompt="SECOND-QUESTION-9c1")
        again = runner.session_from(second)
    assert again is not None
    assert again.id != session.id  # resuming forks: a new thread with the history
    assert second.text.startswith("second answer after")
    requests = model_server.model_requests
    assert len(requests) == 2
    carried = requests[1].text()
    assert "FIRST-QUESTION-7f3" in carried
    assert "the first answer" in carried
    assert "SECOND-QUESTION-9c1" in carried
    assert requests[1].message_count > requests[0].message_count
    model_server.assert_no_outside_connections()
    model_server.assert_script_used_up()


async def test_exec_command_creates_a_file_and_streams_tool_parts(
    model_server, descriptor, worktree, run_meta
):
    model_server.add(
        tool_call("exec_command", {"cmd": "printf made-by-codex > created.txt"}),
        text("done"),
    )
    async with create_agent_runner(
        descriptor(), cwd=worktree, run=run_meta, agents_env=[]
    ) as runner:
        stream = stream_text(runner.model, prompt="create the file")
        parts = [part async for part in stream]
    assert (worktree / "created.txt").read_text() == "made-by-codex"
    calls = [p.call for p in parts if isinstance(p, ToolCallPart)]
    results = [p.result for p in parts if isinstance(p, ToolResultPart)]
    assert [c.name for c in calls] == ["exec_command"]
    assert "created.txt" in calls[0].arguments["command"]
    assert results
    assert results[0].is_error is False
    assert stream.result is not None
    assert stream.result.text == "done"
    assert stream.result.tool_calls == tuple(calls)


async def test_system_skills_are_the_seeds_read_only(
    model_server, descriptor, worktree, run_meta, codex_cli
):
    """The home's skills/.system links to the seed's (not a copy): Codex lists those skills to
    the model, and the agent can change none of them (the sandbox shows them read-only)."""
    from jigs_harness_codex._seed import seed_path, system_skills

    planted = system_skills(seed_path(codex_cli)) / "planted.txt"
    cmd = 'echo x > "$CODEX_HOME/skills/.system/planted.txt"; echo "exit=$?"'
    model_server.add(tool_call("exec_command", {"cmd": cmd}), text("tried"))
    result = await run_agent(
        harness=descriptor(), cwd=worktree, prompt="plant a skill", run=run_meta, agents_env=[]
    )
    assert result.text == "tried"
    first, second = model_server.model_requests
    assert "skill-creator" in first.text()  # a system skill of the seed, listed to the model
    assert "Read-only file system" in second.text()
    assert "exit=1" in second.text()
    assert not planted.exists()


async def test_env_canaries_never_reach_the_agents_commands(
    model_server, descriptor, worktree, run_meta, monkeypatch
):
    canaries = {
        "JIGS_CANARY_SECRET": "canary-host-secret-51d",
        "OPENAI_API_KEY": "canary-openai-key-8e2",
        "ANTHROPIC_API_KEY": "canary-anthropic-key-3a7",
        "AWS_SECRET_ACCESS_KEY": "canary-aws-0c9",
        "CODEX_HOME": "/canary/codex/home",
    }
    for name, value in canaries.items():
        monkeypatch.setenv(name, value)
    # a login shell would source these and export what the environment policy never allowed
    home = worktree.parent / "operator-home"
    home.mkdir()
    # ... and nothing may run them at all (Codex's shell snapshot would, with `bash -lc`)
    sourced = worktree.parent / "profile-was-sourced"
    touch = f"touch {sourced}\n"
    (home / ".profile").write_text("export PROFILE_CANARY=canary-from-profile-6b4\n" + touch)
    (home / ".bashrc").write_text("export BASHRC_CANARY=canary-from-bashrc-2f8\n" + touch)
    (home / ".bash_profile").write_text("export BASH_PROFILE_CANARY=canary-from-bp-9d0\n" + touch)
    monkeypatch.setenv("HOME", str(home))
    canaries.update(
        PROFILE_CANARY="canary-from-profile-6b4",
        BASHRC_CANARY="canary-from-bashrc-2f8",
        BASH_PROFILE_CANARY="canary-from-bp-9d0",
    )
    model_server.add(tool_call("exec_command", {"cmd": "env"}), text("listed"))
    async with create_agent_runner(
        descriptor(), cwd=worktree, run=run_meta, agents_env=[]
    ) as runner:
        result = await generate_text(runner.model, prompt="print the environment")
    assert result.text == "listed"
    seen = model_server.model_requests[1].text()
    assert "PATH=" in seen  # the command really ran and its output came back
    for value in canaries.values():
        assert value not in seen
    # the model key is in the app server's env but kept from the agent's commands
    assert KEY_VALUE not in seen
    assert f"{KEY_ENV}=" not in seen
    assert "CODEX_HOME=" in seen
    assert "/canary/codex/home" not in seen
    assert not sourced.exists(), "a login shell sourced the operator's profile"


async def test_refusing_proxy_sees_no_connect(model_server, descriptor, worktree, run_meta):
    model_server.add(text("quiet"))
    result = await run_agent(
        harness=descriptor(), cwd=worktree, prompt="hello", run=run_meta, agents_env=[]
    )
    assert result.text == "quiet"
    assert result.session is not None
    assert model_server.connect_attempts == []
    assert model_server.proxy_requests == []


class Verdict(BaseModel):
    ok: bool
    reason: str


async def test_generate_object_sends_the_output_schema(
    model_server, descriptor, worktree, run_meta
):
    model_server.add(text(json.dumps({"ok": True, "reason": "fine"})))
    async with create_agent_runner(
        descriptor(), cwd=worktree, run=run_meta, agents_env=[]
    ) as runner:
        answer = await generate_object(runner.model, schema=Verdict, prompt="judge")
    assert answer.object == Verdict(ok=True, reason="fine")
    body = model_server.model_requests[0].body
    fmt = body["text"]["format"]
    assert fmt["type"] == "json_schema"
    assert fmt["schema"]["additionalProperties"] is False
    assert sorted(fmt["schema"]["required"]) == ["ok", "reason"]


@pytest.mark.parametrize(
    ("status", "reason", "retryable"),
    [(400, "other", False), (500, "api_error", True), (401, "not_logged_in", False)],
)
async def test_failed_turn_raises_agent_turn_error(
    model_server, descriptor, worktree, run_meta, status, reason, retryable
):
    from jigs.errors import AgentTurnError
    from jigs_testing import error

    model_server.add(error(status, "scripted bad request"))
    async with create_agent_runner(
        descriptor(), cwd=worktree, run=run_meta, agents_env=[]
    ) as runner:
        with pytest.raises(AgentTurnError) as info:
            await generate_text(runner.model, prompt="fail please")
    if status != 500:  # Codex words a 500 itself
        assert "scripted bad request" in str(info.value)
    assert (info.value.reason, info.value.retryable) == (reason, retryable)
    assert info.value.stop_reason == "failed"
    assert info.value.session_id  # the thread can be continued


async def test_effort_and_developer_instructions_reach_the_model(
    model_server, descriptor, worktree, run_meta
):
    model_server.add(text("tuned"))
    harness = descriptor(effort="high", developer_instructions="DEV-INSTRUCTIONS-4c2")
    result = await run_agent(
        harness=harness, cwd=worktree, prompt="hi", run=run_meta, agents_env=[]
    )
    assert result.text == "tuned"
    request = model_server.model_requests[0]
    assert request.body["reasoning"]["effort"] == "high"
    assert "DEV-INSTRUCTIONS-4c2" in request.text()


async def test_run_agent_output_sends_the_schema_and_the_core_reasks_once(
    model_server, descriptor, worktree, run_meta
):
    model_server.add(text("not json at all"), text(json.dumps({"ok": False, "reason": "r"})))
    result = await run_agent(
        harness=descriptor(),
        cwd=worktree,
        prompt="judge",
        run=run_meta,
        output=Verdict,
        agents_env=[],
    )
    assert result.output == Verdict(ok=False, reason="r")
    requests = model_server.model_requests
    assert len(requests) == 2  # one re-ask, by the core, on the same thread
    assert all(r.body["text"]["format"]["type"] == "json_schema" for r in requests)
    assert requests[1].message_count > requests[0].message_count
