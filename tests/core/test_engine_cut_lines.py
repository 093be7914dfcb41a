"""A last line cut short by the end of the stream: a crash when the CLI then exits non-zero,
bad output when it exits 0; a line that is not JSON never shows a secret value."""

from __future__ import annotations

import pytest
from jigs import harnesses
from jigs._lock import worktree_locked
from jigs.errors import AgentCrashedError, AgentOutputError
from jigs.executables import Resolved
from jigs.processes import live_groups
from jigs.steps import run_agent

pytestmark = pytest.mark.anyio


@pytest.fixture
def fake_echo(tmp_path, monkeypatch):
    """``fake_echo(script)``: the echo kind launches ``script`` (a shell body) as its CLI."""
    from jigs_harness_echo._harness import EchoHarness

    def install(body: str) -> None:
        path = tmp_path / "fake-echo"
        path.write_text(f"#!/bin/sh\n{body}")
        path.chmod(0o755)
        monkeypatch.setattr(
            EchoHarness, "resolve_executable", lambda self, env: Resolved(path, "t")
        )

    return install


async def test_a_cut_line_then_a_non_zero_exit_is_a_crash(fake_echo, worktree, run_meta):
    fake_echo(
        'echo \'{"type": "start", "session_id": "s1"}\'\nprintf \'{"type": "te\'\n'
        "echo 'died mid-write' >&2\nexit 3\n"
    )
    with pytest.raises(AgentCrashedError) as info:
        await run_agent(harness=harnesses.echo(), cwd=worktree, prompt="hi", run=run_meta)
    assert info.value.returncode == 3
    assert "died mid-write" in info.value.stderr_tail
    assert info.value.session_id == "s1"
    assert not worktree_locked(worktree)
    assert not live_groups()


async def test_a_cut_line_then_exit_zero_is_bad_output(fake_echo, worktree, run_meta):
    fake_echo('printf \'{"type": "te\'\nexit 0\n')
    with pytest.raises(AgentOutputError, match=r"not a JSON object \(line 1\)"):
        await run_agent(harness=harnesses.echo(), cwd=worktree, prompt="hi", run=run_meta)
    assert not live_groups()


async def test_a_garbage_line_never_shows_a_secret(fake_echo, worktree, run_meta, monkeypatch):
    monkeypatch.setenv("DEPLOY_TOKEN", "tok-very-secret-123")
    fake_echo('echo "oops DEPLOY_TOKEN=$DEPLOY_TOKEN"\nexec sleep 30\n')
    with pytest.raises(AgentOutputError) as info:
        await run_agent(
            harness=harnesses.echo(),
            cwd=worktree,
            prompt="hi",
            run=run_meta,
            agents_env=["DEPLOY_TOKEN"],
        )
    assert "tok-very-secret-123" not in str(info.value)
    assert "DEPLOY_TOKEN=[redacted]" in str(info.value)
    assert not live_groups()
