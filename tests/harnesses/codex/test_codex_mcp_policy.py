"""MCP servers through the real Codex CLI: the step's list is the whole MCP universe.

The server is ``tests/fixtures/mcp_server.py`` (a real stdio server built with the ``mcp`` SDK):
``record`` and ``secret_echo`` append their arguments to ``$MCP_RECORD_FILE``, and ``--marker``
writes a file the moment the process starts, so a server that was never started leaves no trace.
Codex offers a server's tools to the model in the Responses namespace ``mcp__<server>``.
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
from codex_helpers import KEY_ENV, KEY_VALUE, alive
from jigs import RunMetadata
from jigs.errors import AgentTurnError, JitCheckError
from jigs.models import generate_text
from jigs.steps import create_agent_runner
from jigs_testing import ModelServer, text, tool_call
from mcp_configs import records, step_server, stray_server, stray_toml

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli("codex")]


def _namespaces(body: Any) -> dict[str, list[str]]:
    """The Responses ``namespace`` tools of a request body: name -> inner tool names."""
    return {
        tool["name"]: [inner.get("name") for inner in tool.get("tools") or []]
        for tool in body.get("tools") or []
        if tool.get("type") == "namespace"
    }


def _input_items(body: Any, kind: str) -> list[dict[str, Any]]:
    return [item for item in body.get("input") or [] if item.get("type") == kind]


async def test_model_calls_the_record_tool_and_the_server_records_it(
    model_server: ModelServer,
    descriptor: Callable[..., Any],
    worktree: Path,
    run_meta: RunMetadata,
    record_file: Path,
) -> None:
    model_server.add(tool_call("mcp__jigs__record", {"note": "NOTE-FROM-MODEL-71"}), text("ok"))
    harness = descriptor(mcp_servers={"jigs": step_server()})
    async with create_agent_runner(harness, cwd=worktree, run=run_meta, agents_env=[]) as runner:
        result = await generate_text(runner.model, prompt="record a note")
    assert result.text == "ok"
    # the probe (a just-in-time check) talks to its own copy of the server; only the model's
    # call goes through `record`
    assert records(record_file) == [{"note": "NOTE-FROM-MODEL-71"}]
    first, second = model_server.model_requests
    assert sorted(_namespaces(first.body)["mcp__jigs"]) == ["probe", "record", "secret_echo"]
    # the call went back to Codex in its namespace, and the server's answer came back to the model
    (call,) = _input_items(second.body, "function_call")
    assert (call["namespace"], call["name"]) == ("mcp__jigs", "record")
    (output,) = _input_items(second.body, "function_call_output")
    assert output["call_id"] == call["call_id"]
    assert "recorded NOTE-FROM-MODEL-71" in json.dumps(output)
    assert [c.name for c in result.tool_calls] == ["mcp__jigs__record"]
    assert result.tool_calls[0].arguments == {"note": "NOTE-FROM-MODEL-71"}


async def test_servers_declared_outside_the_step_are_never_started(
    model_server: ModelServer,
    descriptor: Callable[..., Any],
    worktree: Path,
    run_meta: RunMetadata,
    record_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    # in the worktree: a stray started in the step's sandbox could write nowhere else
    markers = {w: worktree / f".started-{w}" for w in ("mcpjson", "claude", "user-codex")}
    (worktree / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"mcpjson-stray": stray_server(markers["mcpjson"])}})
    )
    (worktree / ".claude").mkdir()
    (worktree / ".claude" / "settings.json").write_text(
        json.dumps({"mcpServers": {"claude-stray": stray_server(markers["claude"])}})
    )
    # the operator's own Codex config: the private CODEX_HOME never reads it
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text(stray_toml("user-stray", markers["user-codex"]))
    model_server.add(tool_call("mcp__jigs__record", {"note": "STEP-SERVER-WORKS"}), text("done"))
    harness = descriptor(mcp_servers={"jigs": step_server()})
    async with create_agent_runner(harness, cwd=worktree, run=run_meta, agents_env=[]) as runner:
        result = await generate_text(runner.model, prompt="record a note")
    assert result.text == "done"
    assert records(record_file) == [{"note": "STEP-SERVER-WORKS"}]
    started = sorted(where for where, marker in markers.items() if marker.exists())
    assert not started, f"MCP servers from outside the step were started: {started}"
    for request in model_server.model_requests:
        assert [n for n in _namespaces(request.body) if n.startswith("mcp__")] == ["mcp__jigs"]
        assert not [n for n in request.tool_names() if "stray" in n]


async def test_a_worktree_codex_config_with_servers_fails_before_anything_starts(
    model_server: ModelServer,
    descriptor: Callable[..., Any],
    worktree: Path,
    run_meta: RunMetadata,
    record_file: Path,
) -> None:
    marker = worktree / ".started-codex-project"
    step_marker = worktree / ".started-step"
    (worktree / ".codex").mkdir()
    (worktree / ".codex" / "config.toml").write_text(stray_toml("repo-stray", marker))
    harness = descriptor(mcp_servers={"jigs": step_server("--marker", str(step_marker))})
    with pytest.raises(JitCheckError) as caught:
        async with create_agent_runner(harness, cwd=worktree, run=run_meta, agents_env=[]):
            pytest.fail("the runner opened despite the worktree's MCP servers")
    assert "repo-stray" in str(caught.value)
    assert "mcp_servers" in str(caught.value)
    assert not marker.exists()
    assert not model_server.model_requests


async def test_a_disabled_tool_cannot_be_called(
    model_server: ModelServer,
    descriptor: Callable[..., Any],
    worktree: Path,
    run_meta: RunMetadata,
    record_file: Path,
) -> None:
    model_server.add(
        tool_call("mcp__jigs__secret_echo", {"text": "LEAKED-VIA-DISABLED-TOOL"}),
        tool_call("mcp__jigs__record", {"note": "ALLOWED-AFTERWARDS"}),
        text("finished"),
    )
    harness = descriptor(mcp_servers={"jigs": step_server(disabled_tools=["secret_echo"])})
    async with create_agent_runner(harness, cwd=worktree, run=run_meta, agents_env=[]) as runner:
        result = await generate_text(runner.model, prompt="try both tools")
    assert result.text == "finished"
    # the server never saw the disabled call; the enabled one right after it went through
    assert records(record_file) == [{"note": "ALLOWED-AFTERWARDS"}]
    first, second, _ = model_server.model_requests
    assert sorted(_namespaces(first.body)["mcp__jigs"]) == ["probe", "record"]
    # the model was told the call failed (Codex: "unsupported call"), not the echoed text
    (call,) = _input_items(second.body, "function_call")
    assert call["name"] == "secret_echo"
    (refusal,) = _input_items(second.body, "function_call_output")
    assert refusal["call_id"] == call["call_id"]
    assert "unsupported call" in json.dumps(refusal["output"])
    assert "LEAKED-VIA-DISABLED-TOOL" not in json.dumps(refusal)
    assert [c.name for c in result.tool_calls] == ["mcp__jigs__record"]


async def test_a_server_that_does_not_start_in_codex_fails_the_step_loudly(
    model_server: ModelServer,
    descriptor: Callable[..., Any],
    worktree: Path,
    run_meta: RunMetadata,
    record_file: Path,
) -> None:
    """Every step server is ``required`` with a bounded startup: one that passes the probe but
    then hangs under Codex fails the runner's opening within the bound (it is never silently
    dropped, leaving the model without its tools), and the hung server is stopped."""
    # in the worktree: the server Codex starts runs in the step's sandbox, and must see the
    # file the probe's copy made and be able to write its marker
    marker = worktree / ".started"
    args = ("--hang-on-restart", str(worktree / ".probed"), "--marker", str(marker))
    # Codex gets half the descriptor's startup_timeout per server: 2 s here
    harness = descriptor(mcp_servers={"jigs": step_server(*args)}, startup_timeout=4)
    started = time.monotonic()
    with pytest.raises(AgentTurnError) as caught:
        async with create_agent_runner(harness, cwd=worktree, run=run_meta, agents_env=[]):
            pytest.fail("the runner opened without its MCP server")
    elapsed = time.monotonic() - started
    message = str(caught.value)
    assert "could not start the step's MCP server" in message
    assert "within 2s" in message
    assert "jigs: timed out" in message  # Codex's own words, naming the server
    assert elapsed < 4 + 3, f"took {elapsed:.1f}s"
    assert not model_server.model_requests
    assert json.loads(marker.read_text())["pid"]  # it did start under Codex
    # the marker's pid is the one inside the step's PID namespace (another process's number
    # out here): look for the hung server by its unique command line instead
    unique = str(worktree / ".probed")
    deadline = time.monotonic() + 5
    while _running(unique) and time.monotonic() < deadline:
        await anyio.sleep(0.05)
    assert not _running(unique), "the hung MCP server outlived the failed step"


def _running(fragment: str) -> list[int]:
    """Live processes whose command line holds ``fragment``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if fragment in cmdline and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


async def test_the_server_gets_the_steps_environment_but_not_the_model_key(
    model_server: ModelServer,
    descriptor: Callable[..., Any],
    worktree: Path,
    run_meta: RunMetadata,
    record_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The probe ran the server with the step's environment; under Codex (which would give a
    stdio server only HOME, PATH and a few more) it sees the same, minus the model key."""
    monkeypatch.setenv("JIGS_TEST_STEP_EXTRA", "extra-value")
    model_server.add(tool_call("mcp__jigs__environ", {}), text("seen"))
    harness = descriptor(mcp_servers={"jigs": step_server("--environ")})
    async with create_agent_runner(
        harness, cwd=worktree, run=run_meta, agents_env=["JIGS_TEST_STEP_EXTRA"]
    ) as runner:
        result = await generate_text(runner.model, prompt="env")
    assert result.text == "seen"
    (output,) = _input_items(model_server.model_requests[1].body, "function_call_output")
    names = json.loads(json.loads(output["output"].split("Output:\n", 1)[1])["result"])
    assert {"MCP_RECORD_FILE", "JIGS_TEST_STEP_EXTRA", "HTTPS_PROXY", "PATH"} <= set(names)
    assert KEY_ENV not in names
    assert "CODEX_HOME" not in names
    assert KEY_VALUE not in json.dumps([r.body for r in model_server.model_requests])


async def test_system_wide_codex_config_with_servers_is_refused(tmp_path: Path) -> None:
    """Codex reads ``/etc/codex/config.toml`` whatever CODEX_HOME says (seen with the real CLI:
    its servers started beside the step's); the check refuses one that declares servers, and
    holds ``managed_config.toml`` (which overrides the private home) to the worktree's rules."""
    from jigs.checks import CheckFailure, CheckOk
    from jigs_harness_codex._checks import system_config_check

    assert isinstance(await system_config_check(tmp_path).run(), CheckOk)
    (tmp_path / "config.toml").write_text("[analytics]\nenabled = false\n")
    assert isinstance(await system_config_check(tmp_path).run(), CheckOk)
    (tmp_path / "config.toml").write_text(stray_toml("sys-stray", tmp_path / "m"))
    failure = await system_config_check(tmp_path).run()
    assert isinstance(failure, CheckFailure)
    assert "sys-stray" in failure.reason
    assert "system-wide" in failure.repair
    (tmp_path / "config.toml").unlink()
    (tmp_path / "managed_config.toml").write_text("allow_login_shell = true\n")
    failure = await system_config_check(tmp_path).run()
    assert isinstance(failure, CheckFailure)
    assert "allow_login_shell" in failure.reason


async def test_a_resumed_thread_gets_the_steps_servers(
    model_server: ModelServer,
    descriptor: Callable[..., Any],
    worktree: Path,
    run_meta: RunMetadata,
    record_file: Path,
) -> None:
    """``thread/resume`` starts the (required) servers too: a later step calls the tool."""
    model_server.add(
        text("first"), tool_call("mcp__jigs__record", {"note": "AFTER-RESUME"}), text("second")
    )
    harness = descriptor(mcp_servers={"jigs": step_server()})
    async with create_agent_runner(harness, cwd=worktree, run=run_meta, agents_env=[]) as runner:
        session = runner.session_from(await generate_text(runner.model, prompt="one"))
    assert session is not None
    async with create_agent_runner(
        harness, cwd=worktree, run=run_meta, resume=session, agents_env=[]
    ) as runner:
        result = await generate_text(runner.model, prompt="two")
    assert result.text == "second"
    assert records(record_file) == [{"note": "AFTER-RESUME"}]
