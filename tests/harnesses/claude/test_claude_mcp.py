"""MCP servers through the real Claude Code CLI: the step's list is the whole MCP universe.

The server is ``tests/fixtures/mcp_server.py`` (a real stdio server built with the ``mcp`` SDK):
``record`` and ``secret_echo`` append their arguments to ``$MCP_RECORD_FILE``, and ``--marker``
writes a file the moment the process starts, so a server that was never started leaves no trace.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from claude_helpers import AGENTS_ENV, descriptor_for
from jigs import RunMetadata
from jigs.models import generate_text
from jigs.steps import Allow, Deny, GatedCall, create_agent_runner
from jigs_testing import ModelServer, text, tool_call
from mcp_configs import records, step_server, stray_server

pytestmark = pytest.mark.anyio


def _stray(marker: Path) -> dict[str, Any]:
    return {"type": "stdio", **stray_server(marker)}


async def test_model_calls_the_record_tool_and_the_server_records_it(
    claude_cli: Path, server: ModelServer, worktree: Path, run_meta: RunMetadata, record_file: Path
) -> None:
    descriptor = descriptor_for(server, mcp_servers={"jigs": step_server()})
    server.add(
        tool_call("mcp__jigs__record", {"note": "REFUSED-NOTE"}),
        tool_call("mcp__jigs__record", {"note": "NOTE-FROM-MODEL-71"}),
        text("recorded"),
    )
    seen: list[GatedCall] = []

    def gate(call: GatedCall) -> Allow | Deny:  # the step's tool gate sees MCP calls too
        seen.append(call)
        return Deny("no such notes") if "REFUSED" in str(call.arguments) else Allow()

    async with create_agent_runner(
        descriptor, cwd=worktree, run=run_meta, agents_env=AGENTS_ENV, approve_tool=gate
    ) as runner:
        result = await generate_text(runner.model, prompt="record a note")
    assert result.text == "recorded"
    # the probe (a just-in-time check) talks to its own copy of the server; only the model's
    # allowed call goes through `record`
    assert records(record_file) == [{"note": "NOTE-FROM-MODEL-71"}]
    assert "no such notes" in server.model_requests[1].text()
    assert "recorded NOTE-FROM-MODEL-71" in server.model_requests[2].text()
    assert [(c.tool, c.category) for c in seen] == [("mcp__jigs__record", "mcp")] * 2


async def test_worktree_and_user_servers_are_never_started(
    claude_cli: Path,
    server: ModelServer,
    worktree: Path,
    run_meta: RunMetadata,
    claude_home: Path,
    record_file: Path,
) -> None:
    # in the worktree: a stray started in the step's sandbox could write nowhere else
    markers = {where: worktree / f".started-{where}" for where in ("mcpjson", "settings", "user")}
    (worktree / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"repo-stray": _stray(markers["mcpjson"])}})
    )
    (worktree / ".claude").mkdir()
    # a worktree's settings file tries every way in (jigs reads none: --setting-sources ""):
    # approve the repo's .mcp.json servers and declare one of their own
    (worktree / ".claude" / "settings.json").write_text(
        json.dumps(
            {
                "enableAllProjectMcpServers": True,
                "enabledMcpjsonServers": ["repo-stray"],
                "mcpServers": {"settings-stray": _stray(markers["settings"])},
            }
        )
    )
    user_stray = {"user-stray": _stray(markers["user"])}
    (claude_home / ".claude.json").write_text(
        json.dumps(
            {
                "mcpServers": user_stray,
                "projects": {
                    str(worktree): {
                        "mcpServers": user_stray,
                        "enabledMcpjsonServers": ["repo-stray"],
                        "hasTrustDialogAccepted": True,
                    }
                },
            }
        )
    )
    descriptor = descriptor_for(server, mcp_servers={"jigs": step_server()})
    server.add(tool_call("mcp__jigs__record", {"note": "STEP-SERVER-WORKS"}), text("done"))
    async with create_agent_runner(
        descriptor, cwd=worktree, run=run_meta, agents_env=AGENTS_ENV
    ) as runner:
        result = await generate_text(runner.model, prompt="record a note")
    assert result.text == "done"
    assert records(record_file) == [{"note": "STEP-SERVER-WORKS"}]
    started = sorted(where for where, marker in markers.items() if marker.exists())
    assert not started, f"MCP servers from outside the step were started: {started}"
    # what Claude Code's init reported, kept in the result's metadata
    servers = result.provider_metadata["claude"]["mcp_servers"]
    assert [s["name"] for s in servers] == ["jigs"]
    body = json.dumps([r.body for r in server.model_requests])
    assert "stray" not in body


async def test_a_disabled_tool_cannot_be_called(
    claude_cli: Path, server: ModelServer, worktree: Path, run_meta: RunMetadata, record_file: Path
) -> None:
    descriptor = descriptor_for(
        server, mcp_servers={"jigs": step_server(disabled_tools=["secret_echo"])}
    )
    server.add(
        tool_call("mcp__jigs__secret_echo", {"text": "LEAKED-VIA-DISABLED-TOOL"}),
        tool_call("mcp__jigs__record", {"note": "ALLOWED-AFTERWARDS"}),
        text("finished"),
    )
    async with create_agent_runner(
        descriptor, cwd=worktree, run=run_meta, agents_env=AGENTS_ENV
    ) as runner:
        result = await generate_text(runner.model, prompt="try both tools")
    assert result.text == "finished"
    # the server never saw the disabled call; the enabled one right after it went through
    assert records(record_file) == [{"note": "ALLOWED-AFTERWARDS"}]
    first = json.dumps(server.model_requests[0].body)
    assert "mcp__jigs__record" in first
    assert "mcp__jigs__secret_echo" not in first
    # the model was told the call failed: an error tool result, not the echoed text
    refusal = _tool_results(server.model_requests[1].body)
    assert len(refusal) == 1
    assert refusal[0].get("is_error") is True
    assert "LEAKED-VIA-DISABLED-TOOL" not in json.dumps(refusal)


def _tool_results(body: Any) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks of the last user message of an Anthropic Messages body."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    content = last.get("content")
    if not isinstance(content, list):
        return []
    return [block for block in content if block.get("type") == "tool_result"]
