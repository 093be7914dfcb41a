"""One turn's app-server notifications as :mod:`jigs.events`.

:class:`CodexDecoder` reads the notifications of one ``(threadId, turnId)`` (others are ignored:
a late ``turn/completed`` of an interrupted turn, another thread's status) and yields:

- ``turn/started`` -> :class:`SessionStarted` (the thread id);
- ``item/agentMessage/delta`` -> :class:`TextDelta`; ``item/reasoning/summaryTextDelta`` ->
  :class:`ReasoningDelta`;
- ``commandExecution`` / ``mcpToolCall`` / ``fileChange`` / ``webSearch`` items ->
  :class:`ToolCallStarted` on ``item/started``, :class:`ToolCallFinished` on ``item/completed``;
- ``thread/tokenUsage/updated`` -> :class:`UsageUpdated`, summed over the turn's responses
  (``tokenUsage.last`` is one response; ``total`` is the whole thread's);
- ``warning`` (and an ``error`` Codex will retry) -> :class:`Notice`;
- ``turn/completed`` -> :class:`TurnCompleted`, or :class:`TurnFailed` (``aborted`` when
  interrupted; ``api_error`` / ``not_logged_in`` / ``other`` from ``codexErrorInfo``).

**Model requests** (what ``max_turns`` counts, :class:`ModelCallStarted`): the app server does not
announce a request. Each response ends with its own ``thread/tokenUsage/updated``, and Codex runs
a response's tools *before* that update. So the first request starts with the turn, and another
one has started when the turn goes on after a usage update: the next item or delta of the turn
(``userMessage`` items excepted) marks it. A turn whose last response is final sees no further
item, so it is never over-counted. A tool call of the request that crossed the limit may already
have started when the engine stops the turn.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from jigs.events import (
    AgentEvent,
    ModelCallStarted,
    Notice,
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

__all__ = ["CodexDecoder", "strict_schema"]

_TOOL_ITEMS = frozenset({"commandExecution", "mcpToolCall", "fileChange", "webSearch"})
_RETRYABLE_INFO = frozenset(
    {"usageLimitExceeded", "rateLimitExceeded", "serverOverloaded", "internalServerError"}
)


def _tool_call(item: dict[str, Any]) -> tuple[str, Any]:
    """The tool name and arguments of a tool item (names as Codex's model sees its tools)."""
    kind = item.get("type")
    if kind == "commandExecution":
        return "exec_command", {"command": item.get("command"), "cwd": item.get("cwd")}
    if kind == "mcpToolCall":
        return f"mcp__{item.get('server')}__{item.get('tool')}", item.get("arguments")
    if kind == "fileChange":
        changes = item.get("changes") or []
        return "apply_patch", {
            "paths": [str(c.get("path")) for c in changes if isinstance(c, dict)]
        }
    return "web_search", {"query": item.get("query")}


def _tool_output(item: dict[str, Any]) -> tuple[Any, bool]:
    failed = item.get("status") in ("failed", "declined")
    if item.get("type") == "commandExecution":
        code = item.get("exitCode")
        output = {"output": item.get("aggregatedOutput"), "exit_code": code}
        return output, failed or (isinstance(code, int) and code != 0)
    if item.get("type") == "mcpToolCall":
        error = item.get("error")
        return (error or item.get("result")), failed or bool(error)
    return {"status": item.get("status")}, failed


#: The credential proxy's per-step base URL (``http://127.0.0.1:<port>/<step token>``): Codex
#: quotes the URL it called in its errors, and the token must not travel on in one.
_STEP_URL = re.compile(r"(https?://(?:127\.0\.0\.1|localhost|\[::1\]):\d+)/[A-Za-z0-9_-]{16,}")


def redact_step_url(text: str) -> str:
    """``text`` with the step token of every loopback proxy URL replaced."""
    return _STEP_URL.sub(r"\1/<step token>", text)


def _failure(turn: dict[str, Any], last_error: str | None) -> TurnFailed:
    """A turn that ended ``failed`` or ``interrupted``, in jigs' categories."""
    found = turn.get("error")
    error: dict[str, Any] = found if isinstance(found, dict) else {}
    message = redact_step_url(str(error.get("message") or last_error or "no reason given"))
    status = str(turn.get("status"))
    if status == "interrupted":
        return TurnFailed(reason="aborted", message=message, stop_reason=status)
    info = error.get("codexErrorInfo")
    code = None
    if isinstance(info, dict) and info:
        # httpConnectionFailed / responseStreamConnectionFailed / responseStreamDisconnected
        detail = next(iter(info.values()))
        code = detail.get("httpStatusCode") if isinstance(detail, dict) else None
        info = "http"
    info = info if isinstance(info, str) else "other"
    retryable = info in _RETRYABLE_INFO or (
        info == "http" and (not isinstance(code, int) or code >= 500 or code in (408, 429))
    )
    reason = "api_error" if retryable or info in ("badRequest", "http") else "other"
    if info == "unauthorized" or code in (401, 403):
        reason = "not_logged_in"
    return TurnFailed(
        reason=reason,
        message=f"{message.rstrip('.')}. Check the model endpoint and the descriptor's model "
        f"(`jigs doctor` checks the CLI and the login)",
        stop_reason=status,
        retryable=retryable,
    )


class CodexDecoder:
    """Events of one turn; also remembers the paths of its file changes (for approvals)."""

    def __init__(self, thread_id: str, turn_id: str) -> None:
        self.thread_id = thread_id
        self.turn_id = turn_id
        self.paths: dict[str, list[str]] = {}
        self._streamed: dict[str, str] = {}
        self._final = ""
        self._usage: dict[str, int] = {}
        self._call_pending = True
        self._last_error: str | None = None
        #: True once the turn's ``turn/completed`` was decoded.
        self.ended = False

    def ends(self, message: dict[str, Any]) -> bool:
        """True when ``message`` is this turn's ``turn/completed``."""
        params = message.get("params")
        if message.get("method") != "turn/completed" or not isinstance(params, dict):
            return False
        turn = params.get("turn")
        return (
            params.get("threadId") == self.thread_id
            and isinstance(turn, dict)
            and turn.get("id") == self.turn_id
        )

    def _mine(self, params: dict[str, Any]) -> bool:
        thread = params.get("threadId")
        turn = params.get("turnId")
        if thread is not None and thread != self.thread_id:
            return False
        return turn is None or turn == self.turn_id

    def decode(self, message: dict[str, Any]) -> Iterable[AgentEvent]:
        method = str(message.get("method"))
        params = message.get("params")
        if not isinstance(params, dict):
            return []
        if method == "turn/completed":
            if not self.ends(message):
                return []
            self.ended = True
            return [self._completed(params["turn"])]
        if not self._mine(params):
            return []
        events: list[AgentEvent] = []
        if method == "turn/started":
            events.append(SessionStarted(session_id=self.thread_id))
        if self._starts_request(method, params):
            self._call_pending = False
            events.append(ModelCallStarted())
        if method == "item/agentMessage/delta":
            item_id = str(params.get("itemId"))
            delta = str(params.get("delta") or "")
            self._streamed[item_id] = self._streamed.get(item_id, "") + delta
            if delta:
                events.append(TextDelta(text=delta))
        elif method == "item/reasoning/summaryTextDelta":
            if params.get("delta"):
                events.append(ReasoningDelta(text=str(params["delta"])))
        elif method in ("item/started", "item/completed") and isinstance(params.get("item"), dict):
            events += self._item(method, params["item"])
        elif method == "thread/tokenUsage/updated":
            events += self._usage_update(params.get("tokenUsage"))
        elif method == "error":
            found = params.get("error")
            text = redact_step_url(str(found.get("message") if isinstance(found, dict) else found))
            if params.get("willRetry"):
                events.append(Notice(message=f"Codex retries after: {text}"))
            else:
                self._last_error = text
        elif method == "warning" and params.get("message"):
            events.append(Notice(message=redact_step_url(str(params["message"]))))
        return events

    def _starts_request(self, method: str, params: dict[str, Any]) -> bool:
        if not self._call_pending:
            return False
        if method == "turn/started":
            return True
        if not method.startswith("item/"):
            return False
        item = params.get("item")
        return not (isinstance(item, dict) and item.get("type") == "userMessage")

    def _item(self, method: str, item: dict[str, Any]) -> list[AgentEvent]:
        kind = item.get("type")
        item_id = str(item.get("id"))
        if kind == "agentMessage" and method == "item/completed":
            text = str(item.get("text") or "")
            streamed = self._streamed.get(item_id, "")
            self._final = text
            if text.startswith(streamed) and len(text) > len(streamed):
                return [TextDelta(text=text[len(streamed) :])]
            return []
        if kind not in _TOOL_ITEMS:
            return []
        name, arguments = _tool_call(item)
        if kind == "fileChange":
            self.paths[item_id] = arguments["paths"]
        if method == "item/started":
            return [ToolCallStarted(id=item_id, name=name, arguments=arguments)]
        output, is_error = _tool_output(item)
        return [ToolCallFinished(id=item_id, name=name, output=output, is_error=is_error)]

    def _usage_update(self, usage: Any) -> list[AgentEvent]:
        last = usage.get("last") if isinstance(usage, dict) else None
        if not isinstance(last, dict):
            return []
        self._call_pending = True
        for key in ("inputTokens", "outputTokens", "cachedInputTokens", "totalTokens"):
            self._usage[key] = self._usage.get(key, 0) + int(last.get(key) or 0)
        return [
            UsageUpdated(
                usage=Usage(
                    input_tokens=self._usage["inputTokens"],
                    output_tokens=self._usage["outputTokens"],
                    cached_input_tokens=self._usage["cachedInputTokens"],
                    total_tokens=self._usage["totalTokens"],
                )
            )
        ]

    def _completed(self, turn: dict[str, Any]) -> AgentEvent:
        if turn.get("status") != "completed":
            return _failure(turn, self._last_error)
        text = self._final
        if not text:
            for item in turn.get("items") or []:
                if isinstance(item, dict) and item.get("type") == "agentMessage":
                    text = str(item.get("text") or "")
        return TurnCompleted(
            text=text,
            stop_reason="completed",
            metadata={"thread_id": self.thread_id, "turn_id": self.turn_id},
        )


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
