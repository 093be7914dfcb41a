"""MCP probes against a real stdio server written with the mcp SDK."""

import json
import sys
import time
from pathlib import Path

import pytest
from jigs import harnesses
from jigs.checks import CheckFailure, CheckOk
from jigs.engine._mcp_probe import PHASE_TIMEOUT, probe_server
from jigs.errors import JitCheckError
from jigs.mcp import McpStdioServer
from jigs.steps import create_agent_runner

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).resolve().parents[1] / "fixtures" / "mcp_server.py")


def stdio(*flags: str, env: dict[str, str] | None = None, probe: str = "probe") -> McpStdioServer:
    return McpStdioServer(
        command=sys.executable, args=(SERVER, *flags), env=env or {}, probe={"tool": probe}
    )


async def test_a_healthy_server_passes_with_the_worktree_as_cwd(tmp_path):
    marker = tmp_path / "marker.json"
    result = await probe_server(
        "files", stdio("--marker", str(marker)), cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}
    )
    assert isinstance(result, CheckOk), result
    assert "probe 'probe' answered" in result.detail
    assert f'"cwd": "{tmp_path}"' in marker.read_text()


async def test_a_server_that_never_answers_fails_within_the_probe_timeout(tmp_path):
    started = time.perf_counter()
    result = await probe_server("stuck", stdio("--hang"), cwd=tmp_path, env={}, timeout=2)
    elapsed = time.perf_counter() - started
    assert isinstance(result, CheckFailure)
    assert "did not answer within" in result.reason
    assert "(initialize)" in result.reason
    assert elapsed < 2 + 3
    assert PHASE_TIMEOUT < 30  # seconds, not the CLIs' 30 s


async def test_a_server_without_the_probe_tool_lists_what_it_has(tmp_path):
    result = await probe_server("p", stdio("--no-probe"), cwd=tmp_path, env={})
    assert isinstance(result, CheckFailure)
    assert "exposes no tool 'probe' (it exposes: record, secret_echo)" in result.reason


async def test_an_error_result_fails_the_probe(tmp_path):
    result = await probe_server("p", stdio("--failing-probe"), cwd=tmp_path, env={})
    assert isinstance(result, CheckFailure)
    assert "answered its probe tool 'probe' with an error" in result.reason


async def test_a_missing_credential_variable_is_named(tmp_path):
    server = stdio(env={"API_TOKEN": "FILES_API_TOKEN"})
    result = await probe_server("files", server, cwd=tmp_path, env={})
    assert isinstance(result, CheckFailure)
    assert result.reason.startswith("needs FILES_API_TOKEN")


async def test_stderr_tail_is_reported_with_secret_values_redacted(tmp_path):
    secret = "hunter2-very-secret"
    server = stdio("--stderr", f"booting with {secret}", "--hang", env={"T": "MY_TOKEN"})
    result = await probe_server("s", server, cwd=tmp_path, env={"MY_TOKEN": secret}, timeout=2)
    assert isinstance(result, CheckFailure)
    assert "booting with [redacted]" in result.reason
    assert secret not in result.reason


async def test_a_failing_probe_fails_the_step_with_jit_check_error_before_the_lock(
    worktree, run_meta
):
    descriptor = harnesses.echo(
        mcp_servers={
            "broken": {
                "command": sys.executable,
                "args": [SERVER, "--no-probe"],
                "probe": {"tool": "probe"},
            },
        }
    )
    with pytest.raises(JitCheckError) as info:
        await create_agent_runner(descriptor, cwd=worktree, run=run_meta)
    assert str(info.value).startswith("MCP server broken: connected, but it exposes no tool")
    from jigs.policy._lock import WorktreeLock

    probe = WorktreeLock(worktree, "x")
    probe.acquire()
    probe.release()


@pytest.fixture
def anyio_backend() -> str:
    """The probe is the mcp SDK's code: one backend is enough here."""
    return "asyncio"


async def test_a_probed_server_gets_its_own_credential_but_not_the_kinds_private_names(tmp_path):
    report = tmp_path / "env.json"
    env = {"PATH": "/usr/bin:/bin", "OTHER_SERVER_TOKEN": "other-secret", "MY_TOKEN": "mine"}
    server = stdio("--env-report", str(report), env={"CHILD_TOKEN": "MY_TOKEN"})
    result = await probe_server(
        "s", server, cwd=tmp_path, env=env, private=frozenset({"OTHER_SERVER_TOKEN", "MY_TOKEN"})
    )
    assert isinstance(result, CheckOk), result
    names = set(json.loads(report.read_text()))
    assert "CHILD_TOKEN" in names
    assert "PATH" in names
    assert not names & {"OTHER_SERVER_TOKEN", "MY_TOKEN"}
