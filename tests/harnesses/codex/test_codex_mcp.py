"""The step's MCP servers reach Codex through the private home's config.toml, and nothing else."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from jigs.models import generate_text
from jigs.steps import Allow, Deny, GatedCall, create_agent_runner
from jigs_testing import text, tool_call

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli("codex")]

SERVER = str(Path(__file__).with_name("mcp_codex_server.py"))


async def test_declared_stdio_server_is_the_whole_mcp_universe(
    model_server, descriptor, worktree, run_meta, monkeypatch
):
    monkeypatch.setenv("STEP_LOOKUP_TOKEN", "mcp-token-value-77")
    harness = descriptor(
        mcp_servers={
            "lookup": {
                "command": sys.executable,
                "args": [SERVER],
                "env": {"LOOKUP_TOKEN": "STEP_LOOKUP_TOKEN"},
                "probe": {"tool": "lookup", "arguments": {"key": "probe"}},
                "disabled_tools": ["forbidden"],
            }
        }
    )
    model_server.add(
        tool_call("mcp__lookup__lookup", {"key": "refused"}),
        tool_call("mcp__lookup__lookup", {"key": "alpha"}),
        tool_call("exec_command", {"cmd": "env"}),
        text("looked up"),
    )
    seen: list[GatedCall] = []

    def gate(call: GatedCall) -> Allow | Deny:  # a gated step: Codex asks about MCP calls too
        seen.append(call)
        return Deny("not that key") if call.arguments.get("key") == "refused" else Allow()

    async with create_agent_runner(
        harness, cwd=worktree, run=run_meta, agents_env=[], approve_tool=gate
    ) as runner:
        result = await generate_text(runner.model, prompt="look alpha up")
    assert result.text == "looked up"
    first, after_refusal, second, third = model_server.model_requests
    assert "value-of-refused" not in after_refusal.text()
    assert [(c.tool, c.category, c.arguments.get("key")) for c in seen[:2]] == [
        ("mcp__lookup__lookup", "mcp", "refused"),
        ("mcp__lookup__lookup", "mcp", "alpha"),
    ]
    offered = first.tool_names()
    assert "mcp__lookup__lookup" in offered
    assert "mcp__lookup__forbidden" not in offered
    assert not [name for name in offered if name.startswith("mcp__") and "lookup" not in name]
    assert "value-of-alpha token-ok:True" in second.text()
    # neither the step's credential nor its renamed copy reaches the agent's own commands
    assert "mcp-token-value-77" not in third.text()
    assert "PATH=" in third.text()
    calls = [c.name for c in result.tool_calls]
    assert calls == ["mcp__lookup__lookup", "mcp__lookup__lookup", "exec_command"]
