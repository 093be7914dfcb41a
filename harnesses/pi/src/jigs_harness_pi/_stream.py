"""Reading ``pi --mode json``: one JSON object per line, ending with ``agent_settled``.

:class:`PiStream` is fed the lines as they arrive and, at the end, :meth:`PiStream.outcome` says
what the turn produced or raises the typed error that describes what went wrong:

- a line that is not a JSON object: :class:`AgentOutputError` naming the line number;
- no session header, or a stream that ends before ``agent_settled``: :class:`AgentOutputError`;
- the final assistant message stopped with ``error`` or ``aborted`` (Pi still exits 0), or the
  run was aborted: :class:`AgentTurnError` with Pi's error message;
- ``length``: :class:`AgentTurnError` (a truncated answer is never handed on as complete).

The last assistant message before ``agent_settled`` decides the outcome, so a provider error that
Pi's own retry recovered from does not fail the turn.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from jigs.errors import AgentOutputError, AgentTurnError
from jigs.models import Usage

__all__ = ["PiOutcome", "PiStream"]

_KIND = "pi"


@dataclass(frozen=True, slots=True)
class PiOutcome:
    """A settled, successful turn."""

    text: str
    session_id: str
    usage: Usage
    model: str | None
    provider: str | None
    stop_reason: str
    tool_calls: int


@dataclass(slots=True)
class _Totals:
    input: int = 0
    output: int = 0
    total: int = 0
    cache_read: int = 0
    cost: float = 0.0
    seen: bool = False

    def add(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        self.seen = True
        self.input += _int(usage.get("input"))
        self.output += _int(usage.get("output"))
        self.total += _int(usage.get("totalTokens"))
        self.cache_read += _int(usage.get("cacheRead"))
        cost = usage.get("cost")
        if isinstance(cost, dict) and isinstance(cost.get("total"), int | float):
            self.cost += float(cost["total"])

    def usage(self) -> Usage:
        if not self.seen:
            return Usage()
        return Usage(
            input_tokens=self.input,
            output_tokens=self.output,
            total_tokens=self.total or self.input + self.output,
            cached_input_tokens=self.cache_read,
            cost_usd=self.cost,
        )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


@dataclass(slots=True)
class PiStream:
    """Incremental reader of one ``pi --mode json`` invocation."""

    lines: int = 0
    session_id: str | None = None
    settled: bool = False
    aborted: bool = False
    final: dict[str, Any] | None = None
    tool_calls: int = 0
    _totals: _Totals = field(default_factory=_Totals)

    def feed(self, raw: bytes) -> dict[str, Any]:
        """Take the next stdout line; returns the event. Raises :class:`AgentOutputError` for a
        line that is not a JSON object."""
        self.lines += 1
        line = raw.rstrip(b"\r")
        try:
            event = json.loads(line)
        except ValueError:
            raise AgentOutputError(
                f"pi printed a line that is not JSON (line {self.lines}): {line[:120]!r}. "
                f"Check that $JIGS_PI_EXECUTABLE / the resolved pi is the Pi coding agent and "
                f"that nothing else writes to its stdout",
                kind=_KIND,
                line=self.lines,
            ) from None
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise AgentOutputError(
                f"pi printed a JSON value that is not an event (line {self.lines}): {line[:120]!r}",
                kind=_KIND,
                line=self.lines,
            )
        self._take(event)
        return event

    def _take(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "session":
            if self.session_id is None and isinstance(event.get("id"), str):
                self.session_id = event["id"]
        elif kind == "message_end":
            message = event.get("message")
            if isinstance(message, dict) and message.get("role") == "assistant":
                self.final = message
                self._totals.add(message.get("usage"))
        elif kind == "tool_execution_end":
            self.tool_calls += 1
        elif kind == "agent_settled":
            self.settled = True
            self.aborted = bool(event.get("aborted"))

    def outcome(self) -> PiOutcome:
        """The turn's result once the stream has ended; raises what went wrong."""
        if self.session_id is None:
            raise AgentOutputError(
                f"pi ended without its session header after {self.lines} line(s); it may have "
                f"failed to start (see its stderr)",
                kind=_KIND,
                line=self.lines,
            )
        if not self.settled:
            raise AgentOutputError(
                f"pi's event stream ended before agent_settled (after {self.lines} line(s)), so "
                f"the turn did not finish",
                kind=_KIND,
                line=self.lines,
            )
        final = self.final
        if final is None:
            raise AgentOutputError(
                "pi settled without an assistant message", kind=_KIND, line=self.lines
            )
        stop = str(final.get("stopReason", ""))
        error = final.get("errorMessage")
        if self.aborted or stop == "aborted":
            raise AgentTurnError(
                f"pi aborted the turn{f': {error}' if error else ''}",
                kind=_KIND,
                detail=str(error) if error else None,
            )
        if stop == "error":
            raise AgentTurnError(
                f"pi's model request failed: {error or 'no error message'}. Check the model "
                f"source (base_url, model, api_key_env) and the provider's status",
                kind=_KIND,
                detail=str(error) if error else None,
            )
        if stop == "length":
            raise AgentTurnError(
                "pi's final answer was truncated (stopReason 'length'): raise the model's "
                "max_tokens or ask for a shorter answer",
                kind=_KIND,
                detail="length",
            )
        if stop != "stop":
            raise AgentTurnError(
                f"pi's final assistant message stopped with {stop!r} instead of a complete answer",
                kind=_KIND,
                detail=stop,
            )
        return PiOutcome(
            text=_text_of(final),
            session_id=self.session_id,
            usage=self._totals.usage(),
            model=final.get("model") if isinstance(final.get("model"), str) else None,
            provider=final.get("provider") if isinstance(final.get("provider"), str) else None,
            stop_reason=stop,
            tool_calls=self.tool_calls,
        )
