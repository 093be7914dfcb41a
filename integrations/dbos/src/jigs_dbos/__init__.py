"""jigs steps on DBOS: run metadata from the workflow, retries from ``JigsError.retryable``,
workflow cancellation that stops the agent, and a JSON serializer for jigs' types.

::

    from dbos import DBOS
    import jigs_dbos

    @jigs_dbos.step()
    async def review(worktree: str, session: AgentSessionRef) -> AgentResult[None]:
        return await jigs_dbos.run_agent(harness=..., cwd=worktree, prompt=..., resume=session)

A step whose ``approve_tool`` defers a call, or whose agent asks a question
(:func:`~jigs.steps.ask_human`), waits for a human in the workflow (:func:`run_with_approvals`),
not in the worker.
"""

from __future__ import annotations

from jigs_dbos._approvals import APPROVAL_TOPIC, run_with_approvals
from jigs_dbos._context import run_metadata
from jigs_dbos._messages import MESSAGE_WORKFLOW, MESSAGES_QUEUE, interrupt, steer
from jigs_dbos._retry import should_retry
from jigs_dbos._serializer import JigsSerializer
from jigs_dbos._step import create_agent_runner, run_agent, step

__all__ = [
    "APPROVAL_TOPIC",
    "MESSAGES_QUEUE",
    "MESSAGE_WORKFLOW",
    "JigsSerializer",
    "create_agent_runner",
    "interrupt",
    "run_agent",
    "run_metadata",
    "run_with_approvals",
    "should_retry",
    "steer",
    "step",
]
