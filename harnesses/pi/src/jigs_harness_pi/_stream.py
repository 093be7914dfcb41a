"""``pi --mode json`` as :mod:`jigs.events`: one :class:`PiDecoder` per turn.

Pi prints one JSON object per line (the engine reads and decodes them):

- the ``session`` header: :class:`SessionStarted`; its id must be the one jigs asked for
  (``--session-id`` / ``--session``), else :class:`AgentSessionError`;
- each assistant ``message_start``: :class:`ModelCallStarted` (a model request, retries
  included); ``text_delta`` / ``thinking_delta`` updates: :class:`TextDelta` /
  :class:`ReasoningDelta`; each assistant ``message_end``: :class:`UsageUpdated` with the turn's
  usage so far (Pi's cost, from the model's prices, summed);
- ``tool_execution_start`` / ``_end``: :class:`ToolCallStarted` / :class:`ToolCallFinished`;
- ``agent_settled`` ends the turn. The *last* assistant message decides (a provider error Pi's
  own retry recovered from does not fail the turn): ``stop`` is :class:`TurnCompleted`;
  ``error`` is ``api_error`` (retryable), ``aborted`` (or a settled abort) ``aborted``,
  ``length`` a truncated answer, anything else ``other`` -- each a :class:`TurnFailed`.

A stream that settles without its session header or an assistant message is
:class:`AgentOutputError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jigs.errors import AgentOutputError, AgentSessionError
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

__all__ = ["PiDecoder"]

_KIND = "pi"


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    blocks = content if isinstance(content, list) else []
    return "".join(
        str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"
    )


@dataclass
class _Totals:
    input: int = 0
    output: int = 0
    total: int = 0
    cache_read: int = 0
    cost: float = 0.0

    def add(self, usage: dict[str, Any]) -> Usage:
        self.input += _int(usage.get("input"))
        self.output += _int(usage.get("output"))
        self.total += _int(usage.get("totalTokens"))
        self.cache_read += _int(usage.get("cacheRead"))
        cost = usage.get("cost")
        if isinstance(cost, dict) and isinstance(cost.get("total"), int | float):
            self.cost += float(cost["total"])
        return Usage(
            input_tokens=self.input,
            output_tokens=self.output,
            total_tokens=self.total or self.input + self.output,
            cached_input_tokens=self.cache_read,
            cost_usd=self.cost,
        )


@dataclass
class PiDecoder:
    """One turn of ``pi --mode json``. ``expected`` is the session id jigs asked for."""

    expected: str | None
    cli: str | None = None
    session_id: str | None = None
    final: dict[str, Any] | None = None
    tool_calls: int = 0
    _totals: _Totals = field(default_factory=_Totals)

    def decode(self, message: dict[str, Any]) -> list[AgentEvent]:
        kind = message.get("type")
        if kind == "session":
            return self._session(message)
        if kind == "message_start" and _assistant(message):
            return [ModelCallStarted()]
        if kind == "message_update":
            update = message.get("assistantMessageEvent")
            if isinstance(update, dict) and isinstance(update.get("delta"), str):
                if update.get("type") == "text_delta":
                    return [TextDelta(text=update["delta"])]
                if update.get("type") == "thinking_delta":
                    return [ReasoningDelta(text=update["delta"])]
            return []
        if kind == "message_end" and _assistant(message):
            self.final = message["message"]
            usage = self.final.get("usage")
            return [UsageUpdated(usage=self._totals.add(usage))] if isinstance(usage, dict) else []
        if kind == "tool_execution_start":
            return [
                ToolCallStarted(
                    id=str(message.get("toolCallId", "")),
                    name=str(message.get("toolName", "")),
                    arguments=message.get("args"),
                )
            ]
        if kind == "tool_execution_end":
            self.tool_calls += 1
            result = message.get("result")
            content = result.get("content") if isinstance(result, dict) else None
            return [
                ToolCallFinished(
                    id=str(message.get("toolCallId", "")),
                    name=str(message.get("toolName", "")),
                    output=_text_of(content) if isinstance(content, list) else result,
                    is_error=bool(message.get("isError")),
                )
            ]
        if kind == "agent_settled":
            return [self._settled(bool(message.get("aborted")))]
        return []

    def _session(self, message: dict[str, Any]) -> list[AgentEvent]:
        reported = message.get("id")
        if self.session_id is not None or not isinstance(reported, str):
            return []
        if self.expected is not None and reported != self.expected:
            raise AgentSessionError(
                f"pi reported session {reported!r} after jigs asked for {self.expected!r}; the "
                f"Pi CLI may be older than 1.6 (run `jigs doctor --harness pi`)",
                kind=_KIND,
                session_id=self.expected,
            )
        self.session_id = reported
        return [SessionStarted(session_id=reported)]

    def _settled(self, aborted: bool) -> AgentEvent:
        if self.session_id is None:
            raise AgentOutputError(
                "pi settled without its session header; it may have failed to start (see its "
                "stderr) or be too old (run `jigs doctor --harness pi`)",
                kind=_KIND,
            )
        final = self.final
        if final is None:
            raise AgentOutputError(
                "pi settled without an assistant message (see its stderr)",
                kind=_KIND,
                session_id=self.session_id,
            )
        stop = str(final.get("stopReason", ""))
        error = final.get("errorMessage")
        said = f": {error}" if error else ""
        if aborted or stop == "aborted":
            return TurnFailed(
                reason="aborted", message=f"pi aborted the turn{said}", stop_reason=stop
            )
        if stop == "error":
            return TurnFailed(
                reason="api_error",
                message=f"the model request failed{said or ' (no error message)'}. Check the "
                f"model source (base_url, model, api_key_env) and the provider's status",
                stop_reason=stop,
                retryable=True,
            )
        if stop == "length":
            return TurnFailed(
                reason="length",
                message="the final answer was truncated (stopReason 'length'): raise the "
                "model's max_tokens or ask for a shorter answer",
                stop_reason=stop,
            )
        if stop != "stop":
            return TurnFailed(
                reason="other",
                message=f"the final assistant message stopped with {stop!r} instead of a "
                f"complete answer",
                stop_reason=stop,
            )
        metadata: dict[str, Any] = {"tool_calls": self.tool_calls, "cli": self.cli}
        for key in ("model", "provider"):
            value = final.get(key)
            metadata[key] = value if isinstance(value, str) else None
        return TurnCompleted(
            text=_text_of(final.get("content")), stop_reason=stop, metadata=metadata
        )


def _assistant(message: dict[str, Any]) -> bool:
    inner = message.get("message")
    return isinstance(inner, dict) and inner.get("role") == "assistant"
