"""The claude kind's pure parts: descriptor rules, the command line, the MCP config, transcript
paths, the installation checks and reading recorded stream-json events."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from claude_helpers import AGENTS_ENV, KEY_ENV, descriptor_for
from jigs import RunMetadata, harnesses
from jigs.checks import run_checks
from jigs.errors import AgentTurnError, DescriptorError
from jigs.mcp import McpHttpServer, McpProbe, McpStdioServer
from jigs.models import generate_text
from jigs.steps import create_agent_runner, run_agent
from jigs.testing import ModelServer, text
from jigs_harness_claude import ClaudeDescriptor, ClaudeHarness, transcript_path
from jigs_harness_claude._checks import sandbox_ok
from jigs_harness_claude._events import TurnReader
from jigs_harness_claude._launch import build_argv, build_env
from jigs_harness_claude._mcp import mcp_config
from jigs_harness_claude._sessions import project_dir_name

SAMPLES = Path(__file__).parents[2] / "testing" / "cli_samples"
PROBE = McpProbe(tool="ping")


def test_descriptor_refuses_policy_keys_and_secrets() -> None:
    with pytest.raises(DescriptorError, match="permission_mode"):
        harnesses.claude(permission_mode="default")
    with pytest.raises(DescriptorError, match="mcp_config"):
        harnesses.claude(mcp_config="{}")
    with pytest.raises(DescriptorError, match="looks like a secret"):
        harnesses.claude(api_key_env="sk-ant-abcdefghijklmnopqrstuvwxyz0123456789")
    with pytest.raises(DescriptorError, match="base_url needs api_key_env"):
        harnesses.claude(base_url="http://127.0.0.1:1")
    d = harnesses.claude(model="sonnet", base_url="http://127.0.0.1:1", api_key_env="K")
    assert isinstance(d, ClaudeDescriptor)
    assert harnesses.loads(d.describe()) == d
    assert "api_key_env" in d.describe()
    assert "sk-" not in d.describe()


def test_argv_carries_the_policy_whatever_the_descriptor() -> None:
    d = ClaudeDescriptor(model="m", allowed_tools=("Bash(git *)",), tools=())
    launch = build_argv(
        Path("/x/claude"),
        d,
        prompt="-looks-like-a-flag",
        mcp_config='{"mcpServers":{}}',
        session_id="11111111-2222-4333-8444-555555555555",
    )
    argv = launch.argv
    assert launch.stdin_prompt is None
    assert argv[-2:] == ["--", "-looks-like-a-flag"]
    for flag in ("--strict-mcp-config", "--verbose"):
        assert flag in argv
    assert argv[argv.index("--mcp-config") + 1] == '{"mcpServers":{}}'
    assert argv[argv.index("--permission-mode") + 1] == "bypassPermissions"
    # no settings file is read (a worktree's could redirect the key); CLAUDE.md loads via --add-dir
    assert argv[argv.index("--setting-sources") + 1] == ""
    assert argv[argv.index("--add-dir") + 1] == "."
    assert argv[argv.index("--output-format") + 1] == "stream-json"
    assert argv[argv.index("--tools") + 1] == ""
    resumed = build_argv(
        Path("c"), d, prompt="p", mcp_config="{}", resume_id="abc", partial=True
    ).argv
    assert "--resume=abc" in resumed
    assert "--session-id" not in resumed
    assert "--include-partial-messages" in resumed
    big = build_argv(Path("c"), d, prompt="x" * 200_000, mcp_config="{}", session_id="s")
    assert big.stdin_prompt == b"x" * 200_000
    assert "x" * 200_000 not in big.argv


def test_env_adds_only_what_jigs_sets_and_reads_the_key_at_launch() -> None:
    d = ClaudeDescriptor(base_url="http://gw.example", api_key_env="GW_KEY")
    prefix = Path("/private/shell-prefix")
    env = build_env(
        d, {"PATH": "/bin"}, host_env={"GW_KEY": "secret-value", "OTHER": "x"}, shell_prefix=prefix
    )
    assert env == {
        "PATH": "/bin",
        "CLAUDE_CODE_ENTRYPOINT": "sdk-py",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "2",
        "CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD": "1",
        "ANTHROPIC_BASE_URL": "http://gw.example",
        "ANTHROPIC_API_KEY": "secret-value",
        "CLAUDE_CODE_SHELL_PREFIX": "/private/shell-prefix",
    }
    bearer = d.model_copy(update={"api_key_header": "bearer"})
    assert "ANTHROPIC_AUTH_TOKEN" in build_env(
        bearer, {}, host_env={"GW_KEY": "v"}, shell_prefix=prefix
    )
    # a key without the prefix that hides it is a programming error, never a silent leak
    with pytest.raises(ValueError, match="shell_prefix"):
        build_env(d, {}, host_env={"GW_KEY": "v"})
    login = build_env(ClaudeDescriptor(), {"HOME": "/h"}, host_env={"ANTHROPIC_API_KEY": "leak"})
    assert "ANTHROPIC_API_KEY" not in login
    # the key's own variable is not on the agent's allowlist
    assert "GW_KEY" not in ClaudeHarness().env_allowlist(d)


def test_mcp_config_resolves_credentials_by_name() -> None:
    servers: dict[str, McpStdioServer | McpHttpServer] = {
        "files": McpStdioServer(
            command="srv", args=("--x",), env={"TOKEN": "FILES_TOKEN"}, probe=PROBE
        ),
        "web": McpHttpServer(url="https://mcp.example", bearer_token_env="WEB_TOKEN", probe=PROBE),
    }
    config = mcp_config(servers, {"FILES_TOKEN": "t1", "WEB_TOKEN": "t2"})
    assert config == {
        "mcpServers": {
            "files": {"type": "stdio", "command": "srv", "args": ["--x"], "env": {"TOKEN": "t1"}},
            "web": {
                "type": "http",
                "url": "https://mcp.example",
                "headers": {"Authorization": "Bearer t2"},
            },
        }
    }
    assert mcp_config({}, {}) == {"mcpServers": {}}


def test_project_dir_names_match_claude_code() -> None:
    # values recorded from Claude Code 2.1.332
    assert project_dir_name(Path("/tmp/explore/a_b.c/w")) == "-tmp-explore-a-b-c-w"
    long = Path("/tmp/explore/a_b.c/" + "x" * 120 + "/" + "y" * 100)
    name = project_dir_name(long)
    assert name.endswith("-ymwv6e")
    assert len(name) == 207


def test_sandbox_rule() -> None:
    assert sandbox_ok({}, euid=1000)
    assert not sandbox_ok({}, euid=0)
    assert not sandbox_ok({"IS_SANDBOX": "0"}, euid=0)
    assert not sandbox_ok({"IS_SANDBOX": "yes"}, euid=0)  # Claude Code refuses it too
    assert sandbox_ok({"IS_SANDBOX": "1"}, euid=0)


def test_recorded_not_logged_in_stream_is_a_turn_error() -> None:
    reader = TurnReader(partial=False)
    for event in (
        {"type": "system", "subtype": "init", "session_id": "s", "apiKeySource": "none"},
        {
            "type": "assistant",
            "error": "authentication_failed",
            "parent_tool_use_id": None,
            "message": {"content": [{"type": "text", "text": "Not logged in · Please run /login"}]},
        },
        {"type": "result", "subtype": "success", "is_error": True, "result": "Not logged in"},
    ):
        assert reader.feed(event) == []
    with pytest.raises(AgentTurnError) as caught:
        reader.finish([])
    assert caught.value.detail == "not_logged_in"
    assert "/login" in str(caught.value)
    assert "api_key_env" in str(caught.value)


def test_recorded_stream_with_a_tool_call() -> None:
    reader = TurnReader(partial=False)
    parts = []
    for line in (SAMPLES / "claude-p-stream-json.jsonl").read_text().splitlines():
        parts += reader.feed(json.loads(line))
    result = reader.finish([])
    assert [p.type for p in parts] == ["tool-call", "tool-result", "text-delta"]
    assert result.tool_calls[0].name == "Bash"
    assert result.tool_results[0].output == "tool-ran"
    assert (
        result.provider_metadata["claude"]["session_id"] == "22222222-3333-4444-8555-666666666666"
    )
    assert result.usage.input_tokens == 20
    assert result.usage.output_tokens == 10


@pytest.mark.anyio
async def test_installation_checks_report_cli_and_login(claude_cli: Path) -> None:
    harness = ClaudeHarness()
    env = {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], "IS_SANDBOX": "1"}
    outcomes = {o.id: o for o in await run_checks(harness.installation_checks(env))}
    assert outcomes["harness.claude-cli"].ok, outcomes["harness.claude-cli"].reason
    assert str(claude_cli) in outcomes["harness.claude-cli"].detail
    assert outcomes["harness.claude-root"].ok
    auth = outcomes["harness.claude-auth"]
    assert not auth.ok
    assert "not logged in" in auth.reason
    assert "/login" in auth.repair
    if os.geteuid() == 0:
        no_sandbox = {k: v for k, v in env.items() if k != "IS_SANDBOX"}
        [root] = [c for c in harness.installation_checks(no_sandbox) if c.id.endswith("root")]
        failed = (await run_checks([root]))[0]
        assert not failed.ok
        assert "agents.env" in failed.repair


@pytest.mark.anyio
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


@pytest.mark.anyio
async def test_mcp_config_file_is_private_and_removed_at_close(
    claude_home: Path, worktree: Path, run_meta: RunMetadata, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jigs_harness_claude._model import ClaudeModel

    monkeypatch.setenv("FILES_TOKEN", "tok-value")
    d = harnesses.claude(
        api_key_env=KEY_ENV,
        mcp_servers={
            "files": {"command": "srv", "env": {"TOKEN": "FILES_TOKEN"}, "probe": {"tool": "p"}}
        },
    )
    harness = ClaudeHarness()
    from contextlib import AsyncExitStack

    from jigs._pipeline import agent_env_for
    from jigs.plugin import HarnessContext, HarnessTarget

    env, _ = agent_env_for(harness, d, worktree, AGENTS_ENV)
    async with AsyncExitStack() as stack:
        ctx = HarnessContext(
            run=run_meta, env=env, state_dir=worktree, kind="claude", stack=stack, log=_NullLog()
        )
        model = await harness.open(HarnessTarget(descriptor=d, cwd=worktree), ctx)
        assert isinstance(model, ClaudeModel)
        path = Path(model._mcp_config)
        assert json.loads(path.read_text())["mcpServers"]["files"]["env"] == {"TOKEN": "tok-value"}
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not path.exists()
    assert not path.parent.exists()


class _NullLog:
    def bind(self, **_: object) -> _NullLog:
        return self

    def __getattr__(self, _: str) -> object:
        return lambda *a, **k: None


@pytest.mark.anyio
async def test_max_output_tokens_is_honoured_and_seed_is_a_warning(
    claude_cli: Path, server: ModelServer, worktree: Path, run_meta: RunMetadata
) -> None:
    server.add(text("streamed words arrive"))
    async with create_agent_runner(
        descriptor_for(server), cwd=worktree, run=run_meta, agents_env=AGENTS_ENV
    ) as runner:
        result = await generate_text(runner.model, prompt="x", max_output_tokens=64, seed=1)
    assert result.text == "streamed words arrive"
    assert [w.setting for w in result.warnings] == ["seed"]
    assert server.model_requests[0].body["max_tokens"] == 64
