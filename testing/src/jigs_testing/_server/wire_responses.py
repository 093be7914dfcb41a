"""OpenAI Responses API shapes (``POST /v1/responses``), streamed and plain.

Stream order: ``response.created``, ``response.in_progress``; per message item
``response.output_item.added``, ``response.content_part.added``, ``response.output_text.delta``…,
``response.output_text.done``, ``response.content_part.done``, ``response.output_item.done``; per
function call ``response.output_item.added``, ``response.function_call_arguments.delta``…,
``response.function_call_arguments.done``, ``response.output_item.done``; then
``response.completed`` with usage. Every event carries a ``sequence_number`` from 0.
"""

from __future__ import annotations

import time
from typing import Any

from .ids import new_id
from .openai_errors import openai_error_payload
from .render import EventStream, JsonBody, RenderContext, Rendered, pieces
from .replies import ErrorSpec, Reply, ToolCall
from .sse import SseEvent
from .usage import estimate_tokens

__all__ = ["ResponsesRenderer", "responses_tool_name"]


def responses_tool_name(call: ToolCall, request_tools: Any) -> tuple[str | None, str]:
    """``(namespace, name)`` for a function call item.

    An explicit namespace wins. A flat ``mcp__<server>__<tool>`` name is kept flat if the
    request offered a function with exactly that name, split along a namespace the request
    offered if one matches, and otherwise split at the first ``__`` after the server name (how
    Codex exposes MCP tools).
    """
    if call.namespace:
        return call.namespace, call.name
    if isinstance(request_tools, list):
        for tool in request_tools:
            if not isinstance(tool, dict):
                continue
            if tool.get("type") == "function" and tool.get("name") == call.name:
                return None, call.name
            prefix = tool.get("name")
            if tool.get("type") == "namespace" and isinstance(prefix, str):
                head = f"{prefix}__"
                if call.name.startswith(head) and len(call.name) > len(head):
                    return prefix, call.name[len(head) :]
    return call.split_mcp_name()


def _usage(ctx: RenderContext, reply: Reply | None) -> dict[str, Any]:
    output = 0
    if reply is not None:
        size = len(reply.text or "") + sum(len(c.arguments) for c in reply.tool_calls)
        output = estimate_tokens(size)
    return {
        "input_tokens": ctx.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": ctx.input_tokens + output,
    }


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class _Response:
    """The response object, echoed in ``response.created`` / ``.completed`` and plain JSON."""

    def __init__(self, ctx: RenderContext, model: str | None) -> None:
        body = ctx.body
        reasoning = _object(body.get("reasoning"))
        text_cfg = _object(body.get("text"))
        self.fields: dict[str, Any] = {
            "id": new_id("resp_"),
            "object": "response",
            "created_at": int(time.time()),
            "status": "in_progress",
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": model or ctx.model,
            "output": [],
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": {"effort": reasoning.get("effort"), "summary": None},
            "store": body.get("store", True),
            "temperature": body.get("temperature", 1.0),
            "text": {"format": {"type": "text"}, **text_cfg},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools", []),
            "top_p": body.get("top_p", 1.0),
            "truncation": "disabled",
            "usage": None,
            "user": None,
            "metadata": body.get("metadata") or {},
        }

    def snapshot(self, **changes: Any) -> dict[str, Any]:
        return {**self.fields, **changes}


def _message_items(reply: Reply) -> tuple[dict[str, Any], dict[str, Any]]:
    item_id = new_id("msg_")
    added = {
        "id": item_id,
        "type": "message",
        "status": "in_progress",
        "content": [],
        "role": "assistant",
    }
    done = {**added, "status": "completed", "content": [_text_part(reply.text or "")]}
    return added, done


def _text_part(value: str) -> dict[str, Any]:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": value}


def _call_items(call: ToolCall, ctx: RenderContext) -> tuple[dict[str, Any], dict[str, Any]]:
    namespace, name = responses_tool_name(call, ctx.body.get("tools"))
    added: dict[str, Any] = {
        "id": new_id("fc_"),
        "type": "function_call",
        "status": "in_progress",
        "arguments": "",
        "call_id": call.id or new_id("call_"),
        "name": name,
    }
    if namespace:
        added["namespace"] = namespace
    done = {**added, "status": "completed", "arguments": call.arguments}
    return added, done


class ResponsesRenderer:
    """Renders replies as the OpenAI Responses API does."""

    def reply(self, reply: Reply, ctx: RenderContext, *, stream: bool) -> Rendered:
        """A message item (if there is text) followed by one ``function_call`` item per call."""
        response = _Response(ctx, reply.model)
        items: list[tuple[dict[str, Any], dict[str, Any], ToolCall | None]] = []
        if reply.text is not None:
            items.append((*_message_items(reply), None))
        items.extend((*_call_items(call, ctx), call) for call in reply.tool_calls)
        final = response.snapshot(
            status="completed",
            output=[done for _, done, _ in items],
            usage=_usage(ctx, reply),
        )
        if not stream:
            return JsonBody(200, final)

        payloads: list[dict[str, Any]] = [
            {"type": "response.created", "response": response.snapshot()},
            {"type": "response.in_progress", "response": response.snapshot()},
        ]
        for index, (added, done, call) in enumerate(items):
            payloads.append(
                {"type": "response.output_item.added", "output_index": index, "item": added}
            )
            if call is None:
                payloads.extend(_text_events(index, done["id"], reply.text or ""))
            else:
                payloads.extend(_argument_events(index, done))
            payloads.append(
                {"type": "response.output_item.done", "output_index": index, "item": done}
            )
        payloads.append({"type": "response.completed", "response": final})
        return EventStream(_numbered(payloads))

    def error(self, spec: ErrorSpec, ctx: RenderContext, *, stream: bool) -> Rendered:
        """An HTTP error, or ``response.created`` … ``response.failed`` in-stream."""
        if not (stream and spec.in_stream):
            return JsonBody(
                spec.status, self.error_payload(spec.status, spec.message, spec.type, spec.code)
            )
        response = _Response(ctx, None)
        failure = {"code": spec.code or spec.type or "server_error", "message": spec.message}
        payloads = [
            {"type": "response.created", "response": response.snapshot()},
            {"type": "response.in_progress", "response": response.snapshot()},
            {
                "type": "response.failed",
                "response": response.snapshot(status="failed", error=failure),
            },
        ]
        return EventStream(_numbered(payloads))

    def error_payload(
        self, status: int, message: str, type_: str | None = None, code: str | None = None
    ) -> dict[str, Any]:
        """``{"error": {"message": ..., "type": ..., "param": null, "code": ...}}``."""
        return openai_error_payload(status, message, type_, code)


def _text_events(index: int, item_id: str, value: str) -> list[dict[str, Any]]:
    where = {"item_id": item_id, "output_index": index, "content_index": 0}
    events: list[dict[str, Any]] = [
        {"type": "response.content_part.added", **where, "part": _text_part("")}
    ]
    events.extend(
        {"type": "response.output_text.delta", **where, "delta": piece, "logprobs": []}
        for piece in pieces(value)
    )
    events.append({"type": "response.output_text.done", **where, "text": value, "logprobs": []})
    events.append({"type": "response.content_part.done", **where, "part": _text_part(value)})
    return events


def _argument_events(index: int, done: dict[str, Any]) -> list[dict[str, Any]]:
    where = {"item_id": done["id"], "output_index": index}
    events: list[dict[str, Any]] = [
        {"type": "response.function_call_arguments.delta", **where, "delta": piece}
        for piece in pieces(done["arguments"])
    ]
    events.append(
        {
            "type": "response.function_call_arguments.done",
            **where,
            "name": done["name"],
            "arguments": done["arguments"],
        }
    )
    return events


def _numbered(payloads: list[dict[str, Any]]) -> list[SseEvent]:
    return [
        SseEvent.json(payload["type"], {**payload, "sequence_number": number})
        for number, payload in enumerate(payloads)
    ]
