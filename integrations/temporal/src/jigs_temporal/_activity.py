"""``jigs_temporal.activity``: an activity that heartbeats while the agent works and maps jigs'
errors to retry or give up."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from jigs.engine._mailbox import listening
from jigs.errors import AgentTurnError, ApprovalPending, JigsError

# at module level: a workflow imports this module passed through Temporal's sandbox, and the
# decorator runs inside it, where an import would re-execute jigs (and structlog) sandboxed
from jigs.worktrees.checkpoints import step_checkpoint, worktree_parameter

from jigs_temporal._messages import listen as apply_messages

__all__ = ["activity", "application_error"]

P = ParamSpec("P")
R = TypeVar("R")


def application_error(error: JigsError) -> Exception:
    """The Temporal ``ApplicationError`` for ``error``: ``type`` is the jigs class name,
    ``non_retryable`` is ``not error.retryable``, and the details carry the turn's
    ``session_id`` when there is one and, for a turn error, its ``session`` ref as JSON data
    (continue the session from it: ``AgentSessionRef.model_validate(details["session"])``), and
    for :class:`~jigs.errors.ApprovalPending` the ``pending`` calls as JSON data
    (:func:`jigs_temporal.pending_of` rebuilds them)."""
    from temporalio.exceptions import ApplicationError

    details: dict[str, Any] = {"session_id": getattr(error, "session_id", None)}
    if isinstance(error, AgentTurnError) and error.session is not None:
        details["session"] = error.session.model_dump(mode="json")
    if isinstance(error, ApprovalPending):
        details["pending"] = error.pending.model_dump(mode="json")
    return ApplicationError(
        str(error), details, type=type(error).__name__, non_retryable=not error.retryable
    )


def activity(
    name: str | None = None,
    *,
    heartbeat_every: float = 0.3,
    checkpoint: str | None = None,
    listen: bool = False,
    listen_every: float = 0.5,
) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """Decorate an ``async`` function as a Temporal activity (``@activity.defn``) that runs
    agents.

    While it runs it heartbeats every ``heartbeat_every`` seconds, so Temporal can deliver a
    cancellation (the workflow cancelled, or the activity's heartbeat timeout after the worker
    died): the activity's task is cancelled, which closes the runner (agent stopped, lock
    released). Give the activity a ``heartbeat_timeout`` (a few seconds) in the workflow, and the
    worker a ``max_heartbeat_throttle_interval`` below a second for a prompt cancellation. A
    :class:`~jigs.errors.JigsError` leaves as :func:`application_error` (non-retryable unless
    ``retryable``); other exceptions are left to Temporal (retried by its policy).

    ``checkpoint`` (off by default) names the function's parameter that holds the worktree: the
    activity then records the worktree's git state on its first attempt and restores it on every
    later attempt, before the agent runs (:mod:`jigs.worktrees.checkpoints`).

    ``listen`` (off by default): the workflow can steer or interrupt the agent while the
    activity runs. The workflow calls :func:`jigs_temporal.accept_step_messages`, starts the
    activity with an ``activity_id``, and a client signals it (:func:`jigs_temporal.steer`,
    :func:`jigs_temporal.interrupt`); the activity asks its workflow for new messages every
    ``listen_every`` seconds (:mod:`jigs_temporal._messages`).
    """
    if heartbeat_every <= 0 or listen_every <= 0:
        raise ValueError("heartbeat_every and listen_every must be positive")

    def decorate(func: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        from temporalio import activity as temporal_activity

        worktree_of = worktree_parameter(func, checkpoint)

        @functools.wraps(func)
        async def body(*args: P.args, **kwargs: P.kwargs) -> R:
            with listening() if listen else contextlib.nullcontext() as mailbox:
                beside = [_heartbeat(heartbeat_every)]
                if mailbox is not None:
                    beside.append(apply_messages(mailbox, listen_every, temporal_activity))
                async with _running(beside):
                    return await _call(func, worktree_of, args, kwargs)

        defined: Callable[P, Awaitable[R]] = (
            temporal_activity.defn(name=name)(body) if name else temporal_activity.defn(body)
        )
        return defined

    return decorate


@contextlib.asynccontextmanager
async def _running(coroutines: list[Coroutine[Any, Any, None]]) -> AsyncIterator[None]:
    """The block with ``coroutines`` running beside it as tasks, cancelled when it ends."""
    tasks = [asyncio.create_task(coroutine) for coroutine in coroutines]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _call(
    func: Callable[..., Awaitable[R]],
    worktree_of: Callable[[Any, Any], Any] | None,
    args: Any,
    kwargs: Any,
) -> R:
    """The activity's function, in the worktree's checkpoint when asked; a jigs error leaves
    as :func:`application_error`."""
    from temporalio import activity as temporal_activity

    try:
        if worktree_of is None:
            return await func(*args, **kwargs)
        info = temporal_activity.info()
        key = f"temporal/{info.workflow_id}/{info.workflow_run_id}/{info.activity_id}"
        async with step_checkpoint(worktree_of(args, kwargs), key):
            return await func(*args, **kwargs)
    except JigsError as exc:
        raise application_error(exc) from exc


async def _heartbeat(every: float) -> None:
    from temporalio import activity as temporal_activity

    while True:
        temporal_activity.heartbeat()
        await asyncio.sleep(every)
