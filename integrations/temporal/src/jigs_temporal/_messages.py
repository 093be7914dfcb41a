"""Steer or interrupt a running agent activity from outside the worker.

Temporal has no channel from a workflow into a running activity but cancellation, which would
lose the turn. So the messages live in the workflow and the activity asks for them:

- the workflow calls :func:`accept_step_messages` once (at the start of its run method); it
  registers two signals, :data:`STEER` ``(step, text)`` and :data:`INTERRUPT` ``(step,)``,
  and a query, :data:`MESSAGES` ``(step) -> [...]``, that lists the messages sent to one step
  (an activity id, chosen with ``execute_activity(..., activity_id=...)``);
- anyone with a client signals the workflow (:func:`steer`, :func:`interrupt`, or
  ``handle.signal(STEER, args=[step, text])``), while the activity runs or before it starts;
- an activity decorated with ``jigs_temporal.activity(listen=True)`` queries its workflow every
  ``listen_every`` seconds (through the worker's client) and applies each new message to the
  step it has open (``run_agent``, ``stream_agent``, a runner): a steer waits until a turn runs,
  an interrupt ends the running turn (or the next one) with
  :class:`~jigs.errors.AgentInterrupted`, which reaches the workflow as a non-retryable
  ``ApplicationError`` whose details hold the session to resume.

A query instead of a signal into the activity keeps the workflow deterministic (signals only
append to its state) and needs no extra service; the cost is one query per listening activity
every ``listen_every`` seconds.
"""

from __future__ import annotations

import asyncio
from typing import Any

from jigs.engine._logging import logger
from jigs.engine._mailbox import Mailbox

__all__ = ["INTERRUPT", "MESSAGES", "STEER", "accept_step_messages", "interrupt", "steer"]

#: The signal that steers a step: ``args=[step, text]``.
STEER = "jigs.steer"
#: The signal that interrupts a step: ``args=[step]``.
INTERRUPT = "jigs.interrupt"
#: The query an activity asks for its messages: ``args=[step]``.
MESSAGES = "jigs.step_messages"


def accept_step_messages() -> None:
    """Register :data:`STEER`, :data:`INTERRUPT` and :data:`MESSAGES` on the running workflow
    (call it in the workflow's run method, before the activities start; signals sent earlier
    are delivered then)."""
    from temporalio import workflow

    messages: list[dict[str, Any]] = []

    def on_steer(step: str, text: str) -> None:
        messages.append({"step": step, "action": "steer", "text": text})

    def on_interrupt(step: str) -> None:
        messages.append({"step": step, "action": "interrupt", "text": None})

    def on_query(step: str) -> list[dict[str, Any]]:
        return [m for m in messages if m["step"] == step]

    workflow.set_signal_handler(STEER, on_steer)
    workflow.set_signal_handler(INTERRUPT, on_interrupt)
    workflow.set_query_handler(MESSAGES, on_query)


async def steer(handle: Any, step: str, text: str) -> None:
    """Send ``text`` to the running turn of the workflow's activity ``step`` (a workflow
    handle from a client)."""
    await handle.signal(STEER, args=[step, text])


async def interrupt(handle: Any, step: str) -> None:
    """Interrupt the running turn of the workflow's activity ``step``."""
    await handle.signal(INTERRUPT, args=[step])


async def listen(mailbox: Mailbox, every: float, activity: Any) -> None:
    """The activity's side (``activity``: the ``temporalio.activity`` module): apply its
    workflow's messages for it, in order, until cancelled."""
    info = activity.info()
    handle = activity.client().get_workflow_handle(
        str(info.workflow_id), run_id=info.workflow_run_id
    )
    applied = 0
    while True:
        await asyncio.sleep(every)
        try:
            messages = await handle.query(MESSAGES, info.activity_id)
        except Exception as exc:  # a workflow without accept_step_messages, a server away
            logger.info("temporal.messages.unavailable", error=f"{type(exc).__name__}: {exc}")
            continue
        while applied < len(messages):
            message = messages[applied]
            if not await mailbox.apply(message["action"], message.get("text")):
                break
            applied += 1
