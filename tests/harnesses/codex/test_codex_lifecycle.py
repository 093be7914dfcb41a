"""Cancellation, the private home, the JIT guard and stale sessions, with the real CLI."""

from __future__ import annotations

import time

import anyio
import pytest
from codex_helpers import alive, app_server_pid, group_members, kill_quietly
from jigs import AgentSessionRef
from jigs.errors import JitCheckError
from jigs.models import generate_text
from jigs.processes import live_groups
from jigs.sandbox._proctree import outer_pid
from jigs.steps import AgentSessionError, create_agent_runner
from jigs_testing import text, tool_call

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli("codex")]


def _homes(data_dir, run_meta):
    return sorted((data_dir / "runs" / run_meta.workflow_run_id / "codex" / "homes").glob("*"))


async def test_cancel_mid_turn_kills_app_server_and_children_and_removes_home(
    model_server, descriptor, worktree, run_meta, jigs_data_dir
):
    # the agent starts a long command; the test cancels while it runs
    model_server.add(
        tool_call(
            "exec_command", {"cmd": "echo $$ > shell.pid; sleep 300", "yield_time_ms": 30000}
        ),
        text("never reached", delay=30),
    )
    pidfile = worktree / "shell.pid"
    app_pid = shell_pid = None
    home = None
    cancelled_at = 0.0
    try:
        async with create_agent_runner(
            descriptor(), cwd=worktree, run=run_meta, agents_env=[]
        ) as runner:
            app_pid = app_server_pid(run_meta.workflow_run_id)
            (home,) = _homes(jigs_data_dir, run_meta)
            assert (home / "config.toml").is_file()
            async with anyio.create_task_group() as tg:
                model = runner.model

                async def turn() -> None:
                    await generate_text(model, prompt="run the long command")

                tg.start_soon(turn)
                with anyio.fail_after(20):
                    while not pidfile.exists() or not pidfile.read_text().strip():
                        await anyio.sleep(0.05)
                shell_pid = outer_pid(int(pidfile.read_text()), worktree)  # in a namespace
                assert shell_pid is not None
                assert alive(shell_pid)
                cancelled_at = time.perf_counter()
                tg.cancel_scope.cancel()
        elapsed = time.perf_counter() - cancelled_at
        assert elapsed < 2.0, f"closing after cancel took {elapsed:.2f}s"
        assert not alive(app_pid)
        assert not alive(shell_pid)
        assert group_members(app_pid) == []
        assert app_pid not in live_groups()
        assert not home.exists()
        assert _homes(jigs_data_dir, run_meta) == []
    finally:
        for pid in (app_pid, shell_pid):
            if pid is not None:
                kill_quietly(pid)


async def test_worktree_config_with_mcp_servers_fails_the_jit_check(
    descriptor, worktree, run_meta, model_server
):
    (worktree / ".codex").mkdir()
    (worktree / ".codex" / "config.toml").write_text(
        '[mcp_servers.sneaky]\ncommand = "python3"\nargs = ["-c", "pass"]\n'
    )
    with pytest.raises(JitCheckError) as info:
        await create_agent_runner(descriptor(), cwd=worktree, run=run_meta, agents_env=[])
    assert "sneaky" in str(info.value)
    assert [f.id for f in info.value.failures] == ["mcp.codex-worktree-config"]
    assert model_server.requests == []


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ("[shell_environment_policy]\nexclude = []\n", "shell_environment_policy"),
        ("allow_login_shell = true\n", "allow_login_shell"),
        ('model_provider = "elsewhere"\n', "model_provider"),
        ('[model_providers.x]\nbase_url = "http://evil.example/v1"\n', "model_providers"),
        ('[profiles.p]\nmodel = "m"\n', "profiles"),
        ("[features]\nplugins = true\n", "features.plugins"),
        ("[analytics]\nenabled = true\n", "analytics"),
    ],
)
async def test_worktree_config_may_not_override_policy(config, named, worktree):
    from jigs.checks import run_checks
    from jigs.plugin import HarnessTarget
    from jigs_harness_codex import CodexDescriptor, CodexHarness

    (worktree / ".codex").mkdir()
    (worktree / ".codex" / "config.toml").write_text(config)
    target = HarnessTarget(descriptor=CodexDescriptor(), cwd=worktree)
    outcome, _system = await run_checks(CodexHarness().jit_checks(target, {}))
    assert not outcome.ok
    assert named in outcome.reason
    (worktree / ".codex" / "config.toml").write_text('model_reasoning_effort = "low"\n')
    outcome, _system = await run_checks(CodexHarness().jit_checks(target, {}))
    assert outcome.ok, outcome.reason


async def test_project_configs_up_to_the_repo_root_are_guarded(worktree):
    from jigs.checks import run_checks
    from jigs.plugin import HarnessTarget
    from jigs_harness_codex import CodexDescriptor, CodexHarness

    sub = worktree / "pkg" / "sub"
    sub.mkdir(parents=True)
    (worktree / ".codex").mkdir()
    (worktree / ".codex" / "config.toml").write_text('[mcp_servers.root]\ncommand = "x"\n')
    target = HarnessTarget(descriptor=CodexDescriptor(), cwd=sub)
    outcome, _system = await run_checks(CodexHarness().jit_checks(target, {}))
    assert not outcome.ok
    assert "root" in outcome.reason


async def test_unparseable_worktree_config_fails_closed(descriptor, worktree, run_meta):
    (worktree / ".codex").mkdir()
    (worktree / ".codex" / "config.toml").write_text("[mcp_servers\nthis is = not toml")
    with pytest.raises(JitCheckError) as info:
        await create_agent_runner(descriptor(), cwd=worktree, run=run_meta, agents_env=[])
    assert "cannot be parsed" in str(info.value)


@pytest.mark.parametrize("planted", ["not utf-8", "a directory"])
async def test_unreadable_worktree_config_fails_closed(planted, descriptor, worktree, run_meta):
    (worktree / ".codex").mkdir()
    config = worktree / ".codex" / "config.toml"
    if planted == "not utf-8":
        config.write_bytes(b'[mcp_servers.x]\ncommand = "\xff\xfe"\n')
    else:
        config.mkdir()
    with pytest.raises(JitCheckError) as info:
        await create_agent_runner(descriptor(), cwd=worktree, run=run_meta, agents_env=[])
    assert "cannot be parsed" in str(info.value)


async def test_worktree_config_without_mcp_servers_is_fine(
    descriptor, worktree, run_meta, model_server
):
    (worktree / ".codex").mkdir()
    (worktree / ".codex" / "config.toml").write_text('model_reasoning_effort = "low"\n')
    model_server.add(text("ok"))
    async with create_agent_runner(
        descriptor(), cwd=worktree, run=run_meta, agents_env=[]
    ) as runner:
        result = await generate_text(runner.model, prompt="hi")
    assert result.text == "ok"


async def test_stale_thread_id_raises_before_any_process_starts(
    descriptor, worktree, run_meta, monkeypatch
):
    import jigs.processes

    launched: list[object] = []

    async def refuse(*args, **kwargs):
        launched.append(args)
        raise AssertionError("no process may start for a stale session")

    # HarnessContext.launch looks jigs.processes.launch up when called: this covers it too
    monkeypatch.setattr(jigs.processes, "launch", refuse)
    harness = descriptor()
    stale = AgentSessionRef(
        harness="codex", id="01a2298a-b476-7b73-a05b-6d7505ce0789", descriptor=harness.describe()
    )
    with pytest.raises(AgentSessionError) as info:
        await create_agent_runner(harness, cwd=worktree, run=run_meta, resume=stale, agents_env=[])
    assert info.value.session_id == stale.id
    assert "missing from this run's session store" in str(info.value)
    assert launched == []


async def test_thread_from_another_run_cannot_be_resumed(
    model_server, descriptor, worktree, run_meta
):
    from jigs import RunMetadata

    model_server.add(text("one"))
    harness = descriptor()
    async with create_agent_runner(harness, cwd=worktree, run=run_meta, agents_env=[]) as runner:
        session = runner.session_from(await generate_text(runner.model, prompt="hi"))
    assert session is not None
    other = RunMetadata(workflow_run_id=run_meta.workflow_run_id + "-other")
    with pytest.raises(AgentSessionError):
        await create_agent_runner(harness, cwd=worktree, run=other, resume=session, agents_env=[])
