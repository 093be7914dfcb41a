"""One turn's notifications, folded into stream parts and a result.

:class:`TurnState` reads the app server's notifications for one ``(threadId, turnId)`` and says
what to yield: message deltas as text, command executions / MCP calls / file changes as tool calls
and tool results, token usage, warnings, and the final agent message. ``turn/completed`` with
status ``failed`` or ``interrupted`` becomes :class:`AgentTurnError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from jigs.errors import AgentTurnError
from jigs.models import (
    CallWarning,
    StreamPart,
    TextDeltaPart,
    ToolCall,
    ToolCallPart,
    ToolResult,
    ToolResultPart,
    Usage,
)

__all__ = ["TurnState", "strict_schema"]

_TOOL_ITEMS = frozenset({"commandExecution", "mcpToolCall", "fileChange", "webSearch"})


def _tool_name(item: dict[str, Any]) -> str:
    kind = item.get("type")
    if kind == "commandExecution":
        return "exec_command"
    if kind == "mcpToolCall":
        return f"mcp__{item.get('server')}__{item.get('tool')}"
    if kind == "fileChange":
        return "apply_patch"
    return "web_search"


def _tool_arguments(item: dict[str, Any]) -> Any:
    kind = item.get("type")
    if kind == "commandExecution":
        return {"command": item.get("command"), "cwd": item.get("cwd")}
    if kind == "mcpToolCall":
        return item.get("arguments")
    if kind == "fileChange":
        changes = item.get("changes") or []
        return {"paths": [c.get("path") for c in changes if isinstance(c, dict)]}
    return {"query": item.get("query")}


def _tool_output(item: dict[str, Any]) -> tuple[Any, bool]:
    kind = item.get("type")
    status = item.get("status")
    failed = status in ("failed", "declined")
    if kind == "commandExecution":
        code = item.get("exitCode")
        return (
            {"output": item.get("aggregatedOutput"), "exit_code": code},
            failed or (isinstance(code, int) and code != 0),
        )
    if kind == "mcpToolCall":
        error = item.get("error")
        return (error if error else item.get("result")), failed or bool(error)
    return {"status": status}, failed


@dataclass
class TurnState:
    """What one turn has produced so far."""

    thread_id: str
    turn_id: str
    texts: dict[str, str] = field(default_factory=dict)
    final_text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)
    warnings: list[CallWarning] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    total_tokens: int = 0
    saw_usage: bool = False
    last_error: str | None = None
    done: bool = False

    def _mine(self, params: dict[str, Any]) -> bool:
        thread = params.get("threadId")
        turn = params.get("turnId")
        if thread is not None and thread != self.thread_id:
            return False
        return turn is None or turn == self.turn_id

    def feed(self, message: dict[str, Any]) -> list[StreamPart]:
        """Fold one notification in; returns the parts to yield (possibly none)."""
        method = message.get("method")
        params = message.get("params")
        if not isinstance(params, dict):
            return []
        if method == "turn/completed":
            turn = params.get("turn") or {}
            if params.get("threadId") != self.thread_id or turn.get("id") != self.turn_id:
                return []
            self._complete(turn)
            return []
        if not self._mine(params):
            return []
        if method == "item/agentMessage/delta":
            item_id = str(params.get("itemId"))
            delta = str(params.get("delta") or "")
            self.texts[item_id] = self.texts.get(item_id, "") + delta
            return [TextDeltaPart(text=delta)] if delta else []
        if method in ("item/started", "item/completed"):
            item = params.get("item")
            if isinstance(item, dict):
                return self._item(str(method), item)
            return []
        if method == "thread/tokenUsage/updated":
            self._usage(params.get("tokenUsage"))
        elif method == "error":
            error = params.get("error") or {}
            if not params.get("willRetry"):
                self.last_error = str(error.get("message") or error)
        elif method == "warning":
            text = params.get("message")
            if text:
                self.warnings.append(CallWarning(type="other", message=str(text)))
        return []

    def _item(self, method: str, item: dict[str, Any]) -> list[StreamPart]:
        kind = item.get("type")
        item_id = str(item.get("id"))
        if kind == "agentMessage" and method == "item/completed":
            text = str(item.get("text") or "")
            streamed = self.texts.get(item_id, "")
            self.final_text = text
            if text.startswith(streamed) and len(text) > len(streamed):
                return [TextDeltaPart(text=text[len(streamed) :])]
            return []
        if kind not in _TOOL_ITEMS:
            return []
        if method == "item/started":
            call = ToolCall(id=item_id, name=_tool_name(item), arguments=_tool_arguments(item))
            self.tool_calls.append(call)
            return [ToolCallPart(call=call)]
        output, is_error = _tool_output(item)
        result = ToolResult(id=item_id, name=_tool_name(item), output=output, is_error=is_error)
        self.tool_results.append(result)
        return [ToolResultPart(result=result)]

    def _usage(self, usage: Any) -> None:
        last = usage.get("last") if isinstance(usage, dict) else None
        if not isinstance(last, dict):
            return
        self.saw_usage = True
        self.input_tokens += int(last.get("inputTokens") or 0)
        self.output_tokens += int(last.get("outputTokens") or 0)
        self.cached_tokens += int(last.get("cachedInputTokens") or 0)
        self.total_tokens += int(last.get("totalTokens") or 0)

    def _complete(self, turn: dict[str, Any]) -> None:
        self.done = True
        status = turn.get("status")
        if status == "completed":
            if not self.final_text:
                for item in turn.get("items") or []:
                    if isinstance(item, dict) and item.get("type") == "agentMessage":
                        self.final_text = str(item.get("text") or "")
            return
        error = turn.get("error") or {}
        message = str(error.get("message") or self.last_error or "no reason given")
        if status == "interrupted":
            raise AgentTurnError(
                f"the Codex turn was interrupted before it finished: {message}",
                kind="codex",
                detail=message,
            )
        raise AgentTurnError(
            f"the Codex turn failed: {message}. Check the model endpoint and the model name on "
            f"the descriptor (`jigs doctor` checks the CLI and the login)",
            kind="codex",
            detail=message,
        )

    def usage(self) -> Usage:
        if not self.saw_usage:
            return Usage()
        return Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            total_tokens=self.total_tokens,
            cached_input_tokens=self.cached_tokens,
        )

    def output(self, wanted: bool) -> Any:
        """The structured answer when a schema was given and the text is JSON, else None."""
        if not wanted:
            return None
        try:
            return json.loads(self.final_text)
        except ValueError:
            return None


def strict_schema(schema: Any) -> Any:
    """A copy of a JSON schema the Responses API accepts in strict mode: every object closes
    (``additionalProperties: false``) and lists all its properties as required."""
    if isinstance(schema, list):
        return [strict_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict_schema(v) for k, v in schema.items()}
    if out.get("type") == "object" or "properties" in out:
        props = out.get("properties")
        if isinstance(props, dict):
            out["required"] = list(props)
        out["additionalProperties"] = False
    return out
