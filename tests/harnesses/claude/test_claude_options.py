"""Descriptor keys and per-call settings through the real Claude Code CLI against the local model
server; the step's private files; the installation checks."""

from __future__ import annotations

import json
import os
import stat
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
import structlog
from claude_helpers import AGENTS_ENV, KEY_ENV, descriptor_for
from jigs import RunMetadata, harnesses
from jigs.checks import run_checks
from jigs.engine._pipeline import agent_env_for
from jigs.models import generate_text
from jigs.plugin import HarnessContext, HarnessTarget, ModelEndpoint, TurnSpec
from jigs.steps import create_agent_runner, run_agent
from jigs_harness_claude import ClaudeDescriptor, ClaudeHarness, transcript_path
from jigs_testing import ModelServer, text

pytestmark = pytest.mark.anyio


async def test_the_cli_accepts_every_descriptor_key(
    claude_cli: Path, server: ModelServer, worktree: Path, run_meta: RunMetadata, tmp_path: Path
) -> None:
    """All keys at once: Claude Code takes the flags (an unknown one would exit 1) and the ones
    the model request shows arrive there."""
    extra = tmp_path / "extra-dir"
    extra.mkdir()
    server.add(text("configured"))
    descriptor = descriptor_for(
        server,
        model="claude-sonnet-4-5",
        fallback_model="claude-haiku-4-5",
        effort="low",
        max_turns=3,
        max_budget_usd=5.0,
        allowed_tools=["Read"],
        disallowed_tools=["WebFetch"],
        tools=["Bash", "Read"],
        system_prompt="SYSTEM-PROMPT-CANARY replaces the default.",
        append_system_prompt="APPEND-CANARY",
        additional_directories=[str(extra)],
        betas=["jigs-test-beta-2026"],
        autocompact=200_000,
        name="jigs-named-session",
        system_prompt_snapshot="off",
        exclude_dynamic_system_prompt_sections=True,
        disable_slash_commands=True,
    )
    result = await run_agent(
        harness=descriptor, cwd=worktree, prompt="go", run=run_meta, agents_env=AGENTS_ENV
    )
    assert result.text == "configured"
    [request] = server.model_requests
    assert request.model == "claude-sonnet-4-5"
    system = json.dumps(request.body.get("system"))
    assert "SYSTEM-PROMPT-CANARY" in system
    assert "APPEND-CANARY" in system
    # system_prompt replaces Claude Code's long default prompt (only its one-line identity and
    # billing header stay); the default is tens of kilobytes (next test)
    assert len(system) < 1000
    assert set(request.tool_names()) <= {"Bash", "Read"}
    assert request.has_header("anthropic-beta")  # values are not recorded


async def test_long_prompt_and_system_leave_the_command_line(
    claude_cli: Path, server: ModelServer, worktree: Path, run_meta: RunMetadata
) -> None:
    prompt = "PROMPT-HEAD " + "p" * 200_000 + " PROMPT-TAIL"
    server.add(text("read it all"))
    descriptor = descriptor_for(server, append_system_prompt="A" * 150_000 + " SYSTEM-TAIL")
    result = await run_agent(
        harness=descriptor, cwd=worktree, prompt=prompt, run=run_meta, agents_env=AGENTS_ENV
    )
    assert result.text == "read it all"
    body = server.model_requests[0].text()
    assert "PROMPT-HEAD" in body
    assert "PROMPT-TAIL" in body
    system = json.dumps(server.model_requests[0].body.get("system"))
    assert "SYSTEM-TAIL" in system
    assert len(system) > 150_000 + 5000, "the default prompt stays when only appending"


async def test_max_output_tokens_and_system_are_honoured_and_seed_is_a_warning(
    claude_cli: Path, server: ModelServer, worktree: Path, run_meta: RunMetadata
) -> None:
    server.add(text("streamed words arrive"))
    async with create_agent_runner(
        descriptor_for(server), cwd=worktree, run=run_meta, agents_env=AGENTS_ENV
    ) as runner:
        result = await generate_text(
            runner.model, prompt="x", max_output_tokens=64, seed=1, system="PER-CALL-SYSTEM"
        )
    assert result.text == "streamed words arrive"
    assert [w.setting for w in result.warnings] == ["seed"]
    assert server.model_requests[0].body["max_tokens"] == 64
    assert "PER-CALL-SYSTEM" in json.dumps(server.model_requests[0].body.get("system"))


async def test_private_files_are_private_and_removed_at_close(
    claude_home: Path, worktree: Path, run_meta: RunMetadata, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FILES_TOKEN", "tok-value")
    d = harnesses.claude(
        api_key_env=KEY_ENV,
        mcp_servers={
            "files": {"command": "srv", "env": {"TOKEN": "FILES_TOKEN"}, "probe": {"tool": "p"}}
        },
    )
    assert isinstance(d, ClaudeDescriptor)
    harness = ClaudeHarness()
    env, _ = agent_env_for(harness, d, worktree, AGENTS_ENV)
    async with AsyncExitStack() as stack:
        log = structlog.get_logger()
        route = harness.model_route(d)
        assert route is not None
        endpoint = ModelEndpoint(base_url="http://127.0.0.1:9/tok", key="placeholder", route=route)
        ctx = HarnessContext(
            run=run_meta,
            env=env,
            state_dir=worktree,
            kind="claude",
            stack=stack,
            log=log,
            model_endpoint=endpoint,
        )
        prepared = await harness.prepare(HarnessTarget(descriptor=d, cwd=worktree), ctx)
        path = Path(prepared.mcp_config)
        assert json.loads(path.read_text())["mcpServers"]["files"]["env"] == {"TOKEN": "tok-value"}
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert prepared.shell_prefix is not None
        assert prepared.shell_prefix.parent == path.parent
        spec = TurnSpec(descriptor=d, cwd=worktree, prompt="hi")
        launch = harness.launch_turn(spec, ctx, prepared)
        assert list(launch.argv)[list(launch.argv).index("--mcp-config") + 1] == str(path)
        assert "tok-value" not in " ".join(launch.argv)
        assert launch.env["CLAUDE_CODE_SHELL_PREFIX"] == str(prepared.shell_prefix)
        assert launch.env["ANTHROPIC_API_KEY"] == "placeholder"
        assert launch.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9/tok"
    assert not path.exists()
    assert not path.parent.exists()


async def test_installation_checks_report_cli_and_descriptor_checks_the_login(
    claude_cli: Path,
) -> None:
    harness = ClaudeHarness()
    env = {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], "IS_SANDBOX": "1"}
    outcomes = {o.id: o for o in await run_checks(harness.installation_checks(env))}
    assert outcomes["harness.claude-cli"].ok, outcomes["harness.claude-cli"].reason
    assert str(claude_cli) in outcomes["harness.claude-cli"].detail
    assert outcomes["harness.claude-root"].ok
    # the login is not an installation check: a descriptor naming a key needs none
    assert "harness.claude-auth" not in outcomes
    login_route = ClaudeDescriptor(model="sonnet")
    checked = await run_checks(harness.descriptor_checks(login_route, env))
    auth = {o.id: o for o in checked}["harness.claude-auth"]
    assert not auth.ok
    assert "not logged in" in auth.reason
    assert f"run `{claude_cli}`, then /login" in auth.repair  # the CLI jigs runs, by its path
    if os.geteuid() == 0:
        no_sandbox = {k: v for k, v in env.items() if k != "IS_SANDBOX"}
        [root] = [c for c in harness.installation_checks(no_sandbox) if c.id.endswith("root")]
        failed = (await run_checks([root]))[0]
        assert not failed.ok
        assert "agents.env" in failed.repair


async def test_resume_in_a_long_worktree_path(
    claude_cli: Path, server: ModelServer, tmp_path: Path, run_meta: RunMetadata
) -> None:
    deep = tmp_path / ("d" * 120) / ("e_f." * 30)
    deep.mkdir(parents=True)
    server.add(text("one"), text("two"))
    first = await run_agent(
        harness=descriptor_for(server), cwd=deep, prompt="a", run=run_meta, agents_env=AGENTS_ENV
    )
    assert first.session is not None
    path = transcript_path(os.environ, deep.resolve(), first.session.id)
    assert path.is_file(), f"jigs looks for the transcript at {path}"
    second = await run_agent(
        harness=descriptor_for(server),
        cwd=deep,
        prompt="b",
        run=run_meta,
        resume=first.session,
        agents_env=AGENTS_ENV,
    )
    assert second.text == "two"
