"""One typed event stream for every harness kind.

A kind's decoder turns each message its CLI prints into these events; the core's turn engine
(:mod:`jigs.engine._engine`) reads them to apply deadlines and limits, to build results and errors,
and hands them to ``on_event`` callbacks. They are frozen pydantic models
(:class:`~jigs.policy._record.Record`) in a union discriminated on ``type`` (:data:`AgentEvent`, a
valid field type of any pydantic model): ``event.model_dump(mode="json")`` gives JSON-ready data and
:func:`event_from_data` rebuilds the event.

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

import functools
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError

from jigs.engine._usage import Usage
from jigs.errors import InvalidInputError
from jigs.policy._record import Record, record_error_message

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


class _Event(Record):
    #: The event's tag (``"text-delta"``, ``"turn-completed"``...), the ``type`` key of its data.
    type: str


class SessionStarted(_Event):
    """The session the turn runs in (a later step resumes it)."""

    type: Literal["session"] = "session"
    session_id: str


class ModelCallStarted(_Event):
    """One model request of the turn began."""

    type: Literal["model-call"] = "model-call"


class TextDelta(_Event):
    """A piece of the agent's answer text."""

    type: Literal["text-delta"] = "text-delta"
    text: str


class ReasoningDelta(_Event):
    """A piece of the model's reasoning summary, where the CLI reports one."""

    type: Literal["reasoning-delta"] = "reasoning-delta"
    text: str


class ToolCallStarted(_Event):
    """The agent called a tool (the CLI runs it)."""

    type: Literal["tool-call-started"] = "tool-call-started"
    id: str
    name: str
    arguments: Any = None


class ToolCallFinished(_Event):
    """A tool call returned."""

    type: Literal["tool-call-finished"] = "tool-call-finished"
    id: str
    name: str
    output: Any = None
    is_error: bool = False


class UsageUpdated(_Event):
    """The turn's usage so far (replaces any earlier figure of the same turn)."""

    type: Literal["usage"] = "usage"
    usage: Usage


class Notice(_Event):
    """Something the CLI warned about; the turn goes on."""

    type: Literal["notice"] = "notice"
    message: str


class TurnCompleted(_Event):
    """The turn ended with an answer. ``output`` is the native structured output, if any."""

    type: Literal["turn-completed"] = "turn-completed"
    text: str
    stop_reason: str | None = None
    output: Any = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class TurnFailed(_Event):
    """The turn ended without an answer.

    ``reason`` is jigs' category: ``api_error`` (the model endpoint failed; retryable),
    ``not_logged_in``, ``length`` (truncated), ``aborted``, ``max_turns``, ``max_budget_usd``,
    ``structured_output`` or ``other``. ``message`` is what the CLI said.
    """

    type: Literal["turn-failed"] = "turn-failed"
    reason: str
    message: str
    stop_reason: str | None = None
    retryable: bool = False


#: Any event of the stream: a union discriminated by the ``type`` key.
AgentEvent = Annotated[
    SessionStarted
    | ModelCallStarted
    | TextDelta
    | ReasoningDelta
    | ToolCallStarted
    | ToolCallFinished
    | UsageUpdated
    | Notice
    | TurnCompleted
    | TurnFailed,
    Field(discriminator="type"),
]


@functools.cache
def _events() -> TypeAdapter[AgentEvent]:
    return TypeAdapter(AgentEvent)


def event_from_data(data: Mapping[str, Any]) -> AgentEvent:
    """Rebuild an event from its data (``event.to_data()``, or a step log line's keys); fails
    with :class:`~jigs.errors.InvalidInputError` naming the key, never the value."""
    message = None
    try:
        return _events().validate_python(dict(data))
    except ValidationError as exc:
        message = record_error_message(exc, "an event", AgentEvent)

    raise InvalidInputError(f"invalid event: {message}", argument="event")
