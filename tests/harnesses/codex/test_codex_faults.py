"""Fault injection through a fake app server (``fake_app_server.py``) and the kind's checks."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from codex_helpers import KEY_ENV, KEY_VALUE
from jigs import harnesses
from jigs.checks import run_checks
from jigs.errors import (
    AgentCrashedError,
    AgentTimeoutError,
    AgentTurnError,
    CliNotFoundError,
    InvalidInputError,
    ToolGateError,
)
from jigs.models import generate_text
from jigs.processes import live_groups
from jigs.steps import Allow, Deny, create_agent_runner
from jigs_harness_codex import AppServerRpcError, CodexHarness
from structlog.testing import capture_logs

pytestmark = pytest.mark.anyio

FAKE = Path(__file__).with_name("fake_app_server.py")


@pytest.fixture
def fake_codex(tmp_path, monkeypatch):
    """``fake_codex(mode)`` installs a fake app server as $JIGS_CODEX_EXECUTABLE."""

    def install(mode: str) -> Path:
        source = FAKE.read_text().replace('MODE = "ok"', f"MODE = {mode!r}", 1)
        path = tmp_path / f"fake-codex-{mode}"
        path.write_text(f"#!{sys.executable}\n{source}")
        path.chmod(0o755)
        monkeypatch.setenv("JIGS_CODEX_EXECUTABLE", str(path))
        monkeypatch.setenv(KEY_ENV, KEY_VALUE)
        return path

    return install


def _descriptor(**overrides):
    settings = {
        "model": "fake-model",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": KEY_ENV,
        "startup_timeout": 2,
        "idle_timeout": 2,
    }
    settings.update(overrides)
    return harnesses.codex(**settings)


async def _one_turn(worktree, run_meta, **overrides):
    async with create_agent_runner(
        _descriptor(**overrides), cwd=worktree, run=run_meta, agents_env=[]
    ) as runner:
        return await generate_text(runner.model, prompt="hello")


def _nothing_left():
    assert not [owner for owner in live_groups().values() if owner.startswith("codex")]


async def test_an_idle_app_server_exits_at_the_end_of_its_input(fake_codex, worktree, run_meta):
    fake_codex("ok")
    with capture_logs() as logs:
        result = await _one_turn(worktree, run_meta)
    assert result.text == "fake answer"
    (stopped,) = [e for e in logs if e["event"] == "codex.app_server.stopped"]
    assert stopped["returncode"] == 0  # it exited by itself: no signal was needed
    _nothing_left()


async def test_an_app_server_deaf_to_the_end_of_input_is_still_stopped(
    fake_codex, worktree, run_meta
):
    fake_codex("deaf")
    started = time.perf_counter()
    with capture_logs() as logs:
        result = await _one_turn(worktree, run_meta)
    assert result.text == "fake answer"
    (stopped,) = [e for e in logs if e["event"] == "codex.app_server.stopped"]
    assert stopped["returncode"] is None  # still running after the grace: the core stopped it
    assert time.perf_counter() - started < 8
    _nothing_left()


async def test_fake_ok_server_answers(fake_codex, worktree, run_meta):
    fake_codex("ok")
    async with create_agent_runner(
        _descriptor(), cwd=worktree, run=run_meta, agents_env=[]
    ) as runner:
        result = await generate_text(runner.model, prompt="hello", system="be terse", seed=1)
    assert result.text == "fake answer"
    assert result.provider_metadata["codex"]["session_id"]
    assert sorted(w.setting for w in result.warnings if w.setting) == ["seed", "system"]


async def test_a_failing_approval_hook_fails_the_turn(fake_codex, worktree, run_meta):
    fake_codex("requests")

    def approve(call):
        raise KeyError("hook broke")

    async with create_agent_runner(
        _descriptor(), cwd=worktree, run=run_meta, agents_env=[], approve_tool=approve
    ) as runner:
        with pytest.raises(ToolGateError) as info:
            await generate_text(runner.model, prompt="hello")
    assert isinstance(info.value.__cause__, KeyError)
    _nothing_left()


async def test_a_2_mib_line_is_read_whole(fake_codex, worktree, run_meta):
    fake_codex("bigline")
    result = await _one_turn(worktree, run_meta)
    assert result.text == "x" * (2 * 1024 * 1024)


async def test_crash_mid_turn_is_agent_crashed_error(fake_codex, worktree, run_meta):
    fake_codex("crash-turn")
    with pytest.raises(AgentCrashedError) as info:
        await _one_turn(worktree, run_meta)
    assert info.value.returncode == 1
    assert "died mid-turn" in info.value.stderr_tail
    _nothing_left()


async def test_a_line_cut_short_by_a_crash_mid_turn_is_agent_crashed_error(
    fake_codex, worktree, run_meta
):
    fake_codex("cut-turn")
    with pytest.raises(AgentCrashedError) as info:
        await _one_turn(worktree, run_meta)
    assert info.value.returncode == 3
    _nothing_left()


async def test_json_rpc_error_is_typed(fake_codex, worktree, run_meta):
    fake_codex("rpc-error")
    with pytest.raises(AppServerRpcError) as info:
        await _one_turn(worktree, run_meta)
    assert isinstance(info.value, AgentTurnError)
    assert info.value.method == "turn/start"
    assert info.value.code == -32600
    assert "scripted refusal" in str(info.value)
    _nothing_left()


async def test_failed_turn_is_agent_turn_error(fake_codex, worktree, run_meta):
    fake_codex("fail-turn")
    with pytest.raises(AgentTurnError) as info:
        await _one_turn(worktree, run_meta)
    assert "scripted turn failure" in str(info.value)


async def test_hang_mid_turn_times_out(fake_codex, worktree, run_meta):
    fake_codex("hang-turn")
    started = time.perf_counter()
    with pytest.raises(AgentTimeoutError) as info:
        await _one_turn(worktree, run_meta)
    assert info.value.limit == "idle_timeout"
    assert info.value.session_id == "01a22966-6fd2-7931-9655-85c89129d947"
    assert time.perf_counter() - started < 2 + 5
    _nothing_left()


async def test_server_requests_are_answered_by_policy(fake_codex, worktree, run_meta):
    fake_codex("requests")
    result = await _one_turn(worktree, run_meta)
    replies = json.loads(result.text)
    assert replies["item/commandExecution/requestApproval"] == {"decision": "accept"}
    assert replies["execCommandApproval"] == {"decision": "approved"}
    assert replies["item/fileChange/requestApproval"] == {"decision": "accept"}
    assert replies["applyPatchApproval"] == {"decision": "approved"}
    assert replies["mcpServer/elicitation/request"]["action"] == "decline"
    assert replies["some/unknown/request"]["code"] == -32601


async def test_approve_tool_sees_tool_names_and_arguments_and_can_decline(
    fake_codex, worktree, run_meta
):
    fake_codex("requests")
    asked: list[tuple[str, str, dict]] = []

    async def approve(call):
        asked.append((call.tool, call.category, call.arguments))
        return Allow() if call.category == "mcp" else Deny("no, thanks")

    async with create_agent_runner(
        _descriptor(), cwd=worktree, run=run_meta, agents_env=[], approve_tool=approve
    ) as runner:
        result = await generate_text(runner.model, prompt="hello")
    replies = json.loads(result.text)
    assert replies["item/commandExecution/requestApproval"] == {"decision": "decline"}
    assert replies["execCommandApproval"] == {"decision": "denied"}
    assert replies["item/fileChange/requestApproval"] == {"decision": "decline"}
    assert replies["applyPatchApproval"] == {"decision": "denied"}
    assert replies["mcpServer/elicitation/request"]["action"] == "accept"
    assert asked == [
        ("exec_command", "shell", {"command": "rm -rf x", "cwd": "/w"}),
        ("exec_command", "shell", {"command": ["ls"], "cwd": None}),
        ("apply_patch", "file_edit", {"paths": ["a.txt"], "reason": None}),
        ("apply_patch", "file_edit", {"paths": ["b.txt"], "reason": None}),
        ("mcp__srv__elicitation", "mcp", {"message": "pick", "mode": "form"}),
    ]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"approve": lambda m, p: True}, "approve_tool"),
        ({"approve_tool": lambda call: Allow()}, "moved"),
        ({"effort": "extreme"}, "effort"),
        ({"temperature": 0}, "unknown key"),
    ],
)
async def test_bad_provider_options_are_invalid_input(
    fake_codex, worktree, run_meta, options, named
):
    fake_codex("ok")
    async with create_agent_runner(
        _descriptor(), cwd=worktree, run=run_meta, agents_env=[]
    ) as runner:
        with pytest.raises(InvalidInputError) as info:
            await generate_text(runner.model, prompt="hello", provider_options={"codex": options})
    assert info.value.argument == "provider_options"
    assert named in str(info.value)


async def test_missing_cli_is_cli_not_found(monkeypatch, tmp_path):
    monkeypatch.setenv("JIGS_CODEX_EXECUTABLE", str(tmp_path / "nope"))
    with pytest.raises(CliNotFoundError) as info:
        CodexHarness().resolve_executable({"PATH": ""})
    assert "JIGS_CODEX_EXECUTABLE" in str(info.value)


async def test_cli_check_reports_version_and_refuses_old(fake_codex, monkeypatch):
    path = fake_codex("ok")
    env = {"PATH": "/usr/bin:/bin", "FAKE_CODEX_VERSION": "codex-cli 0.171.0"}
    (ok,) = await run_checks(CodexHarness().installation_checks(env))
    assert ok.ok, ok.reason
    assert str(path) in ok.detail
    assert "0.171.0" in ok.detail
    env["FAKE_CODEX_VERSION"] = "codex-cli 0.100.0"
    (old,) = await run_checks(CodexHarness().installation_checks(env))
    assert not old.ok
    assert "0.100.0" in old.reason


async def test_auth_check_needs_the_named_key_or_a_login(monkeypatch, tmp_path):
    harness = CodexHarness()
    (missing,) = await run_checks(harness.descriptor_checks(_descriptor(), {}))
    assert not missing.ok
    assert KEY_ENV in missing.reason
    assert KEY_VALUE not in missing.reason
    (present,) = await run_checks(harness.descriptor_checks(_descriptor(), {KEY_ENV: "x"}))
    assert present.ok
    monkeypatch.delenv("CODEX_HOME", raising=False)
    login = harnesses.codex(model="gpt-5.2-codex")
    (no_login,) = await run_checks(harness.descriptor_checks(login, {"HOME": str(tmp_path)}))
    assert not no_login.ok
    assert "codex login" in no_login.repair
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "auth.json").write_text(
        json.dumps({"auth_mode": "chatgpt", "tokens": {"refresh_token": "r"}})
    )
    (logged_in,) = await run_checks(harness.descriptor_checks(login, {"HOME": str(tmp_path)}))
    assert logged_in.ok, logged_in.reason


async def test_commands_in_their_own_session_die_with_a_killed_app_server(
    fake_codex, worktree, run_meta
):
    import anyio
    from codex_helpers import alive, app_server_pid, kill_quietly
    from jigs.sandbox._proctree import outer_pid

    fake_codex("stubborn")
    pidfile = worktree / "child.pid"
    child = None
    try:
        async with create_agent_runner(
            _descriptor(idle_timeout=30), cwd=worktree, run=run_meta, agents_env=[]
        ) as runner:
            app_pid = app_server_pid(run_meta.workflow_run_id)
            async with anyio.create_task_group() as tg:
                model = runner.model

                async def turn() -> None:
                    await generate_text(model, prompt="start it")

                tg.start_soon(turn)
                with anyio.fail_after(10):
                    while not pidfile.exists() or not pidfile.read_text():
                        await anyio.sleep(0.05)
                child = outer_pid(int(pidfile.read_text()), worktree)  # it runs in a namespace
                assert child is not None
                assert alive(child)
                tg.cancel_scope.cancel()
        assert not alive(app_pid)
        # SIGKILL is sent before the runner closes, but the orphan dies when next scheduled
        deadline = time.monotonic() + 2
        while alive(child) and time.monotonic() < deadline:
            await anyio.sleep(0.02)
        assert not alive(child)
    finally:
        if child is not None:
            kill_quietly(child)


def test_resolution_order_env_var_then_path_then_wheel(tmp_path, monkeypatch):
    from jigs_harness_codex._executable import wheel_binary

    monkeypatch.delenv("JIGS_CODEX_EXECUTABLE", raising=False)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    on_path = bindir / "codex"
    on_path.write_text("#!/bin/sh\necho codex-cli 0.171.0\n")
    on_path.chmod(0o755)
    harness = CodexHarness()
    assert harness.resolve_executable({"PATH": str(bindir)}).path == on_path
    wheel = wheel_binary()
    assert wheel is not None, "jigs-harness-codex depends on the openai-codex-cli-bin wheel"
    found = harness.resolve_executable({"PATH": str(tmp_path / "empty")})
    assert found.path == wheel
    assert "openai-codex-cli-bin" in found.source
    explicit = tmp_path / "explicit-codex"
    explicit.write_text("#!/bin/sh\n")
    explicit.chmod(0o755)
    monkeypatch.setenv("JIGS_CODEX_EXECUTABLE", str(explicit))
    assert harness.resolve_executable({"PATH": str(bindir)}).path == explicit


async def test_a_home_written_to_while_the_app_server_dies_is_still_removed(
    fake_codex, worktree, run_meta
):
    """A settled thread's app server is killed and its home removed while the kernel tears it
    down; a detached process that keeps creating files in the home until it is killed races
    that removal (the second pass after the namespace is gone is unit-tested in
    test_codex_home), and the close still ends with the home gone, the rollout stored, and the
    writer dead."""
    from codex_helpers import alive, kill_quietly
    from jigs.policy._paths import run_state_dir
    from jigs.sandbox._proctree import outer_pid

    fake_codex("scribbler")
    writer = None
    try:
        with capture_logs() as logs:
            async with create_agent_runner(
                _descriptor(), cwd=worktree, run=run_meta, agents_env=[]
            ) as runner:
                result = await generate_text(runner.model, prompt="write on")
                writer = outer_pid(int((worktree / "scribbler.pid").read_text()), worktree)
                assert writer is not None
                assert alive(writer)
                session = runner.session_from(result)
        (stopped,) = [e for e in logs if e["event"] == "codex.app_server.stopped"]
        assert stopped["how"] == "killed, rollout complete"
        assert not alive(writer)
        state = run_state_dir(run_meta.workflow_run_id, "codex")
        assert list((state / "homes").iterdir()) == []
        assert [p.name for p in (state / "sessions").rglob("rollout-*.jsonl")] == [
            f"rollout-2026-12-01T00-00-00-{session.id}.jsonl"
        ]
        assert session.store_key is not None
        _nothing_left()
    finally:
        if writer is not None:
            kill_quietly(writer)
