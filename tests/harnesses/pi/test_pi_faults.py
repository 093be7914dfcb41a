"""The pi kind with a fake ``pi`` (a small Python script): what the kind owns. Its decoder (usage,
cost, stop reasons, a session other than the one asked for, a hang after ``agent_settled``), argv
and env, prompt files and provider options. The turn engine's faults (a crash, garbage, a stream
without its end, hangs, deadlines, ``max_turns``, ``max_budget_usd``) are tested once for every
kind: tests/core/test_turn_faults.py (the echo kind) and the conformance kit, which
test_conformance_kinds runs on the real Pi."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from jigs import RunMetadata
from jigs.errors import (
    AgentSessionError,
    AgentTurnError,
    InvalidInputError,
    StructuredOutputError,
)
from jigs.events import SessionStarted, UsageUpdated
from jigs.policy._lock import worktree_locked
from jigs.processes import live_groups, observe_launches
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
    """An option Pi cannot honour must not be ignored silently."""
    seen: list[Any] = []
    with observe_launches() as launched, pytest.raises(InvalidInputError) as info:
        await run_agent(
            harness=pi_descriptor(URL),
            cwd=worktree,
            prompt="ok",
            run=run_meta,
            provider_options={"pi": {"colour": "red", "on_event": seen.append}},
        )
    assert info.value.argument == "provider_options"
    assert "colour" in str(info.value)
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
