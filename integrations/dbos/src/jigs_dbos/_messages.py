"""Steer or interrupt a running agent step from outside the worker.

DBOS delivers messages (``DBOS.send``) to workflows only: ``DBOS.recv`` cannot run in a step,
and a workflow that waits on ``recv`` while its step runs would record a timing-dependent number
of ``recv`` calls, which its recovery could not replay. So a message is a record in DBOS' own
system database that the step reads:

- the sender (any process that reaches the database, with a ``DBOSClient``) calls
  :func:`steer` or :func:`interrupt`: it enqueues a message workflow (name
  :data:`MESSAGE_WORKFLOW`, on the queue :data:`MESSAGES_QUEUE`, which no worker serves: it is
  never run) whose id starts with ``"<workflow id>/jigs-message/"`` and whose input is the
  message;
- a step decorated with ``jigs_dbos.step(listen=True)`` lists those ids every ``listen_every``
  seconds (``DBOS.list_workflows_async(workflow_id_prefix=...)``: a read, recorded nowhere),
  applies the messages sent since it started to the step it has open (``run_agent``,
  ``stream_agent``, a runner), in order, and cancels each message it has applied. A steer waits
  until a turn runs; an interrupt ends the running turn (or the next one) with
  :class:`~jigs.errors.AgentInterrupted` (not retryable: the step fails with it, its session
  ref in ``error.session``).

A message names the step it is for (``step=``, the step's name) or none (every listening step
of the workflow).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any

from dbos import DBOS
from jigs.engine._logging import logger
from jigs.engine._mailbox import Action, Mailbox

__all__ = ["MESSAGES_QUEUE", "MESSAGE_WORKFLOW", "interrupt", "steer"]

#: The queue messages are enqueued on (served by no worker).
MESSAGES_QUEUE = "jigs.messages"
#: The name of a message's (never run) workflow.
MESSAGE_WORKFLOW = "jigs_dbos.message"
_ACTIONS: tuple[Action, ...] = ("steer", "interrupt")


def _prefix(workflow_id: str) -> str:
    return f"{workflow_id}/jigs-message/"


def _send(client: Any, workflow_id: str, action: str, text: str | None, step: str | None) -> str:
    message_id = f"{_prefix(workflow_id)}{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
    options = {
        "queue_name": MESSAGES_QUEUE,
        "workflow_name": MESSAGE_WORKFLOW,
        "workflow_id": message_id,
    }
    client.enqueue(options, {"action": action, "text": text, "step": step})
    return message_id


def steer(client: Any, workflow_id: str, text: str, *, step: str | None = None) -> str:
    """Send ``text`` into the running turn of workflow ``workflow_id``'s listening step
    (``step``: only the step of that name). ``client`` is a ``dbos.DBOSClient``. Returns the
    message's id."""
    return _send(client, workflow_id, "steer", text, step)


def interrupt(client: Any, workflow_id: str, *, step: str | None = None) -> str:
    """Interrupt the running turn of workflow ``workflow_id``'s listening step (see
    :func:`steer`)."""
    return _send(client, workflow_id, "interrupt", None, step)


async def listen(mailbox: Mailbox, every: float, step_name: str) -> None:
    """The step's side: apply the messages sent to its workflow since it started, until
    cancelled."""
    prefix = _prefix(str(DBOS.workflow_id))
    seen = {status.workflow_id for status in await _messages(prefix)}
    pending: list[Any] = []
    while True:
        await asyncio.sleep(every)
        for status in await _messages(prefix):
            if status.workflow_id not in seen:
                seen.add(status.workflow_id)
                pending.append(status)
        while pending:
            status = pending[0]
            message = _message_of(status)
            action = message.get("action")
            if message.get("step") not in (None, step_name) or action not in _ACTIONS:
                pending.pop(0)
                continue
            if not await mailbox.apply(action, message.get("text")):
                break
            pending.pop(0)
            with contextlib.suppress(Exception):  # tidiness: an applied message is done
                await DBOS.cancel_workflow_async(status.workflow_id)


async def _messages(prefix: str) -> list[Any]:
    try:
        found: list[Any] = await DBOS.list_workflows_async(
            workflow_id_prefix=prefix, load_input=True, load_output=False, sort_desc=False
        )
    except Exception as exc:  # the database away for a moment: the next poll tries again
        logger.info("dbos.messages.unavailable", error=f"{type(exc).__name__}: {exc}")
        return []
    return found


def _message_of(status: Any) -> dict[str, Any]:
    inputs = getattr(status, "input", None)
    args = inputs.get("args") if isinstance(inputs, dict) else getattr(inputs, "args", None)
    message = args[0] if args else None
    return message if isinstance(message, dict) else {}
