"""MCP servers through the real Pi CLI (built-in MCP, Pi 1.6+): the step's list is the whole MCP
universe.

The server is ``tests/fixtures/mcp_server.py`` (a real stdio server built with the ``mcp`` SDK):
``record`` and ``secret_echo`` append their arguments to ``$MCP_RECORD_FILE``, and ``--marker``
writes a file the moment the process starts, so a server that was never started leaves no trace.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from jigs import RunMetadata
from jigs.sandbox._proctree import processes_under
from jigs.steps import Allow, Deny, GatedCall, run_agent
from jigs_testing import ModelServer, text, tool_call
from mcp_configs import records, step_server, stray_server, stray_toml

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("pi_cli", "model_key")]


def _tool_messages(body: Any) -> list[dict[str, Any]]:
    """The ``tool`` messages of a Chat Completions request body."""
    return [m for m in body.get("messages") or [] if m.get("role") == "tool"]


def _declared_tools(body: Any) -> list[str]:
    return [t.get("function", {}).get("name", "") for t in body.get("tools") or []]


async def test_model_calls_the_record_tool_and_the_server_records_it(
    pi_descriptor: Callable[..., dict[str, Any]],
    worktree: Path,
    run_meta: RunMetadata,
    record_file: Path,
) -> None:
    """Through the step's tool gate (Pi in RPC mode): a refused call never reaches the server."""
    script = [
        tool_call("mcp__jigs__record", {"note": "REFUSED-NOTE"}),
        tool_call("mcp__jigs__record", {"note": "NOTE-FROM-MODEL-42"}),
        text("recorded"),
    ]
    seen: list[GatedCall] = []

    def gate(call: GatedCall) -> Allow | Deny:
        seen.append(call)
        return Deny("no such notes") if "REFUSED" in str(call.arguments) else Allow()

    async with ModelServer(script) as s:
        harness = pi_descriptor(s.openai_base_url, mcp_servers={"jigs": step_server()})
        result = await run_agent(
            harness=harness, cwd=worktree, prompt="record it", run=run_meta, approve_tool=gate
        )
        requests = s.model_requests
    assert result.text == "recorded"
    # the probe talks to its own copy of the server; only the model's call goes through `record`
    assert records(record_file) == [{"note": "NOTE-FROM-MODEL-42"}]
    assert "mcp__jigs__record" in _declared_tools(requests[0].body)
    assert "no such notes" in json.dumps(_tool_messages(requests[1].body))
    assert "recorded NOTE-FROM-MODEL-42" in json.dumps(_tool_messages(requests[2].body))
    assert [(c.tool, c.category) for c in seen] == [("mcp__jigs__record", "mcp")] * 2


async def test_a_tools_allowlist_keeps_the_declared_servers(
    pi_descriptor: Callable[..., dict[str, Any]],
    worktree: Path,
    run_meta: RunMetadata,
    record_file: Path,
) -> None:
    """``tools`` restricts Pi's own tools; the step's servers stay callable."""
    script = [tool_call("mcp__jigs__record", {"note": "WITH-ALLOWLIST"}), text("ok")]
    async with ModelServer(script) as s:
        harness = pi_descriptor(
            s.openai_base_url, tools=["read"], mcp_servers={"jigs": step_server()}
        )
        result = await run_agent(harness=harness, cwd=worktree, prompt="record", run=run_meta)
        declared = _declared_tools(s.model_requests[0].body)
    assert result.text == "ok"
    assert records(record_file) == [{"note": "WITH-ALLOWLIST"}]
    assert "read" in declared
    assert "bash" not in declared


async def test_worktree_and_user_servers_are_never_started(
    pi_descriptor: Callable[..., dict[str, Any]],
    worktree: Path,
    run_meta: RunMetadata,
    record_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    # in the worktree: a stray started in the step's sandbox could write nowhere else
    markers = {
        w: worktree / f".started-{w}"
        for w in ("pi-project", "pi-user", "mcpjson", "claude", "codex")
    }
    (worktree / ".pi").mkdir()
    (worktree / ".pi" / "mcp.json").write_text(
        json.dumps({"mcpServers": {"repo-stray": stray_server(markers["pi-project"])}})
    )
    (worktree / ".pi" / "settings.json").write_text(json.dumps({"extensions": ["+builtin:mcp"]}))
    (worktree / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"mcpjson-stray": stray_server(markers["mcpjson"])}})
    )
    (worktree / ".claude").mkdir()
    (worktree / ".claude" / "settings.json").write_text(
        json.dumps({"mcpServers": {"claude-stray": stray_server(markers["claude"])}})
    )
    (worktree / ".codex").mkdir()
    (worktree / ".codex" / "config.toml").write_text(stray_toml("codex-stray", markers["codex"]))
    (home / ".pi" / "agent").mkdir(parents=True)
    (home / ".pi" / "agent" / "mcp.json").write_text(
        json.dumps({"mcpServers": {"user-stray": stray_server(markers["pi-user"])}})
    )
    script = [tool_call("mcp__jigs__record", {"note": "STEP-SERVER-WORKS"}), text("done")]
    async with ModelServer(script) as s:
        harness = pi_descriptor(s.openai_base_url, mcp_servers={"jigs": step_server()})
        result = await run_agent(harness=harness, cwd=worktree, prompt="record", run=run_meta)
        bodies = json.dumps([r.body for r in s.model_requests])
    assert result.text == "done"
    assert records(record_file) == [{"note": "STEP-SERVER-WORKS"}]
    started = sorted(where for where, marker in markers.items() if marker.exists())
    assert not started, f"MCP servers from outside the step were started: {started}"
    assert "stray" not in bodies


async def test_without_declared_servers_nothing_is_started(
    pi_descriptor: Callable[..., dict[str, Any]],
    worktree: Path,
    run_meta: RunMetadata,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--no-mcp``: with no step servers, Pi's MCP is off, whatever the worktree or HOME say."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    markers = {w: worktree / f".started-{w}" for w in ("project", "user")}
    (worktree / ".pi").mkdir()
    (worktree / ".pi" / "mcp.json").write_text(
        json.dumps({"mcpServers": {"repo-stray": stray_server(markers["project"])}})
    )
    (home / ".pi" / "agent").mkdir(parents=True)
    (home / ".pi" / "agent" / "mcp.json").write_text(
        json.dumps({"mcpServers": {"user-stray": stray_server(markers["user"])}})
    )
    async with ModelServer([text("plain")]) as s:
        result = await run_agent(
            harness=pi_descriptor(s.openai_base_url), cwd=worktree, prompt="hi", run=run_meta
        )
        tools = _declared_tools(s.model_requests[0].body)
    assert result.text == "plain"
    assert not [m for m in markers.values() if m.exists()]
    assert not [t for t in tools if t.startswith("mcp__")]


async def test_a_disabled_tool_cannot_be_called(
    pi_descriptor: Callable[..., dict[str, Any]],
    worktree: Path,
    run_meta: RunMetadata,
    record_file: Path,
) -> None:
    script = [
        tool_call("mcp__jigs__secret_echo", {"text": "LEAKED-VIA-DISABLED-TOOL"}),
        tool_call("mcp__jigs__record", {"note": "ALLOWED-AFTERWARDS"}),
        text("finished"),
    ]
    async with ModelServer(script) as s:
        harness = pi_descriptor(
            s.openai_base_url, mcp_servers={"jigs": step_server(disabled_tools=["secret_echo"])}
        )
        result = await run_agent(harness=harness, cwd=worktree, prompt="try both", run=run_meta)
        requests = s.model_requests
    assert result.text == "finished"
    # the server never saw the disabled call; the enabled one right after it went through
    assert records(record_file) == [{"note": "ALLOWED-AFTERWARDS"}]
    declared = _declared_tools(requests[0].body)
    assert "mcp__jigs__record" in declared
    assert "mcp__jigs__secret_echo" not in declared
    refusal = _tool_messages(requests[1].body)
    assert len(refusal) == 1
    assert "LEAKED-VIA-DISABLED-TOOL" not in json.dumps(refusal)


async def test_cancellation_stops_the_mcp_server(
    pi_descriptor: Callable[..., dict[str, Any]],
    worktree: Path,
    run_meta: RunMetadata,
    record_file: Path,
) -> None:
    """Pi starts stdio servers in their own process group; cancelling the turn must not leave
    the server running."""
    marker = worktree / ".started-step"
    async with ModelServer([text("too late", delay=20)]) as s:
        harness = pi_descriptor(
            s.openai_base_url, mcp_servers={"jigs": step_server("--marker", str(marker))}
        )
        with anyio.move_on_after(15):
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    lambda: run_agent(harness=harness, cwd=worktree, prompt="wait", run=run_meta)
                )
                while not s.model_requests:
                    await anyio.sleep(0.05)
                tg.cancel_scope.cancel()
    assert marker.exists(), "Pi never started the step's server"
    assert json.loads(marker.read_text())["pid"]
    # the server runs in the step's PID namespace: its pid means nothing here; its cwd does
    deadline = time.monotonic() + 5
    while processes_under(worktree) and time.monotonic() < deadline:
        await anyio.sleep(0.05)
    assert not processes_under(worktree), "the MCP server outlived the cancelled turn by 5 s"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return True


async def test_the_server_gets_its_credential_but_not_the_model_key(
    pi_descriptor: Callable[..., dict[str, Any]],
    worktree: Path,
    run_meta: RunMetadata,
    record_file: Path,
    model_key: str,
) -> None:
    script = [tool_call("mcp__jigs__environ", {}), text("seen")]
    async with ModelServer(script) as s:
        harness = pi_descriptor(s.openai_base_url, mcp_servers={"jigs": step_server("--environ")})
        result = await run_agent(harness=harness, cwd=worktree, prompt="env", run=run_meta)
        seen = _tool_messages(s.model_requests[1].body)
    assert result.text == "seen"
    names = json.loads(seen[0]["content"])
    assert "MCP_RECORD_FILE" in names
    assert (
        "JIGS_TEST_OPENAI_KEY" not in names
    )  # present but empty: Pi passes its env on, jigs blanks the key
    assert model_key not in json.dumps([r.body for r in s.model_requests])


def test_mcp_json_names_credentials_and_hides_disabled_tools() -> None:
    from jigs_harness_pi import PiDescriptor
    from jigs_harness_pi._mcp import allowed_tools, excluded_tools, mcp_json

    d = PiDescriptor.from_data(
        {
            "model": {
                "type": "openai-compatible",
                "name": "l",
                "base_url": "http://h/v1",
                "model": "m",
                "api_key_env": "MODEL_KEY",
            },
            "mcp_servers": {
                "my-docs": {
                    "url": "https://docs.example/mcp",
                    "bearer_token_env": "DOCS_TOKEN",
                    "headers": {"X-Team": "TEAM_ID"},
                    "probe": {"tool": "ping"},
                    "disabled_tools": ["delete.all"],
                },
                "gh": {
                    "command": "gh-mcp",
                    "args": ["stdio"],
                    "env": {"GH_TOKEN": "GH_PAT"},
                    "probe": {"tool": "me"},
                },
            },
        }
    )
    assert d.env_names() == {"MODEL_KEY", "DOCS_TOKEN", "TEAM_ID", "GH_PAT"}
    data = mcp_json(d.mcp_servers, hidden_env=["MODEL_KEY"])
    assert data == {
        "autoEnableCodemode": False,
        "mcpServers": {
            "my-docs": {
                "type": "http",
                "url": "https://docs.example/mcp",
                "headers": {"X-Team": "${TEAM_ID}", "Authorization": "Bearer ${DOCS_TOKEN}"},
                "exposure": "direct",
                "toolExposure": {"delete.all": "hidden"},
            },
            "gh": {
                "command": "gh-mcp",
                "args": ["stdio"],
                "env": {"MODEL_KEY": "", "GH_TOKEN": "${GH_PAT}"},
                "exposure": "direct",
            },
        },
    }
    assert excluded_tools(d.mcp_servers) == ["mcp__my_docs__delete_all"]
    assert allowed_tools(["read"], d.mcp_servers) == ["read", "mcp__my_docs__*", "mcp__gh__*"]
    assert allowed_tools([], d.mcp_servers) == ["mcp__my_docs__*", "mcp__gh__*"]
    assert allowed_tools(["+grep", "-bash"], d.mcp_servers) == ["+grep", "-bash"]
