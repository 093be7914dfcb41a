"""Claude Code's stream-json messages as :mod:`jigs.events`.

A :class:`ClaudeDecoder` reads one turn: ``system``/``init`` (the session), ``assistant`` (one
model request per message id; text and ``tool_use`` blocks), ``user`` (``tool_result`` blocks),
``stream_event`` (text deltas, with ``--include-partial-messages``) and ``result`` (usage and
cost, then :class:`TurnCompleted` or :class:`TurnFailed`). Messages of subagents
(``parent_tool_use_id`` set) are not the turn's own and give no events.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jigs.events import (
    AgentEvent,
    ModelCallStarted,
    Notice,
    SessionStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnCompleted,
    TurnFailed,
    UsageUpdated,
)
from jigs.models import Usage

__all__ = ["NOT_LOGGED_IN", "ClaudeDecoder"]

NOT_LOGGED_IN = (
    "Claude Code is not logged in (and the descriptor names no key). Run the Claude Code CLI "
    "jigs uses (its path is in the `Claude Code CLI` row of `jigs doctor --harness claude`) "
    "once and /login as the user the service runs as (or set CLAUDE_CONFIG_DIR to where that "
    "login lives), or give the descriptor base_url/api_key_env for an Anthropic-compatible "
    "endpoint"
)
#: The step's options jigs knows (``on_event`` is taken by the core).
_OPTIONS = frozenset({"on_event"})
_RETRYABLE = frozenset(
    {"connection_failed", "server_error", "api_error", "rate_limit", "overloaded"}
)
#: ``result`` subtypes that are a limit or a schema failure, with jigs' reason and message.
_SUBTYPES = {
    "error_max_turns": ("max_turns", "Claude Code stopped at its turn limit (--max-turns)"),
    "error_max_budget_usd": ("max_budget_usd", "Claude Code stopped at its budget"),
    "error_max_structured_output_retries": (
        "structured_output",
        "Claude Code could not produce output matching the schema after its retries; simplify "
        "the schema or the prompt",
    ),
}


class ClaudeDecoder:
    """One turn's messages as events. ``partial``: text comes from ``stream_event`` deltas
    (``--include-partial-messages``), else from whole assistant text blocks."""

    def __init__(self, *, partial: bool, options: Mapping[str, Any] | None = None) -> None:
        self.partial = partial
        self._unknown = sorted(set(options or ()) - _OPTIONS)
        self._init: dict[str, Any] = {}
        self._session: str | None = None
        self._messages: set[str] = set()
        self._names: dict[str, str] = {}
        self._error_kind: str | None = None
        self._error_text = ""

    def decode(self, message: dict[str, Any]) -> list[AgentEvent]:
        events: list[AgentEvent] = [
            Notice(message=f"unknown claude provider option {name}") for name in self._unknown
        ]
        self._unknown = []
        session = message.get("session_id")
        if isinstance(session, str) and session and session != self._session:
            self._session = session
            events.append(SessionStarted(session_id=session))
        kind = message.get("type")
        top = message.get("parent_tool_use_id") is None
        if kind == "system" and message.get("subtype") == "init":
            self._init = message
        elif kind == "assistant":
            events += self._assistant(message, top)
        elif kind == "user" and top:
            events += self._tool_results(message)
        elif kind == "stream_event" and self.partial and top:
            raw = message.get("event") or {}
            delta = raw.get("delta") or {}
            text = delta.get("text") if raw.get("type") == "content_block_delta" else None
            if delta.get("type") == "text_delta" and text:
                events.append(TextDelta(text=str(text)))
        elif kind == "result":
            events += self._result(message)
        return events

    def _assistant(self, message: dict[str, Any], top: bool) -> list[AgentEvent]:
        body = message.get("message") or {}
        if message.get("error"):
            self._error_kind = str(message["error"])
            self._error_text = _text_of(body)
        if not top:
            return []
        events: list[AgentEvent] = []
        message_id = str(body.get("id") or message.get("uuid") or "")
        if message_id not in self._messages:
            self._messages.add(message_id)
            events.append(ModelCallStarted())
        for block in body.get("content") or ():
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and not self.partial and not message.get("error"):
                if block.get("text"):
                    events.append(TextDelta(text=str(block["text"])))
            elif block.get("type") == "tool_use":
                call_id, name = str(block.get("id") or ""), str(block.get("name") or "")
                self._names[call_id] = name
                events.append(ToolCallStarted(id=call_id, name=name, arguments=block.get("input")))
        return events

    def _tool_results(self, message: dict[str, Any]) -> list[AgentEvent]:
        content = (message.get("message") or {}).get("content")
        return [
            ToolCallFinished(
                id=str(block.get("tool_use_id") or ""),
                name=self._names.get(str(block.get("tool_use_id") or ""), ""),
                output=block.get("content"),
                is_error=bool(block.get("is_error")),
            )
            for block in (content if isinstance(content, list) else ())
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]

    def _result(self, result: dict[str, Any]) -> list[AgentEvent]:
        usage = UsageUpdated(usage=_usage(result))
        subtype = str(result.get("subtype") or "")
        stop = result.get("stop_reason")
        stop_reason = str(stop) if stop is not None else None
        if result.get("is_error") or subtype.startswith("error"):
            return [usage, self._failed(result, subtype, stop_reason)]
        init = self._init
        metadata: dict[str, Any] = {
            "num_turns": result.get("num_turns"),
            "duration_ms": result.get("duration_ms"),
            "duration_api_ms": result.get("duration_api_ms"),
            "stop_reason": stop_reason,
            "terminal_reason": result.get("terminal_reason"),
            "permission_denials": result.get("permission_denials") or [],
            "model_usage": result.get("modelUsage") or {},
            "model": init.get("model"),
            "claude_code_version": init.get("claude_code_version"),
            "api_key_source": init.get("apiKeySource"),
            "mcp_servers": init.get("mcp_servers") or [],
        }
        completed = TurnCompleted(
            text=str(result.get("result") or ""),
            stop_reason=stop_reason,
            output=result.get("structured_output"),
            metadata=metadata,
        )
        return [usage, completed]

    def _failed(self, result: dict[str, Any], subtype: str, stop: str | None) -> TurnFailed:
        detail = str(result.get("result") or self._error_text or "").strip()
        kind = self._error_kind or str(result.get("api_error") or "") or subtype
        if kind == "authentication_failed" and self._init.get("apiKeySource") in (None, "none"):
            message = f"{NOT_LOGGED_IN} (Claude Code said: {detail[:200] or 'not logged in'})"
            return TurnFailed(reason="not_logged_in", message=message, stop_reason=stop)
        if subtype in _SUBTYPES:
            reason, message = _SUBTYPES[subtype]
            retryable = False
        elif self._error_kind or result.get("api_error"):
            reason, retryable = "api_error", kind in _RETRYABLE
            message = f"the model request failed ({kind})"
            if retryable:
                message += (
                    "; check that the model endpoint (the descriptor's base_url, or the "
                    "Anthropic API for a login) is reachable, and retry"
                )
        else:
            reason, retryable = "other", False
            message = f"Claude Code failed while running the turn ({kind})"
        if detail:
            message += f": {detail[:500]}"
        return TurnFailed(reason=reason, message=message, stop_reason=stop, retryable=retryable)


def _text_of(message: dict[str, Any]) -> str:
    return "".join(
        str(b.get("text") or "")
        for b in message.get("content") or ()
        if isinstance(b, dict) and b.get("type") == "text"
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _usage(result: dict[str, Any]) -> Usage:
    raw = result.get("usage")
    cost = result.get("total_cost_usd")
    cost_usd = float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None
    if not isinstance(raw, dict):
        return Usage(cost_usd=cost_usd)
    cached = _int(raw.get("cache_read_input_tokens"))
    inputs = _int(raw.get("input_tokens")) + cached + _int(raw.get("cache_creation_input_tokens"))
    outputs = _int(raw.get("output_tokens"))
    return Usage(
        input_tokens=inputs,
        output_tokens=outputs,
        total_tokens=inputs + outputs,
        cached_input_tokens=cached,
        cost_usd=cost_usd,
    )
