"""jigs' policy around the real Claude Code CLI: the environment, settings sources, the MCP
universe, outbound traffic and cancellation."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from claude_helpers import AGENTS_ENV, KEY_ENV, descriptor_for
from jigs import RunMetadata
from jigs.env import BASE_ENV
from jigs.models import generate_text
from jigs.steps import create_agent_runner
from jigs_testing import ModelServer, text, tool_call

pytestmark = pytest.mark.anyio

CANARIES = {
    "ANTHROPIC_API_KEY": "CANARY-ANTHROPIC-4f1c",
    "AWS_SECRET_ACCESS_KEY": "CANARY-AWS-77ad",
    "JIGS_RANDOM_NAME_9B2E": "CANARY-RANDOM-c0de",
    "CLAUDE_HOST_ONLY_SETTING": "CANARY-CLAUDE-PREFIX-5e5e",
}
#: What the agent's shell may see besides the base list, LC_*, IS_SANDBOX and what jigs sets:
#: the names the shell and Claude Code's Bash tool add themselves (Claude Code 2.1.332 adds
#: CLAUDECODE, CLAUDE_PID, CLAUDE_CODE_* and a few more; names starting with CLAUDE are accepted,
#: and a host-only CLAUDE_* canary proves the host's are not passed on).
SHELL_AND_CLAUDE = {
    "PWD",
    "OLDPWD",
    "SHLVL",
    "_",
    "AI_AGENT",
    "GIT_EDITOR",
    "COREPACK_ENABLE_AUTO_PIN",
    "NoDefaultCurrentDirectoryInExePath",
    "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE",
}


def _env_names(output: str) -> dict[str, str]:
    names = {}
    for line in output.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.replace("_", "").isalnum():
            names[name] = value
    return names


async def test_agent_sees_only_the_allowlist_and_no_settings_file(
    claude_cli: Path,
    server: ModelServer,
    worktree: Path,
    run_meta: RunMetadata,
    claude_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)
    # no settings file counts, the user's or the worktree's (see test_claude_hostile_worktree)
    (claude_home / ".claude").mkdir(exist_ok=True)
    (claude_home / ".claude" / "settings.json").write_text(
        json.dumps({"env": {"USER_SETTINGS_CANARY": "CANARY-USER-SETTINGS"}})
    )
    (worktree / ".claude").mkdir()
    (worktree / ".claude" / "settings.json").write_text(
        json.dumps({"env": {"PROJECT_SETTINGS_MARK": "from-project"}})
    )
    server.add(tool_call("Bash", {"command": "env", "description": "show env"}), text("seen"))
    async with create_agent_runner(
        descriptor_for(server), cwd=worktree, run=run_meta, agents_env=AGENTS_ENV
    ) as runner:
        result = await generate_text(runner.model, prompt="run env")
    assert result.text == "seen"
    seen = server.model_requests[1].text()
    for value in [*CANARIES.values(), "CANARY-USER-SETTINGS"]:
        assert value not in seen
    env = _env_names(result.tool_results[0].output)
    assert "PROJECT_SETTINGS_MARK" not in env
    assert env.get("IS_SANDBOX") == "1"
    assert env.get("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC") == "1"
    from jigs_harness_claude import ClaudeHarness

    allowed = {*BASE_ENV, "IS_SANDBOX", *ClaudeHarness.sets_env, *SHELL_AND_CLAUDE}
    unexpected = {n for n in env if n not in allowed and not n.startswith(("LC_", "CLAUDE"))}
    assert "CLAUDE_HOST_ONLY_SETTING" not in env
    assert not unexpected, f"names outside the allowlist reached the agent: {sorted(unexpected)}"


@pytest.mark.parametrize("header", ["x-api-key", "bearer"])
async def test_agent_commands_never_see_the_model_key(
    claude_cli: Path,
    server: ModelServer,
    worktree: Path,
    run_meta: RunMetadata,
    monkeypatch: pytest.MonkeyPatch,
    header: str,
) -> None:
    key = "sk-MODEL-KEY-CANARY-91e3"
    monkeypatch.setenv(KEY_ENV, key)
    server.add(
        tool_call("Bash", {"command": "env; echo done-env", "description": "show env"}),
        tool_call("Bash", {"command": "env | wc -l", "description": "again"}),
        text("seen"),
    )
    descriptor = descriptor_for(server, api_key_header=header)
    async with create_agent_runner(
        descriptor, cwd=worktree, run=run_meta, agents_env=AGENTS_ENV
    ) as runner:
        result = await generate_text(runner.model, prompt="run env")
    assert result.text == "seen"
    seen = server.model_requests[1].text()
    # env did run and printed the environment
    assert "done-env" in seen
    assert "CLAUDE_CODE_SESSION_ID=" in seen
    for request in server.model_requests[1:]:
        assert key not in request.text()
        assert "ANTHROPIC_API_KEY" not in request.text()
        assert "ANTHROPIC_AUTH_TOKEN" not in request.text()
    # the CLI itself still authenticated every request with the key
    sent = "x-api-key" if header == "x-api-key" else "authorization"
    assert all(r.has_header(sent) for r in server.model_requests)
    assert len(server.model_requests) == 3


async def test_step_mcp_list_is_the_whole_universe(
    claude_cli: Path,
    server: ModelServer,
    worktree: Path,
    run_meta: RunMetadata,
    claude_home: Path,
) -> None:
    stray = {"command": "/bin/false", "args": []}
    (claude_home / ".claude.json").write_text(json.dumps({"mcpServers": {"user-stray": stray}}))
    (worktree / ".mcp.json").write_text(json.dumps({"mcpServers": {"repo-stray": stray}}))
    server.add(text("ok"))
    async with create_agent_runner(
        descriptor_for(server), cwd=worktree, run=run_meta, agents_env=AGENTS_ENV
    ) as runner:
        result = await generate_text(runner.model, prompt="hi")
    assert result.provider_metadata["claude"]["mcp_servers"] == []
    assert not [n for n in server.model_requests[0].tool_names() if n.startswith("mcp__")]


async def test_no_outside_connections_through_the_proxy(
    claude_cli: Path,
    server: ModelServer,
    worktree: Path,
    run_meta: RunMetadata,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", server.proxy_url)
    monkeypatch.setenv("https_proxy", server.proxy_url)
    server.add(text("quiet"))
    async with create_agent_runner(
        descriptor_for(server), cwd=worktree, run=run_meta, agents_env=AGENTS_ENV
    ) as runner:
        assert (await generate_text(runner.model, prompt="hi")).text == "quiet"
    server.assert_no_outside_connections()
    # the proxy does catch the CLI's calls home when the opt-out is missing (the test can fail)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(worktree.parent / "home"),
        "IS_SANDBOX": "1",
        "HTTPS_PROXY": server.proxy_url,
        "ANTHROPIC_BASE_URL": server.anthropic_base_url,
        "ANTHROPIC_API_KEY": "sk-test",
        "CLAUDE_CODE_MAX_RETRIES": "0",
    }
    server.add(text("noisy"))
    with anyio.fail_after(30):
        await anyio.run_process(
            [str(claude_cli), "-p", "hi", "--output-format", "json"],
            env=env,
            cwd=worktree,
            check=False,
        )
    assert server.connect_attempts, "the refusing proxy saw nothing from an unguarded CLI"


async def test_declared_mcp_server_reaches_the_agent_with_its_credential(
    claude_cli: Path,
    server: ModelServer,
    worktree: Path,
    run_meta: RunMetadata,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setenv("JIGS_TEST_MCP_TOKEN", "mcp-secret-value")
    descriptor = descriptor_for(
        server,
        mcp_servers={
            "jigsecho": {
                "command": sys.executable,
                "args": [str(Path(__file__).with_name("mcp_echo_server.py"))],
                "env": {"ECHO_SECRET": "JIGS_TEST_MCP_TOKEN"},
                "probe": {"tool": "echo", "arguments": {"text": "probe"}},
                "disabled_tools": ["hidden"],
            }
        },
    )
    server.add(tool_call("mcp__jigsecho__echo", {"text": "MCP-ROUNDTRIP"}), text("used it"))
    async with create_agent_runner(
        descriptor, cwd=worktree, run=run_meta, agents_env=AGENTS_ENV
    ) as runner:
        result = await generate_text(runner.model, prompt="call the echo tool")
    assert result.text == "used it"
    # the declared credential reaches the server; the model key does not
    assert (
        "echo:MCP-ROUNDTRIP secret-set:True model-key-set:False" in server.model_requests[1].text()
    )
    # Claude Code defers MCP tools behind ToolSearch: look for the names anywhere in the body
    first = json.dumps(server.model_requests[0].body)
    assert "mcp__jigsecho__echo" in first
    assert "mcp__jigsecho__hidden" not in first
