"""Approvals that wait in DBOS: a deferred tool call, or the agent's question
(:func:`~jigs.steps.ask_human`), waits for a human in the workflow (``recv``), not in the
worker, and the session resumes with the decision or the answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import structlog
from dbos import DBOS
from jigs.errors import ApprovalPending, InvalidInputError
from jigs.steps import approvals_prompt, decisions_of

if TYPE_CHECKING:
    from jigs import AgentSessionRef
    from jigs.models import Prompt
    from jigs.steps import Approval, PendingApproval

__all__ = ["APPROVAL_TOPIC", "run_with_approvals"]

R = TypeVar("R")

#: The topic :func:`run_with_approvals` publishes the pending calls under
#: (``DBOS.set_event``) and receives the decision on (``DBOS.recv``).
APPROVAL_TOPIC = "jigs.approval"

#: A week: how long :func:`run_with_approvals` waits for a decision unless told.
_WEEK = 7 * 24 * 3600.0


async def run_with_approvals(
    step: Callable[[Prompt, AgentSessionRef | None, list[Approval]], Awaitable[R]],
    prompt: Prompt,
    *,
    resume: AgentSessionRef | None = None,
    topic: str = APPROVAL_TOPIC,
    timeout_seconds: float = _WEEK,
) -> R:
    """Run ``step(prompt, resume, approvals)`` (a :func:`jigs_dbos.step` whose agent has an
    ``approve_tool``, or ``tools=[ask_human]``) in a DBOS workflow, and wait in the workflow for
    each decision it defers and each question its agent asks.

    When the step raises :class:`~jigs.errors.ApprovalPending`, the workflow publishes the
    :class:`~jigs.steps.PendingApproval` as its event ``topic`` (read it with
    ``DBOSClient.get_event(workflow_id, topic)``) and waits with ``DBOS.recv(topic)`` for the
    decision, ``{call_id: Allow() | Deny(reason)}`` for a tool call, ``{call_id: Answer(text)}``
    for a question (:func:`~jigs.steps.decisions_of`: the models or their JSON data), sent with
    ``DBOS.send(workflow_id, decision, topic)`` or ``DBOSClient.send``. The wait is in the
    system database: a worker killed meanwhile loses nothing, and the worker that recovers the
    workflow resumes it. Then the step runs again with ``resume=pending.session``,
    ``approvals=pending.decide(decision)`` and :func:`~jigs.steps.approvals_prompt` as its
    prompt: an approved call runs once, exactly as asked, a refused one reaches the agent as a
    refusal with its reason, an answer as the agent's next message under its question. A
    resumed turn that defers (or asks) again waits again.

    A message that decides no pending call (an unknown id, not a decision) is dropped with a
    warning and the workflow waits on; once decided, the event is None until a call waits
    again. No message within ``timeout_seconds`` (a week by default): the step's
    :class:`~jigs.errors.ApprovalPending` is raised from the workflow, still carrying the
    pending calls.
    """
    approvals: list[Approval] = []
    while True:
        try:
            return await step(prompt, resume, approvals)
        except ApprovalPending as exc:
            pending: PendingApproval = exc.pending
            decided = await _wait_for_decision(pending, topic, timeout_seconds)
            if decided is None:
                raise
        approvals = decided
        prompt, resume = approvals_prompt(approvals), pending.session


async def _wait_for_decision(
    pending: PendingApproval, topic: str, timeout_seconds: float
) -> list[Approval] | None:
    """Publish ``pending`` and receive messages until one decides its calls (None: none came
    in time). A message that does not (an unknown call id, a malformed decision) is dropped
    with a warning: DBOS has no validator to refuse it to its sender, and the workflow must not
    fail for it."""
    await DBOS.set_event_async(topic, pending)
    while True:
        message = await DBOS.recv_async(topic, timeout_seconds=timeout_seconds)
        if message is None:
            return None
        try:
            approvals = pending.decide(decisions_of(message))
        except InvalidInputError as exc:
            log = structlog.get_logger("jigs_dbos")
            log.warning("approval.dropped", workflow_id=DBOS.workflow_id, error=str(exc))
            continue
        await DBOS.set_event_async(topic, None)  # decided: nothing waits any more
        return approvals
