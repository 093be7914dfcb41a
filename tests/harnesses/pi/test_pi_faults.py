"""Fault injection with a fake ``pi`` (a small Python script): every failure is typed, bounded in
time, reaps the process group and releases the worktree lock."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from jigs import RunMetadata
from jigs._lock import worktree_locked
from jigs._proctree import processes_under
from jigs.errors import AgentCrashedError, AgentOutputError, AgentSessionError, AgentTurnError
from jigs.processes import live_groups
from jigs.steps import run_agent

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("fake_pi", "model_key")]

URL = "http://127.0.0.1:9/v1"  # never contacted: the fake pi answers by itself


def _assert_released(worktree: Path) -> None:
    assert not worktree_locked(worktree)
    assert not live_groups()


async def _run(descriptor: dict[str, Any], worktree: Path, run: RunMetadata, prompt: str) -> Any:
    with anyio.fail_after(20):
        return await run_agent(harness=descriptor, cwd=worktree, prompt=prompt, run=run)


async def test_fake_ok_turn(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    result = await _run(pi_descriptor(URL), worktree, run_meta, "ok")
    assert result.text == "fake answer (ok)"
    assert result.usage.input_tokens == 3
    _assert_released(worktree)


async def test_garbage_line_names_its_number(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    with pytest.raises(AgentOutputError, match=r"line 3") as info:
        await _run(pi_descriptor(URL), worktree, run_meta, "garbage")
    assert info.value.line == 3
    _assert_released(worktree)


async def test_stream_without_agent_settled(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    with pytest.raises(AgentOutputError, match="before agent_settled"):
        await _run(pi_descriptor(URL), worktree, run_meta, "nosettle")
    _assert_released(worktree)


async def test_crash_is_typed_with_stderr(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    with pytest.raises(AgentCrashedError, match="exited with code 3") as info:
        await _run(pi_descriptor(URL), worktree, run_meta, "crash")
    assert info.value.returncode == 3
    assert "simulated crash" in info.value.stderr_tail
    _assert_released(worktree)


async def test_hang_is_stopped_by_cancellation(
    pi_descriptor: Callable[..., dict[str, Any]],
    worktree: Path,
    run_meta: RunMetadata,
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "pid"
    with anyio.move_on_after(1.5) as scope:
        await run_agent(
            harness=pi_descriptor(URL), cwd=worktree, prompt=f"hang pidfile:{pidfile}", run=run_meta
        )
    assert scope.cancelled_caught
    # run_agent returns only after the group is stopped: within 2 s of the cancellation
    assert time.monotonic() - scope.deadline < 2.0
    assert int(pidfile.read_text())  # pi was started
    # pi runs in a PID namespace: its pid means nothing here; its cwd does
    assert not processes_under(worktree)
    _assert_released(worktree)


async def test_hang_after_settle_still_returns(
    pi_descriptor: Callable[..., dict[str, Any]],
    worktree: Path,
    run_meta: RunMetadata,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jigs_harness_pi import _harness

    monkeypatch.setattr(_harness, "SETTLE_GRACE", 0.3)
    started = time.perf_counter()
    result = await _run(pi_descriptor(URL), worktree, run_meta, "hang-after-settle")
    assert result.text == "fake answer (hang-after-settle)"
    assert time.perf_counter() - started < 5
    _assert_released(worktree)


async def test_wrong_session_id_is_refused(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    with pytest.raises(AgentSessionError, match="reported session"):
        await _run(pi_descriptor(URL), worktree, run_meta, "wrong-session")
    _assert_released(worktree)


@pytest.mark.parametrize(("mode", "message"), [("length", "truncated"), ("error", "500 boom")])
async def test_stop_reasons_are_turn_errors(
    pi_descriptor: Callable[..., dict[str, Any]],
    worktree: Path,
    run_meta: RunMetadata,
    mode: str,
    message: str,
) -> None:
    with pytest.raises(AgentTurnError, match=message):
        await _run(pi_descriptor(URL), worktree, run_meta, mode)
    _assert_released(worktree)


async def test_argv_and_env_policy(
    pi_descriptor: Callable[..., dict[str, Any]],
    worktree: Path,
    run_meta: RunMetadata,
    fake_pi: Path,
) -> None:
    from jigs.processes import observe_launches

    with observe_launches() as seen:
        await _run(
            pi_descriptor(URL, thinking="low", tools=["read", "bash"]), worktree, run_meta, "ok"
        )
    (launch,) = seen
    argv = list(launch.argv)
    assert argv[0] == str(fake_pi)
    for flag in ("-ne", "-ns", "-np", "-nc", "-na", "--no-mcp", "--no-themes"):
        assert flag in argv
    assert argv[argv.index("--mode") + 1] == "json"
    assert argv[argv.index("--model") + 1] == "local/fake-model"
    assert argv[argv.index("--tools") + 1] == "read,bash"
    assert argv[argv.index("--thinking") + 1] == "low"
    assert argv[-2:] == ["--", "ok"]
    assert {"PI_CODING_AGENT_DIR", "PI_OFFLINE", "JIGS_TEST_OPENAI_KEY"} <= launch.env_names
    assert "JIGS_PI_EXECUTABLE" not in launch.env_names
    assert launch.cwd == worktree.resolve()


async def test_prompt_starting_with_at_is_not_a_file(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    from jigs.processes import observe_launches

    with observe_launches() as seen:
        await _run(pi_descriptor(URL), worktree, run_meta, "@README.md is fine")
    assert seen[0].argv[-2:] == ("--", " @README.md is fine")
