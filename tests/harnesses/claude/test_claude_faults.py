"""Failures the claude kind owns: a missing CLI, stale or foreign sessions, API errors and an
unreachable endpoint as Claude Code reports them, and the descriptor checks (key, login,
``IS_SANDBOX``). The turn engine's faults (a crash, garbage, huge lines, hangs, deadlines) are
tested once for every kind: tests/core/test_turn_faults.py (the echo kind) and the conformance
kit's ``bad_output``, ``hung_endpoint``, ``hung_cli``, ``turn_deadline`` and ``cancelled_turn``,
which test_conformance_kinds runs on the real CLI."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest
from claude_helpers import AGENTS_ENV, descriptor_for
from jigs import AgentSessionRef, RunMetadata
from jigs.errors import (
    AgentSessionError,
    AgentTurnError,
    CheckFailedError,
    CliNotFoundError,
)
from jigs.processes import live_groups
from jigs.steps import create_agent_runner, run_agent
from jigs_testing import ModelServer, error, text

pytestmark = pytest.mark.anyio

FAKE = Path(__file__).with_name("fake_claude.py")


@pytest.fixture
def fake_cli(tmp_path: Path, claude_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake ``claude`` in its own dir, named by ``JIGS_CLAUDE_EXECUTABLE``."""
    where = tmp_path / "fakecli"
    where.mkdir()
    exe = where / "claude"
    exe.write_text(f"#!{sys.executable}\n" + FAKE.read_text())
    exe.chmod(0o755)
    monkeypatch.setenv("JIGS_CLAUDE_EXECUTABLE", str(exe))
    return exe


async def run_fake(worktree: Path, run_meta: RunMetadata, mode: str, **settings: object) -> str:
    descriptor = {"kind": "claude", "api_key_env": "JIGS_TEST_ANTHROPIC_KEY", **settings}
    result = await run_agent(
        harness=descriptor,
        cwd=worktree,
        prompt=f"please {mode}",
        run=run_meta,
        agents_env=AGENTS_ENV,
    )
    return result.text


async def assert_worktree_free(worktree: Path, run_meta: RunMetadata) -> None:
    """A second runner can take the worktree at once (the first one released its lock)."""
    async with create_agent_runner(
        {"kind": "claude", "api_key_env": "JIGS_TEST_ANTHROPIC_KEY"},
        cwd=worktree,
        run=run_meta,
        agents_env=AGENTS_ENV,
    ):
        pass


async def test_missing_cli_is_cli_not_found(
    fake_cli: Path, worktree: Path, run_meta: RunMetadata, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JIGS_CLAUDE_EXECUTABLE", str(worktree / "no-such-claude"))
    with pytest.raises(CliNotFoundError) as caught:
        await run_fake(worktree, run_meta, "ok")
    assert "JIGS_CLAUDE_EXECUTABLE" in str(caught.value)
    assert "pip install jigs-harness-claude" in str(caught.value)
    monkeypatch.setenv("JIGS_CLAUDE_EXECUTABLE", str(fake_cli))
    await assert_worktree_free(worktree, run_meta)


async def test_stale_resume_raises_before_any_process_starts(
    fake_cli: Path, worktree: Path, run_meta: RunMetadata
) -> None:
    marker = worktree / ".fake-claude-marker"
    descriptor = {"kind": "claude", "api_key_env": "JIGS_TEST_ANTHROPIC_KEY"}
    from jigs import harnesses

    stale = AgentSessionRef(
        harness="claude", id=str(uuid.uuid4()), descriptor=harnesses.load(descriptor).describe()
    )
    with pytest.raises(AgentSessionError) as caught:
        await run_agent(
            harness=descriptor,
            cwd=worktree,
            prompt="again",
            run=run_meta,
            resume=stale,
            agents_env=AGENTS_ENV,
        )
    assert caught.value.session_id == stale.id
    assert str(worktree) in str(caught.value)
    assert not marker.exists(), "the CLI was started for a stale session"
    for bad, message in (("not-a-uuid", "not a Claude Code session id"), ("../../etc", "'/'")):
        not_uuid = stale.replace(id=bad)
        with pytest.raises(AgentSessionError, match=message):
            await run_agent(
                harness=descriptor,
                cwd=worktree,
                prompt="again",
                run=run_meta,
                resume=not_uuid,
                agents_env=AGENTS_ENV,
            )
    assert not marker.exists()
    await assert_worktree_free(worktree, run_meta)


async def test_session_of_another_worktree_is_stale(
    claude_cli: Path, server: ModelServer, worktree: Path, tmp_path: Path, run_meta: RunMetadata
) -> None:
    server.add(text("first"))
    first = await run_agent(
        harness=descriptor_for(server),
        cwd=worktree,
        prompt="one",
        run=run_meta,
        agents_env=AGENTS_ENV,
    )
    other = tmp_path / "other-worktree"
    other.mkdir()
    with pytest.raises(AgentSessionError, match="missing for"):
        await run_agent(
            harness=descriptor_for(server),
            cwd=other,
            prompt="two",
            run=run_meta,
            resume=first.session,
            agents_env=AGENTS_ENV,
        )
    assert len(server.model_requests) == 1


async def test_api_error_is_agent_turn_error(
    claude_cli: Path, server: ModelServer, worktree: Path, run_meta: RunMetadata
) -> None:
    # Claude Code 2.1.332 re-sends a request that got a 400 (6 requests in all here), even with
    # CLAUDE_CODE_MAX_RETRIES=0: script enough errors
    server.add(*[error(400, "SCRIPTED-API-ERROR") for _ in range(10)])
    with pytest.raises(AgentTurnError) as caught:
        await run_agent(
            harness=descriptor_for(server, max_retries=0),
            cwd=worktree,
            prompt="fail please",
            run=run_meta,
            agents_env=AGENTS_ENV,
        )
    assert "SCRIPTED-API-ERROR" in str(caught.value)
    assert caught.value.reason == "api_error"
    assert not caught.value.retryable, "a 400 does not go away by retrying"
    assert caught.value.session_id
    assert caught.value.usage is not None
    assert live_groups() == {}


async def test_unreachable_endpoint_is_a_retryable_turn_error(
    claude_cli: Path, worktree: Path, run_meta: RunMetadata
) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    descriptor = {
        "kind": "claude",
        "base_url": f"http://127.0.0.1:{port}",
        "api_key_env": "JIGS_TEST_ANTHROPIC_KEY",
        "max_retries": 0,
    }
    with pytest.raises(AgentTurnError) as caught:
        await run_agent(
            harness=descriptor, cwd=worktree, prompt="hi", run=run_meta, agents_env=AGENTS_ENV
        )
    assert caught.value.reason == "api_error"
    assert caught.value.retryable
    # Claude Code talks to the step's credential proxy, which names the real endpoint it could
    # not reach
    assert f"the upstream http://127.0.0.1:{port} is unreachable" in str(caught.value)
    assert "reachable" in str(caught.value)
    assert live_groups() == {}


async def test_unset_key_variable_fails_the_descriptor_check(
    claude_home: Path, worktree: Path, run_meta: RunMetadata, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JIGS_TEST_ANTHROPIC_KEY")
    with pytest.raises(CheckFailedError, match="JIGS_TEST_ANTHROPIC_KEY is not set"):
        await run_fake(worktree, run_meta, "ok")


async def test_no_login_and_no_key_fails_the_descriptor_check(
    claude_cli: Path, worktree: Path, run_meta: RunMetadata
) -> None:
    with pytest.raises(CheckFailedError) as caught:
        await run_agent(
            harness={"kind": "claude"},
            cwd=worktree,
            prompt="hi",
            run=run_meta,
            agents_env=AGENTS_ENV,
        )
    assert "not logged in" in str(caught.value)
    assert "api_key_env" in str(caught.value)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root needs IS_SANDBOX")
async def test_root_without_is_sandbox_fails_clearly(
    fake_cli: Path, worktree: Path, run_meta: RunMetadata
) -> None:
    with pytest.raises(CheckFailedError) as caught:
        await run_agent(
            harness={"kind": "claude", "api_key_env": "JIGS_TEST_ANTHROPIC_KEY"},
            cwd=worktree,
            prompt="hi",
            run=run_meta,
            agents_env=[],
        )
    assert "IS_SANDBOX" in str(caught.value)
    assert "agents.env" in str(caught.value)
    assert not (worktree / ".fake-claude-marker").exists()
