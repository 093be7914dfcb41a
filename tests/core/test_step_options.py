"""One set of step options (issue 30): every step function and both engine integrations take
:class:`jigs.steps.StepOptions` (the integrations: ``run`` optional), and every option means the
same wherever it is given. The echo kind drives the steps."""

from __future__ import annotations

import inspect
import typing
from pathlib import Path

import jigs_dbos
import jigs_temporal
import pytest
from jigs import RunMetadata, harnesses
from jigs.errors import InvalidInputError
from jigs.events import AgentEvent, TurnCompleted
from jigs.models import generate_text
from jigs.steps import (
    EngineStepOptions,
    StepOptions,
    agent_session,
    create_agent_runner,
    run_agent,
    stream_agent,
)

pytestmark = pytest.mark.anyio

CORE = [create_agent_runner, run_agent, stream_agent, agent_session]
ENGINES = [
    jigs_dbos.run_agent,
    jigs_dbos.create_agent_runner,
    jigs_temporal.run_agent,
    jigs_temporal.create_agent_runner,
]
#: What a function takes beside the options: what it does, not where or how the step runs.
OWN = {"harness", "prompt", "output", "session", "resume_prompt", "fresh_prompt", "name"}


def _signatures(function: object) -> list[inspect.Signature]:
    overloads = typing.get_overloads(function)  # type: ignore[arg-type]
    return [inspect.signature(f) for f in [*overloads, function]]  # type: ignore[arg-type]


@pytest.mark.parametrize("function", CORE + ENGINES, ids=lambda f: f"{f.__module__}.{f.__name__}")
def test_every_step_function_takes_the_options_once(function):
    options = "StepOptions" if function in CORE else "EngineStepOptions"
    for signature in _signatures(function):
        params = signature.parameters
        spelled = {
            n for n, p in params.items() if p.kind is not inspect.Parameter.VAR_KEYWORD
        } - OWN
        assert not spelled, f"{function.__name__} spells out options: {sorted(spelled)}"
        assert params["options"].kind is inspect.Parameter.VAR_KEYWORD
        assert params["options"].annotation == f"Unpack[{options}]"


def test_the_engines_options_differ_only_in_run():
    # postponed annotations: TypedDict keeps them as forward references, compared as text
    core = {k: v.__forward_arg__ for k, v in StepOptions.__annotations__.items()}
    engine = {k: v.__forward_arg__ for k, v in EngineStepOptions.__annotations__.items()}
    assert core.keys() == engine.keys()
    assert {k for k in core if core[k] != engine[k]} == {"run"}
    assert {k for k, v in core.items() if v.startswith("Required[")} == {"cwd", "run"}
    assert {k for k, v in engine.items() if v.startswith("Required[")} == {"cwd"}


async def test_a_runners_on_event_and_provider_options_serve_every_call(
    worktree: Path, run_meta: RunMetadata
):
    runner_wide: list[AgentEvent] = []
    from_options: list[AgentEvent] = []
    per_call: list[AgentEvent] = []
    async with create_agent_runner(
        harnesses.echo(), cwd=worktree, run=run_meta, on_event=runner_wide.append
    ) as runner:
        await generate_text(runner.model, prompt="one")
        await generate_text(
            runner.model, prompt="two", provider_options={"echo": {"on_event": per_call.append}}
        )
    assert sum(isinstance(e, TurnCompleted) for e in runner_wide) == 1  # the call's own won
    assert sum(isinstance(e, TurnCompleted) for e in per_call) == 1

    async with create_agent_runner(
        harnesses.echo(),
        cwd=worktree,
        run=run_meta,
        provider_options={"echo": {"on_event": from_options.append}},
    ) as runner:
        await generate_text(runner.model, prompt="one")
        await generate_text(runner.model, prompt="two")
    assert sum(isinstance(e, TurnCompleted) for e in from_options) == 2


async def test_stream_agent_calls_on_event_too(worktree: Path, run_meta: RunMetadata):
    seen: list[AgentEvent] = []
    streamed: list[AgentEvent] = []
    async with stream_agent(
        harness=harnesses.echo(), cwd=worktree, prompt="x", run=run_meta, on_event=seen.append
    ) as turn:
        async for event in turn:
            streamed.append(event)
    assert streamed
    assert seen == streamed
    assert turn.result is not None


async def test_agent_session_passes_every_option_on(worktree: Path, run_meta: RunMetadata):
    seen: list[AgentEvent] = []
    result = await agent_session(
        harness=harnesses.echo(),
        cwd=worktree,
        run=run_meta,
        session=None,
        resume_prompt="again",
        fresh_prompt="fresh",
        provider_options={"echo": {"on_event": seen.append}},
    )
    assert result.text.startswith("echo: fresh")
    assert isinstance(seen[-1], TurnCompleted)


async def test_agent_session_refuses_resume(worktree: Path, run_meta: RunMetadata):
    first = await run_agent(harness=harnesses.echo(), cwd=worktree, prompt="x", run=run_meta)
    with pytest.raises(InvalidInputError, match="session="):
        await agent_session(
            harness=harnesses.echo(),
            cwd=worktree,
            run=run_meta,
            session=None,
            resume_prompt="again",
            fresh_prompt="fresh",
            resume=first.session,
        )


async def test_agent_session_calls_only_the_prompt_its_path_sends(
    worktree: Path, run_meta: RunMetadata
):
    called: list[str] = []

    def fresh() -> str:
        called.append("fresh")
        return "fresh"

    async def resume() -> str:
        called.append("resume")
        return "more"

    def session(held: typing.Any) -> typing.Any:
        return agent_session(
            harness=harnesses.echo(),
            cwd=worktree,
            run=run_meta,
            session=held,
            resume_prompt=resume,
            fresh_prompt=fresh,
        )

    first = await session(None)
    assert first.text == "echo: fresh (turn 1)"
    assert called == ["fresh"]
    again = await session(first.session)
    assert again.text == "echo: more (turn 2)"
    assert called == ["fresh", "resume"]
