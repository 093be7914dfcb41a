"""The turn engine's faults, once for every kind, through the echo kind: a CLI that crashes,
prints garbage, a cut or a 2 MB line, ends without its result, hangs (``idle_timeout``), talks
without end (``turn_timeout``), or passes ``max_turns`` / ``max_budget_usd``. Every path ends in
a typed error that keeps what the turn produced (session, usage), within its bound, with no
process left and the worktree free. The conformance kit checks the same for every real CLI
(``hung_endpoint``, ``hung_cli``, ``turn_deadline``, ``cancelled_turn``, ``bad_output``,
``max_turns``); a kind's own tests keep to its decoder, argv/env and transport."""

from __future__ import annotations

import time

import pytest
from jigs import harnesses
from jigs.errors import (
    AgentCrashedError,
    AgentLimitError,
    AgentOutputError,
    AgentTimeoutError,
    AgentTurnError,
)
from jigs.events import ModelCallStarted, SessionStarted
from jigs.executables import Resolved
from jigs.models import TextDeltaPart, generate_text, stream_text
from jigs.policy._lock import worktree_locked
from jigs.processes import MAX_LINE_BYTES, live_groups
from jigs.sandbox._proctree import processes_under
from jigs.steps import create_agent_runner, run_agent

pytestmark = pytest.mark.anyio

#: Seconds a stopped turn may take past its limit (the machine is shared).
SLACK = 5.0


def _released(worktree) -> None:
    assert not worktree_locked(worktree)
    assert not live_groups()
    assert not processes_under(worktree), "a process of the step outlived it"


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


# ---------------------------------------------------------------- bad output


@pytest.mark.parametrize(
    ("prompt", "error", "message"),
    [
        ("crash", AgentCrashedError, "exited with code 3"),
        ("garbage", AgentOutputError, r"not a JSON object \(line 5\)"),
        ("noresult", AgentOutputError, "without the end of its turn"),
    ],
)
async def test_faulty_cli_output_becomes_a_typed_error_and_releases_everything(
    worktree, run_meta, prompt, error, message
):
    with pytest.raises(error, match=message) as info:
        async with create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta) as runner:
            await generate_text(runner.model, prompt=f"calls:1 {prompt}")
    if isinstance(info.value, AgentCrashedError):
        assert info.value.returncode == 3
        assert "simulated crash" in info.value.stderr_tail
    if isinstance(info.value, AgentOutputError) and prompt == "garbage":
        assert info.value.line == 5  # start, model, model, usage, garbage
    # what the turn produced before the fault stays on the error
    assert info.value.session_id is not None
    assert info.value.usage is not None
    assert info.value.usage.cost_usd == 0.01
    _released(worktree)
    # the step can be retried in place
    assert (await run_agent(harness=harnesses.echo(), cwd=worktree, prompt="hi", run=run_meta)).text


async def test_a_2mb_output_line_does_not_break_the_reader(worktree, run_meta):
    async with create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta) as runner:
        stream = stream_text(runner.model, prompt="bigline:2000000")
        sizes = [len(p.text) async for p in stream if isinstance(p, TextDeltaPart)]
    assert 2_000_000 in sizes


async def test_a_line_over_the_cap_is_bad_output(fake_echo, worktree, run_meta):
    fake_echo(f"head -c {MAX_LINE_BYTES + 1} /dev/zero | tr '\\0' x\necho\nexec sleep 30\n")
    started = time.monotonic()
    with pytest.raises(AgentOutputError):
        await run_agent(harness=harnesses.echo(), cwd=worktree, prompt="hi", run=run_meta)
    assert time.monotonic() - started < SLACK
    _released(worktree)


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
    _released(worktree)


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


async def test_a_crash_message_redacts_secret_values_from_stderr(worktree, run_meta, monkeypatch):
    monkeypatch.setenv("DEPLOY_TOKEN", "tok-very-secret-123")
    with pytest.raises(AgentCrashedError) as info:
        async with create_agent_runner(
            harnesses.echo(), cwd=worktree, run=run_meta, agents_env=["DEPLOY_TOKEN"]
        ) as runner:
            await generate_text(runner.model, prompt="leakenv:DEPLOY_TOKEN crash")
    assert "tok-very-secret-123" not in str(info.value)
    assert "[redacted]" in info.value.stderr_tail


async def test_a_failed_turn_is_a_turn_error_with_its_reason_and_session(worktree, run_meta):
    with pytest.raises(AgentTurnError) as info:
        await run_agent(
            harness=harnesses.echo(), cwd=worktree, prompt="calls:1 fail:length", run=run_meta
        )
    assert type(info.value) is AgentTurnError
    assert info.value.reason == "length"
    assert info.value.stop_reason == "length"
    assert "echo failed: length" in str(info.value)
    assert info.value.session is not None
    assert info.value.usage is not None
    assert info.value.usage.cost_usd == 0.01
    _released(worktree)


# ---------------------------------------------------------------- deadlines


async def test_a_cli_that_prints_nothing_ends_at_idle_timeout(fake_echo, worktree, run_meta):
    fake_echo("exec sleep 300\n")
    started = time.monotonic()
    with pytest.raises(AgentTimeoutError, match="idle_timeout") as info:
        await run_agent(
            harness=harnesses.echo(idle_timeout=1, turn_timeout=120),
            cwd=worktree,
            prompt="hi",
            run=run_meta,
        )
    assert time.monotonic() - started < 1 + SLACK
    assert info.value.limit == "idle_timeout"
    assert info.value.retryable
    assert isinstance(info.value, TimeoutError)
    assert info.value.session_id is None
    _released(worktree)


async def test_a_turn_that_never_starts_names_the_limit_that_ended_the_wait(
    worktree, run_meta, monkeypatch
):
    # a long-lived CLI (a transport) that never answers the turn's start: the wait ends at the
    # shorter of the two limits, and the error names that one
    import anyio
    from jigs.plugin import SessionTransport
    from jigs_harness_echo._harness import EchoHarness

    class NeverStarts(SessionTransport):
        async def start_turn(self, turn):
            await anyio.sleep(300)
            raise AssertionError("unreachable")

    async def never_starts(self, target, ctx):
        return NeverStarts()

    monkeypatch.setattr(EchoHarness, "open_transport", never_starts)
    for idle, turn, named in ((1, 120, "idle_timeout"), (120, 1, "turn_timeout")):
        started = time.monotonic()
        with pytest.raises(AgentTimeoutError, match=named) as info:
            await run_agent(
                harness=harnesses.echo(idle_timeout=idle, turn_timeout=turn),
                cwd=worktree,
                prompt="hi",
                run=run_meta,
            )
        assert time.monotonic() - started < 1 + SLACK
        assert info.value.limit == named
        other = "turn_timeout" if named == "idle_timeout" else "idle_timeout"
        assert other not in str(info.value)
        _released(worktree)


async def test_a_cli_hung_after_its_session_keeps_it_and_leaves_no_child(worktree, run_meta):
    """The echo CLI reports its session, starts a grandchild, then hangs: the timeout error
    keeps the session, and the grandchild dies with the step."""
    seen: list[object] = []
    started = time.monotonic()
    with pytest.raises(AgentTimeoutError) as info:
        await run_agent(
            harness=harnesses.echo(idle_timeout=3),  # 3 s: a slow start of its Python
            cwd=worktree,
            prompt="child sleep:300",
            run=run_meta,
            on_event=seen.append,
        )
    assert time.monotonic() - started < 3 + SLACK
    assert info.value.limit == "idle_timeout"
    (session,) = [e.session_id for e in seen if isinstance(e, SessionStarted)]
    assert info.value.session_id == session
    assert info.value.session is not None
    _released(worktree)


async def test_a_turn_that_keeps_talking_ends_at_turn_timeout_with_its_usage(worktree, run_meta):
    started = time.monotonic()
    with pytest.raises(AgentTimeoutError, match="turn_timeout") as info:
        await run_agent(
            harness=harnesses.echo(turn_timeout=4, idle_timeout=3),  # 3 s: a slow start
            cwd=worktree,
            prompt="calls:1000",  # a model call every 50 ms: never idle
            run=run_meta,
        )
    assert 3.9 < time.monotonic() - started < 4 + SLACK
    assert info.value.limit == "turn_timeout"
    assert info.value.retryable
    assert info.value.session_id is not None
    assert info.value.usage is not None
    assert (info.value.usage.cost_usd or 0) > 0
    _released(worktree)


# ---------------------------------------------------------------- limits


async def test_max_turns_stops_the_turn_with_its_session_and_usage(worktree, run_meta):
    seen: list[object] = []
    descriptor = harnesses.echo(max_turns=3)
    with pytest.raises(AgentLimitError, match="max_turns") as info:
        await run_agent(
            harness=descriptor,
            cwd=worktree,
            prompt="calls:10",
            run=run_meta,
            on_event=seen.append,
        )
    error = info.value
    assert error.limit == "max_turns"
    assert error.value == 3
    assert not error.retryable
    assert sum(isinstance(e, ModelCallStarted) for e in seen) == 4  # stopped at the 4th request
    assert error.session_id == next(e for e in seen if isinstance(e, SessionStarted)).session_id
    assert error.usage is not None
    assert error.usage.cost_usd == 0.02  # the usage reported before the 4th request
    assert error.session is not None
    assert error.session.harness == "echo"
    _released(worktree)
    # that the session resumes with its history is the kit's max_turns check, on real CLIs
    # (the echo CLI saves a session only at the end of a turn)


async def test_max_budget_usd_stops_the_turn_at_its_cost(worktree, run_meta):
    with pytest.raises(AgentLimitError, match="max_budget_usd") as info:
        await run_agent(
            harness=harnesses.echo(max_budget_usd=0.025),
            cwd=worktree,
            prompt="calls:10",
            run=run_meta,
        )
    error = info.value
    assert error.limit == "max_budget_usd"
    assert error.value == 0.025
    assert error.usage is not None
    assert error.usage.cost_usd == 0.03  # stopped at the first report over the budget
    assert error.session is not None
    _released(worktree)


# ---------------------------------------------------------------- one turn at a time


async def test_a_second_turn_while_one_streams_is_refused(worktree, run_meta):
    async with create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta) as runner:
        parts = aiter(stream_text(runner.model, prompt="sleep:1 first"))
        got = [await anext(parts)]  # the first turn is under way
        with pytest.raises(AgentTurnError, match="already running"):
            await generate_text(runner.model, prompt="second")
        got += [p async for p in parts]
        texts = [p.text for p in got if isinstance(p, TextDeltaPart)]
        assert texts == ["echo: sleep:1 first (turn 1)"]  # the first turn was not disturbed
    _released(worktree)
