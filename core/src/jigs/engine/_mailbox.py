"""Messages for the running steps of one engine step (a Temporal activity, a DBOS step).

A durable engine's integration opens a :class:`Mailbox` around the step's function
(:func:`listening`); every step opened in it (``run_agent``, ``stream_agent``,
``create_agent_runner``, in that task or its children) registers its turn engine while it is
open. The integration hands each message it receives from the workflow to :meth:`Mailbox.apply`,
which steers or interrupts the newest open step, and keeps what cannot be applied yet (no step
open, or a steer while no turn runs) for the next try.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Literal

from jigs.engine._logging import logger
from jigs.errors import JigsError, SteerRefusedError

if TYPE_CHECKING:
    from jigs.engine._engine import TurnEngine

__all__ = ["Action", "Mailbox", "current", "listening"]

Action = Literal["steer", "interrupt"]

_current: ContextVar[Mailbox | None] = ContextVar("jigs_mailbox", default=None)


class Mailbox:
    """The open steps of one engine step, and how a message reaches them."""

    def __init__(self) -> None:
        self._engines: list[TurnEngine] = []

    def add(self, engine: TurnEngine) -> None:
        """Register an opened step's engine; it is removed when the step closes."""
        self._engines.append(engine)
        engine.ctx.callback(self._remove, engine)

    def _remove(self, engine: TurnEngine) -> None:
        with contextlib.suppress(ValueError):
            self._engines.remove(engine)

    async def apply(self, action: Action, text: str | None = None) -> bool:
        """Steer or interrupt the newest open step; True when done with the message (applied,
        or dropped with a log line: a kind that cannot steer, an empty text), False to keep it
        for later (no step open yet, or no turn running to steer)."""
        if not self._engines:
            return False
        engine = self._engines[-1]
        if action == "interrupt":
            # a step between turns (opening, or a runner idle) has its next turn interrupted
            await engine.interrupt(next_turn=True)
            return True
        try:
            await engine.steer(text or "")
        except SteerRefusedError as exc:
            if exc.reason == "idle":
                return False
            logger.warning("step.message.dropped", action=action, error=str(exc))
        except JigsError as exc:
            logger.warning("step.message.dropped", action=action, error=str(exc))
        return True


def current() -> Mailbox | None:
    """The mailbox of the running engine step, if its integration opened one."""
    return _current.get()


@contextlib.contextmanager
def listening() -> Iterator[Mailbox]:
    """A mailbox for the steps opened in the block (and the tasks it starts)."""
    mailbox = Mailbox()
    token = _current.set(mailbox)
    try:
        yield mailbox
    finally:
        _current.reset(token)
