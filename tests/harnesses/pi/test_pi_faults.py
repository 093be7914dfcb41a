"""Fault injection with a fake ``pi`` (a small Python script): every failure is typed, bounded in
time, reaps the process group and releases the worktree lock; argv and env are what Pi gets."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from jigs import RunMetadata
from jigs._lock import worktree_locked
from jigs._proctree import processes_under
from jigs.errors import (
    AgentCrashedError,
    AgentLimitError,
    AgentOutputError,
    AgentSessionError,
    AgentTimeoutError,
    AgentTurnError,
    InvalidInputError,
    StructuredOutputError,
)
from jigs.events import ModelCallStarted, SessionStarted, ToolCallFinished, UsageUpdated
from jigs.processes import group_alive, live_groups, observe_launches
from jigs.steps import run_agent
from pydantic import BaseModel

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("fake_pi", "model_key")]

URL = "http://127.0.0.1:9/v1"  # never contacted: the fake pi answers by itself


def _assert_released(worktree: Path) -> None:
    assert not worktree_locked(worktree)
    assert not live_groups()


async def _run(descriptor: dict[str, Any], worktree: Path, run: RunMetadata, prompt: str) -> Any:
    with anyio.fail_after(20):
        return await run_agent(harness=descriptor, cwd=worktree, prompt=prompt, run=run)


async def test_fake_ok_turn_reports_usage_cost_and_events(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    events: list[Any] = []
    with anyio.fail_after(20):
        result = await run_agent(
            harness=pi_descriptor(URL),
            cwd=worktree,
            prompt="ok",
            run=run_meta,
            on_event=events.append,
        )
    assert result.text == "fake answer (ok)"
    assert result.usage.input_tokens == 3
    assert result.usage.cost_usd == 0.25
    assert result.session is not None
    assert isinstance(events[0], SessionStarted)
    assert events[0].session_id == result.session.id
    assert any(isinstance(e, UsageUpdated) for e in events)
    assert result.provider_metadata is not None
    assert result.provider_metadata["pi"]["model"] == "fake-model"
    _assert_released(worktree)


async def test_garbage_line_names_its_number(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    with pytest.raises(AgentOutputError, match=r"line 3") as info:
        await _run(pi_descriptor(URL), worktree, run_meta, "garbage")
    assert info.value.line == 3
    _assert_released(worktree)


async def test_stream_without_agent_settled_keeps_the_session(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    with pytest.raises(AgentOutputError, match="without the end of its turn") as info:
        await _run(pi_descriptor(URL), worktree, run_meta, "nosettle")
    assert info.value.session_id is not None
    assert info.value.usage is not None
    assert info.value.usage.input_tokens == 3
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
) -> None:
    pidfile = worktree / ".pid"  # in the worktree: the only place the sandboxed fake may write
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


@pytest.mark.parametrize("mode", ["hang", "silent"])
async def test_a_hung_cli_ends_at_idle_timeout(
    pi_descriptor: Callable[..., dict[str, Any]],
    worktree: Path,
    run_meta: RunMetadata,
    mode: str,
) -> None:
    """``silent`` prints nothing at all; ``hang`` prints its session header, then nothing."""
    pidfile = worktree / ".pid"  # in the worktree: the only place the sandboxed fake may write
    started = time.monotonic()
    with pytest.raises(AgentTimeoutError, match="idle_timeout") as info:
        await _run(
            pi_descriptor(URL, idle_timeout=1), worktree, run_meta, f"{mode} pidfile:{pidfile}"
        )
    assert time.monotonic() - started < 1 + 5
    assert info.value.limit == "idle_timeout"
    assert isinstance(info.value, TimeoutError)
    assert (info.value.session_id is not None) is (mode == "hang")
    assert not group_alive(int(pidfile.read_text()))
    # that pid is the one inside the step's PID namespace: its cwd says more out here
    assert not processes_under(worktree)
    _assert_released(worktree)


async def test_turn_timeout_ends_a_turn_that_keeps_talking(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    started = time.monotonic()
    with pytest.raises(AgentTimeoutError, match="turn_timeout") as info:
        await _run(pi_descriptor(URL, turn_timeout=1.5, idle_timeout=1), worktree, run_meta, "loop")
    assert time.monotonic() - started < 1.5 + 5
    assert info.value.limit == "turn_timeout"
    assert info.value.usage is not None
    assert (info.value.usage.cost_usd or 0) > 0
    _assert_released(worktree)


async def test_max_turns_stops_a_tool_loop_with_the_session(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    seen: list[Any] = []
    with pytest.raises(AgentLimitError, match="max_turns") as info, anyio.fail_after(20):
        await run_agent(
            harness=pi_descriptor(URL, max_turns=3),
            cwd=worktree,
            prompt="loop",
            run=run_meta,
            on_event=seen.append,
        )
    assert info.value.limit == "max_turns"
    assert sum(isinstance(e, ModelCallStarted) for e in seen) == 4  # stopped at the 4th request
    assert sum(isinstance(e, ToolCallFinished) for e in seen) == 3
    session = info.value.session
    assert session is not None
    assert session.harness == "pi"
    assert (
        info.value.session_id == next(e for e in seen if isinstance(e, SessionStarted)).session_id
    )
    assert info.value.usage is not None
    assert info.value.usage.cost_usd == 0.75
    _assert_released(worktree)


async def test_max_budget_usd_stops_the_turn_from_pis_cost(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    with pytest.raises(AgentLimitError, match="max_budget_usd") as info:
        await _run(pi_descriptor(URL, max_budget_usd=0.6), worktree, run_meta, "loop")
    assert info.value.limit == "max_budget_usd"
    assert info.value.usage is not None
    assert info.value.usage.cost_usd == 0.75
    assert info.value.session is not None
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


@pytest.mark.parametrize(
    ("mode", "message", "reason", "retryable"),
    [("length", "truncated", "length", False), ("error", "500 boom", "api_error", True)],
)
async def test_stop_reasons_are_turn_errors(
    pi_descriptor: Callable[..., dict[str, Any]],
    worktree: Path,
    run_meta: RunMetadata,
    mode: str,
    message: str,
    reason: str,
    retryable: bool,
) -> None:
    with pytest.raises(AgentTurnError, match=message) as info:
        await _run(pi_descriptor(URL), worktree, run_meta, mode)
    assert info.value.reason == reason
    assert info.value.retryable is retryable
    assert info.value.stop_reason == mode
    assert info.value.session is not None
    assert info.value.usage is not None
    assert info.value.usage.cost_usd == 0.25
    _assert_released(worktree)


class Verdict(BaseModel):
    approved: bool


async def test_a_misfit_structured_answer_launches_pi_exactly_twice(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    with observe_launches() as seen, pytest.raises(StructuredOutputError):
        with anyio.fail_after(20):
            await run_agent(
                harness=pi_descriptor(URL), cwd=worktree, prompt="ok", run=run_meta, output=Verdict
            )
    assert len(seen) == 2  # the first answer and the core's single re-ask; Pi no longer re-asks
    first, second = (list(launch.argv) for launch in seen)
    assert "--session-id" in first
    session_id = first[first.index("--session-id") + 1]
    assert second[second.index("--session") + 1].endswith(f"_{session_id}.jsonl")
    _assert_released(worktree)


async def test_argv_and_env_policy(
    pi_descriptor: Callable[..., dict[str, Any]],
    worktree: Path,
    run_meta: RunMetadata,
    fake_pi: Path,
) -> None:
    with observe_launches() as seen:
        await _run(
            pi_descriptor(URL, thinking="low", tools=["read", "bash"]), worktree, run_meta, "ok"
        )
    (launch,) = seen
    argv = list(launch.argv)
    assert argv[0] == str(fake_pi)
    for flag in ("-ne", "-ns", "-np", "-nc", "-na", "--no-mcp", "--no-themes"):
        assert flag in argv
    for flag in ("--no-builtin-tools", "--exclude-tools", "--name", "--system-prompt"):
        assert flag not in argv
    assert argv[argv.index("--mode") + 1] == "json"
    assert argv[argv.index("--model") + 1] == "local/fake-model"
    assert argv[argv.index("--tools") + 1] == "read,bash"
    assert argv[argv.index("--thinking") + 1] == "low"
    assert "ok" not in argv  # the prompt goes on stdin
    assert {"PI_CODING_AGENT_DIR", "PI_OFFLINE", "JIGS_TEST_OPENAI_KEY"} <= launch.env_names
    assert "JIGS_PI_EXECUTABLE" not in launch.env_names
    assert launch.cwd == worktree.resolve()


async def test_descriptor_keys_reach_the_command_line(
    pi_descriptor: Callable[..., dict[str, Any]],
    worktree: Path,
    run_meta: RunMetadata,
) -> None:
    recorded = worktree / ".argv.json"  # in the worktree: the sandboxed fake writes only there
    system = "README.md"  # an existing path: Pi must still get it as text (it goes as a file)
    descriptor = pi_descriptor(
        URL,
        exclude_tools=["write", "edit"],
        builtin_tools=False,
        skills=["skills/review"],
        prompt_templates=["prompts/fix.md", "prompts/more"],
        session_name="nightly review",
        system_prompt=system,
        append_system_prompt=["first addition", "-second addition"],
        retries=2,
    )
    await _run(descriptor, worktree, run_meta, f"ok argv:{recorded}")
    argv = json.loads(recorded.read_text())
    assert argv[argv.index("--exclude-tools") + 1] == "write,edit"
    assert "--no-builtin-tools" in argv
    assert argv[argv.index("--skill") + 1] == "skills/review"
    templates = [argv[i + 1] for i, a in enumerate(argv) if a == "--prompt-template"]
    assert templates == ["prompts/fix.md", "prompts/more"]
    assert argv[argv.index("--name") + 1] == "nightly review"
    # the prompt texts were files in the private agent dir, gone with the step
    assert argv[argv.index("--system-prompt") + 1].endswith("/system-prompt.md")
    appended = [argv[i + 1] for i, a in enumerate(argv) if a == "--append-system-prompt"]
    assert [Path(p).name for p in appended] == [
        "append-system-prompt-0.md",
        "append-system-prompt-1.md",
    ]
    assert not Path(appended[0]).exists()
    _assert_released(worktree)


async def test_prompt_files_hold_the_texts(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    """What the files said while Pi ran (the fake reads them back through the agent dir)."""
    from jigs_harness_pi._harness import PiHarness

    descriptor = pi_descriptor(URL, system_prompt="be brief", append_system_prompt=["and kind"])
    seen: dict[str, str] = {}
    original = PiHarness.launch_turn

    def spy(self: PiHarness, turn: Any, ctx: Any, state: Any) -> Any:
        launch = original(self, turn, ctx, state)
        argv = list(launch.argv)
        for flag in ("--system-prompt", "--append-system-prompt"):
            seen[flag] = Path(argv[argv.index(flag) + 1]).read_text()
        return launch

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PiHarness, "launch_turn", spy)
        await _run(descriptor, worktree, run_meta, "ok")
    assert seen == {"--system-prompt": "be brief", "--append-system-prompt": "and kind"}


@pytest.mark.parametrize("prompt", ["echo @README.md is fine", "echo --version -p"])
async def test_prompts_that_look_like_options_or_files_stay_prompts(
    pi_descriptor: Callable[..., dict[str, Any]],
    worktree: Path,
    run_meta: RunMetadata,
    prompt: str,
) -> None:
    with observe_launches() as seen:
        result = await _run(pi_descriptor(URL), worktree, run_meta, prompt)
    assert result.text == f"echo:{len(prompt)}:{prompt[-20:]}"
    assert not any(prompt in arg for arg in seen[0].argv)


async def test_provider_options_other_than_on_event_are_refused(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    """An approval hook Pi cannot call must not be ignored silently."""
    seen: list[Any] = []
    with observe_launches() as launched, pytest.raises(InvalidInputError) as info:
        await run_agent(
            harness=pi_descriptor(URL),
            cwd=worktree,
            prompt="ok",
            run=run_meta,
            provider_options={
                "pi": {"approve_tool": lambda name, args: True, "on_event": seen.append}
            },
        )
    assert info.value.argument == "provider_options"
    assert "approve_tool" in str(info.value)
    assert launched == []
    _assert_released(worktree)
    result = await run_agent(  # on_event alone is fine
        harness=pi_descriptor(URL),
        cwd=worktree,
        prompt="ok",
        run=run_meta,
        provider_options={"pi": {"on_event": seen.append}},
    )
    assert result.text == "fake answer (ok)"
    assert any(isinstance(e, SessionStarted) for e in seen)
