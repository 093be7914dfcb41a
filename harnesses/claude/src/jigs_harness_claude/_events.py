"""Claude Code's stream-json events, turned into jigs stream parts and one result.

A :class:`TurnReader` is fed one decoded event at a time (``system``/``init``, ``assistant``,
``user`` tool results, ``stream_event`` partial messages, ``result``) and returns the parts to
yield. :meth:`TurnReader.finish` turns the ``result`` event into a :class:`GenerateResult`, or
raises :class:`AgentTurnError` for a result that reports a failure (an API error, not logged in,
the turn or budget limit, structured output that never validated).
"""

from __future__ import annotations

from typing import Any

from jigs.errors import AgentTurnError
from jigs.models import (
    CallWarning,
    FinishReason,
    GenerateResult,
    StreamPart,
    TextDeltaPart,
    ToolCall,
    ToolCallPart,
    ToolResult,
    ToolResultPart,
    Usage,
)

__all__ = ["PROVIDER", "TurnReader"]

PROVIDER = "claude"

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "stop",  # the harness ran the tools; the turn ended (e.g. structured output)
    "max_tokens": "length",
    "refusal": "content-filter",
}

_NOT_LOGGED_IN = (
    "Claude Code is not logged in (and the descriptor names no key). Run `claude` once and "
    "/login as the user the service runs as (or set CLAUDE_CONFIG_DIR to where that login "
    "lives), or give the descriptor base_url/api_key_env for an Anthropic-compatible endpoint"
)


class TurnReader:
    """Accumulates one turn. ``partial`` says whether ``stream_event`` deltas carry the text
    (``--include-partial-messages``); otherwise whole assistant text blocks do."""

    def __init__(self, *, partial: bool) -> None:
        self.partial = partial
        self.init: dict[str, Any] | None = None
        self.result: dict[str, Any] | None = None
        self.session_id: str | None = None
        self.error_kind: str | None = None
        self.error_text: str | None = None
        self.tool_calls: list[ToolCall] = []
        self.tool_results: list[ToolResult] = []
        self._names: dict[str, str] = {}

    def feed(self, event: dict[str, Any]) -> list[StreamPart]:
        """The parts this event produces (often none)."""
        kind = event.get("type")
        session = event.get("session_id")
        if isinstance(session, str) and session:
            self.session_id = session
        if kind == "system" and event.get("subtype") == "init":
            self.init = event
        elif kind == "assistant":
            return self._assistant(event)
        elif kind == "user":
            return self._tool_results(event)
        elif kind == "stream_event" and self.partial:
            return self._partial(event)
        elif kind == "result":
            self.result = event
        return []

    def _top_level(self, event: dict[str, Any]) -> bool:
        return event.get("parent_tool_use_id") is None

    def _assistant(self, event: dict[str, Any]) -> list[StreamPart]:
        message = event.get("message") or {}
        if event.get("error"):
            self.error_kind = str(event["error"])
            self.error_text = _text_of(message)
        if not self._top_level(event):
            return []
        parts: list[StreamPart] = []
        for block in message.get("content") or ():
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and not self.partial and not event.get("error"):
                text = str(block.get("text") or "")
                if text:
                    parts.append(TextDeltaPart(text=text))
            elif block.get("type") == "tool_use":
                call = ToolCall(
                    id=str(block.get("id") or ""),
                    name=str(block.get("name") or ""),
                    arguments=block.get("input"),
                )
                self._names[call.id] = call.name
                self.tool_calls.append(call)
                parts.append(ToolCallPart(call=call))
        return parts

    def _tool_results(self, event: dict[str, Any]) -> list[StreamPart]:
        if not self._top_level(event):
            return []
        content = (event.get("message") or {}).get("content")
        parts: list[StreamPart] = []
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_result":
                call_id = str(block.get("tool_use_id") or "")
                result = ToolResult(
                    id=call_id,
                    name=self._names.get(call_id, ""),
                    output=block.get("content"),
                    is_error=bool(block.get("is_error")),
                )
                self.tool_results.append(result)
                parts.append(ToolResultPart(result=result))
        return parts

    def _partial(self, event: dict[str, Any]) -> list[StreamPart]:
        if not self._top_level(event):
            return []
        raw = event.get("event") or {}
        if raw.get("type") == "content_block_delta":
            delta = raw.get("delta") or {}
            if delta.get("type") == "text_delta" and delta.get("text"):
                return [TextDeltaPart(text=str(delta["text"]))]
        return []

    def finish(self, warnings: list[CallWarning]) -> GenerateResult:
        """The turn's result. Requires :attr:`result`; raises :class:`AgentTurnError` when the
        result reports a failure."""
        result = self.result
        assert result is not None
        subtype = str(result.get("subtype") or "")
        if result.get("is_error") or subtype.startswith("error"):
            raise self._turn_error(result, subtype)
        metadata: dict[str, Any] = {
            "session_id": self.session_id,
            "num_turns": result.get("num_turns"),
            "duration_ms": result.get("duration_ms"),
            "duration_api_ms": result.get("duration_api_ms"),
            "stop_reason": result.get("stop_reason"),
            "terminal_reason": result.get("terminal_reason"),
            "permission_denials": result.get("permission_denials") or [],
            "model_usage": result.get("modelUsage") or {},
        }
        if self.init is not None:
            metadata["claude_code_version"] = self.init.get("claude_code_version")
            metadata["api_key_source"] = self.init.get("apiKeySource")
            metadata["mcp_servers"] = self.init.get("mcp_servers") or []
        return GenerateResult(
            text=str(result.get("result") or ""),
            finish_reason=_FINISH.get(str(result.get("stop_reason")), "stop"),
            usage=_usage(result),
            warnings=tuple(warnings),
            tool_calls=tuple(self.tool_calls),
            tool_results=tuple(self.tool_results),
            output=result.get("structured_output"),
            provider_metadata={PROVIDER: metadata},
            model_id=str(self.init.get("model")) if self.init and self.init.get("model") else None,
        )

    def _turn_error(self, result: dict[str, Any], subtype: str) -> AgentTurnError:
        detail = str(result.get("result") or self.error_text or "").strip()
        kind = self.error_kind or str(result.get("api_error") or "") or subtype
        if kind == "authentication_failed" and (
            self.init is None or self.init.get("apiKeySource") in (None, "none")
        ):
            return AgentTurnError(
                f"{_NOT_LOGGED_IN} (Claude Code said: {detail or 'not logged in'})",
                kind=PROVIDER,
                detail="not_logged_in",
            )
        if subtype == "error_max_structured_output_retries":
            message = (
                "Claude Code could not produce output matching the schema after its retries; "
                "simplify the schema or the prompt"
            )
        elif subtype == "error_max_budget_usd":
            message = "Claude Code stopped at the descriptor's max_budget_usd; raise it"
        elif subtype == "error_max_turns":
            message = "Claude Code stopped at its turn limit"
        elif subtype == "error_during_execution":
            message = "Claude Code failed while running the turn"
        else:
            message = "the model request failed"
        text = f"Claude Code turn failed ({kind}): {message}"
        if detail:
            text += f": {detail[:500]}"
        if kind in ("connection_failed", "server_error", "api_error", "rate_limit", "overloaded"):
            text += (
                "; check that the model endpoint (the descriptor's base_url, or the Anthropic API "
                "for a login) is reachable, and retry"
            )
        return AgentTurnError(text, kind=PROVIDER, detail=kind)


def _text_of(message: dict[str, Any]) -> str:
    return "".join(
        str(b.get("text") or "")
        for b in message.get("content") or ()
        if isinstance(b, dict) and b.get("type") == "text"
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _usage(result: dict[str, Any]) -> Usage:
    raw = result.get("usage")
    cost = result.get("total_cost_usd")
    if not isinstance(raw, dict):
        return Usage(cost_usd=float(cost) if isinstance(cost, (int, float)) else None)
    cached = _int(raw.get("cache_read_input_tokens"))
    inputs = _int(raw.get("input_tokens")) + cached + _int(raw.get("cache_creation_input_tokens"))
    outputs = _int(raw.get("output_tokens"))
    return Usage(
        input_tokens=inputs,
        output_tokens=outputs,
        total_tokens=inputs + outputs,
        cached_input_tokens=cached,
        cost_usd=float(cost) if isinstance(cost, (int, float)) else None,
    )
