"""``opencode run --format json`` as :mod:`jigs.events`: one :class:`OpencodeDecoder` per turn.

opencode prints one JSON object per line, each with ``type``, ``timestamp``, ``sessionID`` and a
``part`` (or an ``error``):

- the first line's ``sessionID``: :class:`SessionStarted` (a fork reports the copy's id);
- ``step_start`` (one model request of the agent loop): :class:`ModelCallStarted`;
- ``text`` (a finished text part): :class:`TextDelta`; ``reasoning``: :class:`ReasoningDelta`;
- ``tool_use`` (printed once the tool finished or failed): :class:`ToolCallStarted` then
  :class:`ToolCallFinished`;
- ``step_finish``: :class:`UsageUpdated` with the turn's tokens and cost so far; its
  ``reason`` ``stop`` ends the turn with :class:`TurnCompleted` (the text of that last step),
  ``length`` with a truncated answer, ``tool-calls`` goes on to the next step;
- ``error``: :class:`TurnFailed` (``api_error`` for a provider's answer, retryable as opencode
  says; ``aborted``; anything else ``other``).

opencode prints no event while a tool runs, nor a closing one after the last step: a stream that
ends without ``stop`` or an error is the engine's :class:`~jigs.errors.AgentCrashedError` /
:class:`~jigs.errors.AgentOutputError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jigs.errors import AgentSessionError
from jigs.events import (
    AgentEvent,
    ModelCallStarted,
    ReasoningDelta,
    SessionStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnCompleted,
    TurnFailed,
    UsageUpdated,
)
from jigs.models import Usage

__all__ = ["OpencodeDecoder"]


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass
class _Totals:
    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0

    def add(self, part: dict[str, Any]) -> Usage:
        tokens = part.get("tokens") if isinstance(part.get("tokens"), dict) else {}
        assert isinstance(tokens, dict)
        cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
        assert isinstance(cache, dict)
        self.input += _int(tokens.get("input"))
        self.output += _int(tokens.get("output"))
        self.reasoning += _int(tokens.get("reasoning"))
        self.cache_read += _int(cache.get("read"))
        self.cache_write += _int(cache.get("write"))
        cost = part.get("cost")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            self.cost += float(cost)
        # opencode counts cache reads and writes apart from its input tokens; jigs' input
        # tokens include them, and its output tokens the reasoning ones
        read, write = self.cache_read, self.cache_write
        return Usage(
            input_tokens=self.input + read + write,
            output_tokens=self.output + self.reasoning,
            total_tokens=self.input + read + write + self.output + self.reasoning,
            cached_input_tokens=read,
            cache_write_tokens=write,
            cost_usd=self.cost,
        )


@dataclass
class OpencodeDecoder:
    """One turn of ``opencode run --format json``. ``expected`` is the session jigs continues
    in place (None for a fresh session or a fork, whose id opencode picks)."""

    expected: str | None = None
    cli: str | None = None
    session_id: str | None = None
    tool_calls: int = 0
    _step_text: list[str] = field(default_factory=list)
    _totals: _Totals = field(default_factory=_Totals)

    def decode(self, message: dict[str, Any]) -> list[AgentEvent]:
        events = self._session(message.get("sessionID"))
        kind = message.get("type")
        part = message.get("part")
        part = part if isinstance(part, dict) else {}
        if kind == "step_start":
            self._step_text.clear()
            events.append(ModelCallStarted())
        elif kind == "text" and isinstance(part.get("text"), str):
            self._step_text.append(part["text"])
            events.append(TextDelta(text=part["text"]))
        elif kind == "reasoning" and isinstance(part.get("text"), str):
            events.append(ReasoningDelta(text=part["text"]))
        elif kind == "tool_use":
            events += self._tool(part)
        elif kind == "step_finish":
            events.append(UsageUpdated(usage=self._totals.add(part)))
            end = self._finished(str(part.get("reason", "")))
            if end is not None:
                events.append(end)
        elif kind == "error":
            events.append(_failure(message.get("error")))
        return events

    def _session(self, reported: Any) -> list[AgentEvent]:
        if self.session_id is not None or not isinstance(reported, str) or not reported:
            return []
        if self.expected is not None and reported != self.expected:
            raise AgentSessionError(
                f"opencode reported session {reported!r} after jigs asked to continue "
                f"{self.expected!r}",
                kind="opencode",
                session_id=self.expected,
            )
        self.session_id = reported
        return [SessionStarted(session_id=reported)]

    def _tool(self, part: dict[str, Any]) -> list[AgentEvent]:
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        assert isinstance(state, dict)
        call_id, name = str(part.get("callID") or part.get("id") or ""), str(part.get("tool", ""))
        failed = state.get("status") == "error"
        self.tool_calls += 1
        return [
            ToolCallStarted(id=call_id, name=name, arguments=state.get("input")),
            ToolCallFinished(
                id=call_id,
                name=name,
                output=state.get("error") if failed else state.get("output"),
                is_error=failed,
            ),
        ]

    def _finished(self, reason: str) -> AgentEvent | None:
        if reason in {"tool-calls", "unknown", ""}:
            return None  # the agent loop goes on with the tools' results
        if reason == "stop":
            metadata = {"tool_calls": self.tool_calls, "cli": self.cli}
            return TurnCompleted(
                text="".join(self._step_text), stop_reason=reason, metadata=metadata
            )
        if reason == "length":
            return TurnFailed(
                reason="length",
                message="the final answer was truncated (finish reason 'length'): raise the "
                "descriptor's output_tokens or ask for a shorter answer",
                stop_reason=reason,
            )
        return TurnFailed(
            reason="other",
            message=f"the model's last step ended with {reason!r} instead of a complete answer",
            stop_reason=reason,
        )


def _failure(error: Any) -> TurnFailed:
    error = error if isinstance(error, dict) else {}
    name = str(error.get("name", "error"))
    data = error.get("data") if isinstance(error.get("data"), dict) else {}
    assert isinstance(data, dict)
    said = str(data.get("message") or name)[:2000]
    if name == "MessageAbortedError":
        return TurnFailed(reason="aborted", message=f"opencode aborted the turn: {said}")
    if name in {"APIError", "ProviderAuthError"} or "statusCode" in data:
        status = data.get("statusCode")
        retryable = bool(data.get("isRetryable", name == "APIError"))
        return TurnFailed(
            reason="api_error",
            message=f"the model request failed ({name}, status {status}): {said}. Check the "
            f"descriptor's base_url, model and api_key_env, and the provider's status",
            retryable=retryable,
        )
    return TurnFailed(reason="other", message=f"opencode failed the turn ({name}): {said}")
