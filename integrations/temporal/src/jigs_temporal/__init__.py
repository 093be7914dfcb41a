"""jigs steps as Temporal activities: run metadata from the activity, errors mapped to
``ApplicationError(non_retryable=...)``, heartbeats while the agent works (so cancelling the
workflow stops it), and a descriptor type the pydantic data converter rebuilds for any kind.

::

    @jigs_temporal.activity()
    async def review(harness: jigs_temporal.Descriptor, worktree: str) -> AgentResult[None]:
        return await jigs_temporal.run_agent(harness=harness, cwd=worktree, prompt="...")

Run the worker and the client with Temporal's pydantic data converter
(``data_converter=temporalio.contrib.pydantic.pydantic_data_converter``). A step whose
``approve_tool`` defers a call waits for a human's decision in the workflow
(:func:`run_with_approvals`), not in the worker.
"""

from __future__ import annotations

from jigs_temporal._activity import activity, application_error
from jigs_temporal._approvals import (
    APPROVAL_QUERY,
    APPROVAL_UPDATE,
    pending_of,
    run_with_approvals,
)
from jigs_temporal._context import run_metadata
from jigs_temporal._messages import (
    INTERRUPT,
    MESSAGES,
    STEER,
    accept_step_messages,
    interrupt,
    steer,
)
from jigs_temporal._step import Descriptor, create_agent_runner, run_agent

__all__ = [
    "APPROVAL_QUERY",
    "APPROVAL_UPDATE",
    "INTERRUPT",
    "MESSAGES",
    "STEER",
    "Descriptor",
    "accept_step_messages",
    "activity",
    "application_error",
    "create_agent_runner",
    "interrupt",
    "pending_of",
    "run_agent",
    "run_metadata",
    "run_with_approvals",
    "steer",
]
