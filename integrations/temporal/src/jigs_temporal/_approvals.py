"""Approvals that wait in Temporal: a deferred tool call, or the agent's question
(:func:`~jigs.steps.ask_human`), waits for a human in the workflow (an update with a validator),
not in the worker, and the session resumes with the decision or the answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from jigs.errors import ApprovalPending, InvalidInputError
from jigs.steps import (
    Allow,
    Answer,
    Approval,
    Deny,
    PendingApproval,
    approvals_prompt,
    decisions_of,
)

if TYPE_CHECKING:
    from jigs import AgentSessionRef
    from jigs.models import Prompt

__all__ = ["APPROVAL_QUERY", "APPROVAL_UPDATE", "pending_of", "run_with_approvals"]

R = TypeVar("R")

#: The update a client sends the decision with: ``{call_id: Allow() | Deny(reason)}`` for a tool
#: call, ``{call_id: Answer(text)}`` for a question (or their JSON data,
#: ``{"c1": {"decision": "deny", "reason": "..."}}``).
APPROVAL_UPDATE = "jigs.approve"
#: The query that answers the pending calls (a :class:`~jigs.steps.PendingApproval`'s JSON
#: data), or None while nothing waits.
APPROVAL_QUERY = "jigs.pending"


def pending_of(error: BaseException) -> PendingApproval | None:
    """The :class:`~jigs.steps.PendingApproval` an activity's
    :class:`~jigs.errors.ApprovalPending` carried through Temporal (the ``ActivityError`` a
    workflow catches, or its ``ApplicationError`` cause), else None."""
    from temporalio.exceptions import ActivityError, ApplicationError

    cause = error.cause if isinstance(error, ActivityError) else error
    if not isinstance(cause, ApplicationError) or cause.type != ApprovalPending.__name__:
        return None
    details = cause.details[0] if cause.details else None
    if not isinstance(details, dict) or details.get("pending") is None:
        return None
    return PendingApproval.model_validate(details["pending"])


class _Waiting:
    """The workflow's state of one approval: what waits, and what was decided."""

    def __init__(self) -> None:
        self.pending: PendingApproval | None = None
        self.decided: dict[str, Allow | Deny | Answer] | None = None

    def validate(self, decision: dict[str, Any]) -> None:
        # runs before the update is accepted (and never on replay): a bad decision is refused
        # to its sender and leaves no trace in the history
        if self.pending is None:
            raise InvalidInputError("no tool call is waiting for approval", argument="decision")
        self.pending.decide(decisions_of(decision))

    def decide(self, decision: dict[str, Any]) -> None:
        self.decided = decisions_of(decision)

    def wait(self, pending: PendingApproval) -> None:
        self.pending, self.decided = pending, None

    def take(self) -> dict[str, Allow | Deny | Answer]:
        decided, self.pending, self.decided = self.decided, None, None
        if decided is None:
            raise RuntimeError("no decision arrived")  # wait_condition returned without one
        return decided

    def query(self) -> dict[str, Any] | None:
        return None if self.pending is None else self.pending.model_dump(mode="json")


async def run_with_approvals(
    step: Callable[[Prompt, AgentSessionRef | None, list[Approval]], Awaitable[R]],
    prompt: Prompt,
    *,
    resume: AgentSessionRef | None = None,
    timeout: timedelta | None = None,
) -> R:
    """Run ``step(prompt, resume, approvals)`` (a call of a :func:`jigs_temporal.activity`
    whose agent has an ``approve_tool`` or ``tools=[ask_human]``, with
    ``workflow.execute_activity``) in a workflow, and wait in the workflow for each decision it
    defers and each question its agent asks.

    When the activity raises :class:`~jigs.errors.ApprovalPending`, the workflow answers the
    query :data:`APPROVAL_QUERY` with the pending calls and waits (``workflow.wait_condition``)
    for the update :data:`APPROVAL_UPDATE` with ``{call_id: Allow() | Deny(reason)}`` (a
    question: ``{call_id: Answer(text)}``); its
    validator refuses a decision for a call that is not pending, so the sender learns at once.
    The wait is in the workflow's history: a worker killed meanwhile loses nothing, and any
    worker replays it (the update and the query need a running worker; any one will do). Then
    the step runs again with ``resume=pending.session``, ``approvals=pending.decide(decision)``
    and :func:`~jigs.steps.approvals_prompt` as its prompt: an approved call runs once, exactly
    as asked, a refused one reaches the agent as a refusal with its reason, an answer as its next
    message under its question. A resumed turn that defers (or asks) again waits again.

    No decision within ``timeout`` (None: wait forever): the activity's error is raised from
    the workflow, still carrying the pending calls (:func:`pending_of`).
    """
    from temporalio import workflow

    waiting = _Waiting()
    workflow.set_update_handler(APPROVAL_UPDATE, waiting.decide, validator=waiting.validate)
    workflow.set_query_handler(APPROVAL_QUERY, waiting.query)
    approvals: list[Approval] = []
    while True:
        try:
            return await step(prompt, resume, approvals)
        except Exception as exc:
            pending = pending_of(exc)
            if pending is None:
                raise
            waiting.wait(pending)
            try:
                await workflow.wait_condition(lambda: waiting.decided is not None, timeout=timeout)
            except TimeoutError:
                raise exc from None
        approvals = pending.decide(waiting.take())
        prompt, resume = approvals_prompt(approvals), pending.session
