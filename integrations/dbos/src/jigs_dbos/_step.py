"""``jigs_dbos.step``: a DBOS step configured for jigs, and step calls that fill ``run``."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, Unpack, overload

from dbos import DBOS
from jigs.engine._mailbox import listening
from pydantic import BaseModel

from jigs_dbos._context import current_step_name, run_metadata
from jigs_dbos._messages import listen as apply_messages
from jigs_dbos._retry import should_retry

if TYPE_CHECKING:
    from jigs.descriptors import HarnessDescriptor
    from jigs.models import Prompt
    from jigs.steps import AgentResult, AgentRunnerOpening, EngineStepOptions, StepOptions

__all__ = ["create_agent_runner", "run_agent", "step"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T", bound=BaseModel)


def step(
    name: str | None = None,
    *,
    max_attempts: int = 3,
    interval_seconds: float = 1.0,
    backoff_rate: float = 2.0,
    preemptible: bool = True,
    checkpoint: str | None = None,
    listen: bool = False,
    listen_every: float = 0.5,
) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """Decorate an ``async`` function as a DBOS step that runs agents.

    It is ``@DBOS.step`` with retries on (``max_attempts`` tries, ``interval_seconds`` apart,
    times ``backoff_rate`` after each), :func:`jigs_dbos.should_retry` deciding each retry (a
    non-retryable :class:`~jigs.errors.JigsError` fails the step at once, re-raised as is; retries
    exhausted raise ``DBOSMaxStepRetriesExceeded``), and ``preemptible`` on: when the workflow is
    cancelled (``DBOS.cancel_workflow``), DBOS cancels the step, which closes the runner: the
    agent is stopped and the worktree lock released. DBOS notices a cancellation within its 1 s
    poll. ``name`` defaults to the function's qualified name and is the ``step_name`` of
    :func:`jigs_dbos.run_metadata`.

    ``checkpoint`` (off by default) names the function's parameter that holds the worktree: the
    step then records the worktree's git state when it first starts and restores it when it
    starts again (a DBOS retry, or a re-run after the worker died), before the agent runs
    (:mod:`jigs.worktrees.checkpoints`).

    ``listen`` (off by default): the step's agent can be steered or interrupted from outside
    the worker while it runs, with :func:`jigs_dbos.steer` / :func:`jigs_dbos.interrupt` and a
    ``DBOSClient``; the step looks for new messages every ``listen_every`` seconds
    (:mod:`jigs_dbos._messages`).
    """
    if max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    if listen_every <= 0:
        raise ValueError("listen_every must be positive")

    def decorate(func: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        step_name = name or func.__qualname__
        decorated: Callable[P, Awaitable[R]] = DBOS.step(
            name=step_name,
            retries_allowed=max_attempts > 1,
            max_attempts=max_attempts,
            interval_seconds=interval_seconds,
            backoff_rate=backoff_rate,
            should_retry=should_retry,
            preemptible=preemptible,
        )(_step_body(func, step_name, checkpoint, listen_every if listen else None))
        return decorated

    return decorate


def _step_body(
    func: Callable[P, Awaitable[R]],
    step_name: str,
    checkpoint: str | None,
    listen_every: float | None = None,
) -> Callable[P, Awaitable[R]]:
    """``func`` as the step runs it: under its step name (for :func:`run_metadata`), in the
    worktree's checkpoint when ``checkpoint`` names its parameter, and applying the workflow's
    messages when ``listen_every`` is set."""
    from jigs.worktrees.checkpoints import worktree_parameter

    worktree_of = worktree_parameter(func, checkpoint)

    @functools.wraps(func)
    async def body(*args: P.args, **kwargs: P.kwargs) -> R:
        if listen_every is None:
            return await run(args, kwargs)
        with listening() as mailbox:
            listener = asyncio.create_task(apply_messages(mailbox, listen_every, step_name))
            try:
                return await run(args, kwargs)
            finally:
                listener.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await listener

    async def run(args: Any, kwargs: Any) -> R:
        token = current_step_name.set(step_name)
        try:
            if worktree_of is None:
                return await func(*args, **kwargs)
            from jigs.worktrees.checkpoints import step_checkpoint

            key = f"dbos/{DBOS.workflow_id}/{DBOS.step_id}"
            async with step_checkpoint(worktree_of(args, kwargs), key):
                return await func(*args, **kwargs)
        finally:
            current_step_name.reset(token)

    return body


def _filled(options: EngineStepOptions) -> StepOptions:
    """The options with ``run`` filled from the DBOS step unless given."""
    filled: StepOptions = {**options, "run": options.get("run") or run_metadata()}
    return filled


@overload
async def run_agent(
    *,
    harness: HarnessDescriptor | Mapping[str, Any],
    prompt: Prompt,
    output: type[T],
    **options: Unpack[EngineStepOptions],
) -> AgentResult[T]: ...


@overload
async def run_agent(
    *,
    harness: HarnessDescriptor | Mapping[str, Any],
    prompt: Prompt,
    output: None = None,
    **options: Unpack[EngineStepOptions],
) -> AgentResult[None]: ...


async def run_agent(
    *,
    harness: HarnessDescriptor | Mapping[str, Any],
    prompt: Prompt,
    output: type[T] | None = None,
    **options: Unpack[EngineStepOptions],
) -> AgentResult[Any]:
    """:func:`jigs.steps.run_agent` with ``run`` filled from the DBOS step
    (:func:`run_metadata`) unless given (:class:`~jigs.steps.EngineStepOptions`). Every retry
    of the step passes the step's own input ref again, never a session the failed attempt
    produced."""
    from jigs.steps import run_agent as _run_agent

    if output is None:
        return await _run_agent(harness=harness, prompt=prompt, **_filled(options))
    return await _run_agent(harness=harness, prompt=prompt, output=output, **_filled(options))


def create_agent_runner(
    harness: HarnessDescriptor | Mapping[str, Any], **options: Unpack[EngineStepOptions]
) -> AgentRunnerOpening:
    """:func:`jigs.steps.create_agent_runner` with ``run`` filled from the DBOS step
    (:func:`run_metadata`) unless given (:class:`~jigs.steps.EngineStepOptions`)."""
    from jigs.steps import create_agent_runner as _create

    return _create(harness, **_filled(options))
