"""One typed event stream for every harness kind.

A kind's decoder turns each message its CLI prints into these events; the core's turn engine
(:mod:`jigs._engine`) reads them to apply deadlines and limits, to build results and errors, and
hands them to ``on_event`` callbacks. They are frozen records (:class:`~jigs._record.Record`) in
a tagged union (:data:`AgentEvent`, keyed on ``type``): ``event.to_data()`` gives JSON-ready data
and :func:`event_from_data` rebuilds the event (pydantic models accept them as fields too).

Events a decoder emits:

- :class:`SessionStarted` -- the resumable session id, as soon as the CLI reports it;
- :class:`ModelCallStarted` -- one model request began (``max_turns`` counts these);
- :class:`TextDelta` / :class:`ReasoningDelta` -- answer and reasoning text as it arrives;
- :class:`ToolCallStarted` / :class:`ToolCallFinished` -- a tool the agent ran, with its result;
- :class:`UsageUpdated` -- the turn's usage *so far* (tokens and cost; cumulative over the turn);
- :class:`Notice` -- a warning the CLI printed;
- exactly one of :class:`TurnCompleted` (the final text, the stop reason, a native structured
  output) or :class:`TurnFailed` (why the turn failed, in jigs' categories) ends the turn.
"""

# no `from __future__ import annotations`: msgspec reads these classes' annotations as objects,
# never by looking the module up in sys.modules (a Temporal workflow sandbox does not have it)

from collections.abc import Mapping
from typing import Any

import msgspec
from msgspec import field

from jigs._record import Record, record_error_message
from jigs._usage import Usage
from jigs.errors import InvalidInputError

__all__ = [
    "AgentEvent",
    "ModelCallStarted",
    "Notice",
    "ReasoningDelta",
    "SessionStarted",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "TurnCompleted",
    "TurnFailed",
    "UsageUpdated",
    "event_from_data",
]


class _Event(Record, tag_field="type"):
    @property
    def type(self) -> str:
        """The event's tag (``"text-delta"``, ``"turn-completed"``...), the ``type`` key of its
        data."""
        return str(self.__struct_config__.tag)


class SessionStarted(_Event, tag="session"):
    """The session the turn runs in (a later step resumes it)."""

    session_id: str


class ModelCallStarted(_Event, tag="model-call"):
    """One model request of the turn began."""


class TextDelta(_Event, tag="text-delta"):
    """A piece of the agent's answer text."""

    text: str


class ReasoningDelta(_Event, tag="reasoning-delta"):
    """A piece of the model's reasoning summary, where the CLI reports one."""

    text: str


class ToolCallStarted(_Event, tag="tool-call-started"):
    """The agent called a tool (the CLI runs it)."""

    id: str
    name: str
    arguments: Any = None


class ToolCallFinished(_Event, tag="tool-call-finished"):
    """A tool call returned."""

    id: str
    name: str
    output: Any = None
    is_error: bool = False


class UsageUpdated(_Event, tag="usage"):
    """The turn's usage so far (replaces any earlier figure of the same turn)."""

    usage: Usage


class Notice(_Event, tag="notice"):
    """Something the CLI warned about; the turn goes on."""

    message: str


class TurnCompleted(_Event, tag="turn-completed"):
    """The turn ended with an answer. ``output`` is the native structured output, if any."""

    text: str
    stop_reason: str | None = None
    output: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)


class TurnFailed(_Event, tag="turn-failed"):
    """The turn ended without an answer.

    ``reason`` is jigs' category: ``api_error`` (the model endpoint failed; retryable),
    ``not_logged_in``, ``length`` (truncated), ``aborted``, ``max_turns``, ``max_budget_usd``,
    ``structured_output`` or ``other``. ``message`` is what the CLI said.
    """

    reason: str
    message: str
    stop_reason: str | None = None
    retryable: bool = False


#: Any event of the stream; the data's ``type`` key picks the class.
AgentEvent = (
    SessionStarted
    | ModelCallStarted
    | TextDelta
    | ReasoningDelta
    | ToolCallStarted
    | ToolCallFinished
    | UsageUpdated
    | Notice
    | TurnCompleted
    | TurnFailed
)


def event_from_data(data: Mapping[str, Any]) -> AgentEvent:
    """Rebuild an event from its data (``event.to_data()``, or a step log line's keys); fails
    with :class:`~jigs.errors.InvalidInputError` naming the key, never the value."""
    message = None
    try:
        event: AgentEvent = msgspec.convert(dict(data), AgentEvent)
        return event
    except msgspec.ValidationError as exc:
        message = record_error_message(exc, "an event")

    raise InvalidInputError(f"invalid event: {message}", argument="event")
