"""Approvals that wait in DBOS: a deferred tool call waits for a human in the workflow (``recv``),
not in the worker, and the session resumes with the decision."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from pydantic import Field, TypeAdapter

if TYPE_CHECKING:
    from jigs import AgentSessionRef
    from jigs.models import Prompt
    from jigs.steps import Allow, Approval, Deny, PendingApproval

__all__ = ["APPROVAL_TOPIC", "decisions_of", "run_with_approvals"]

R = TypeVar("R")

#: The topic :func:`run_with_approvals` publishes the pending calls under
#: (``DBOS.set_event``) and receives the decision on (``DBOS.recv``).
APPROVAL_TOPIC = "jigs.approval"

#: A week: how long :func:`run_with_approvals` waits for a decision unless told.
_WEEK = 7 * 24 * 3600.0


def decisions_of(message: Any) -> dict[str, Allow | Deny]:
    """The decision ``message`` sent to the workflow, as ``{call_id: Allow() | Deny(reason)}``:
    the models themselves, or their JSON data (``{"c1": {"decision": "allow"}}``), so a sender
    without jigs can decide. Raises :class:`~jigs.errors.InvalidInputError` for anything else."""
    from jigs.errors import InvalidInputError
    from jigs.steps import Allow, Deny

    adapter: TypeAdapter[dict[str, Allow | Deny]] = TypeAdapter(
        dict[str, Annotated[Allow | Deny, Field(discriminator="decision")]]
    )
    try:
        return adapter.validate_python(message)
    except ValueError as exc:
        raise InvalidInputError(
            f"an approval decision must map call ids to Allow() or Deny(reason): {str(exc)[:300]}",
            argument="decision",
        ) from None


async def run_with_approvals(
    step: Callable[[Prompt, AgentSessionRef | None, list[Approval]], Awaitable[R]],
    prompt: Prompt,
    *,
    resume: AgentSessionRef | None = None,
    topic: str = APPROVAL_TOPIC,
    timeout_seconds: float = _WEEK,
) -> R:
    """Run ``step(prompt, resume, approvals)`` (a :func:`jigs_dbos.step` whose agent has an
    ``approve_tool``) in a DBOS workflow, and wait in the workflow for each decision it defers.

    When the step raises :class:`~jigs.errors.ApprovalPending`, the workflow publishes the
    :class:`~jigs.steps.PendingApproval` as its event ``topic`` (read it with
    ``DBOSClient.get_event(workflow_id, topic)``) and waits with ``DBOS.recv(topic)`` for the
    decision, ``{call_id: Allow() | Deny(reason)}`` (:func:`decisions_of`), sent with
    ``DBOS.send(workflow_id, decision, topic)`` or ``DBOSClient.send``. The wait is in the
    system database: a worker killed meanwhile loses nothing, and the worker that recovers the
    workflow resumes it. Then the step runs again with ``resume=pending.session``,
    ``approvals=pending.decide(decision)`` and :func:`~jigs.steps.approvals_prompt` as its
    prompt: an approved call runs once, exactly as asked, a refused one reaches the agent as a
    refusal with its reason. A resumed turn that defers again waits again.

    No decision within ``timeout_seconds`` (a week by default): the step's
    :class:`~jigs.errors.ApprovalPending` is raised from the workflow, still carrying the
    pending calls.
    """
    from dbos import DBOS
    from jigs.errors import ApprovalPending
    from jigs.steps import approvals_prompt

    approvals: list[Approval] = []
    while True:
        try:
            return await step(prompt, resume, approvals)
        except ApprovalPending as exc:
            pending: PendingApproval = exc.pending
            await DBOS.set_event_async(topic, pending)
            message = await DBOS.recv_async(topic, timeout_seconds=timeout_seconds)
            if message is None:
                raise
        approvals = pending.decide(decisions_of(message))
        prompt, resume = approvals_prompt(approvals), pending.session
