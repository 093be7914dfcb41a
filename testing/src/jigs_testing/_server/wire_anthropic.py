"""Anthropic Messages API shapes (``POST /v1/messages``), streamed and plain.

Stream order, as the real API sends it: ``message_start``, then per content block
``content_block_start`` / ``content_block_delta``… / ``content_block_stop`` (a ``ping`` after the
first block start), then ``message_delta`` (``stop_reason``, ``usage``) and ``message_stop``.
"""

from __future__ import annotations

import json
from typing import Any

from .ids import new_id
from .render import EventStream, JsonBody, RenderContext, Rendered, pieces
from .replies import ErrorSpec, Reply
from .sse import SseEvent
from .usage import estimate_tokens

__all__ = ["AnthropicRenderer", "anthropic_error_type"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def anthropic_error_type(status: int) -> str:
    """The Anthropic error ``type`` for an HTTP status."""
    if status in _ERROR_TYPES:
        return _ERROR_TYPES[status]
    return "api_error" if status >= 500 else "invalid_request_error"


def _output_tokens(reply: Reply) -> int:
    size = len(reply.text or "") + sum(len(call.arguments) for call in reply.tool_calls)
    return estimate_tokens(size)


def _usage(ctx: RenderContext, output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": ctx.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
    }


def _message(ctx: RenderContext, reply: Reply | None, content: list[Any]) -> dict[str, Any]:
    return {
        "id": new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": (reply.model if reply else None) or ctx.model,
        "content": content,
        "stop_reason": None,
        "stop_sequence": None,
        "usage": _usage(ctx, 1),
    }


class AnthropicRenderer:
    """Renders replies as the Anthropic Messages API does."""

    def reply(self, reply: Reply, ctx: RenderContext, *, stream: bool) -> Rendered:
        """The assistant message: text block first, then one ``tool_use`` block per call."""
        stop_reason = "tool_use" if reply.tool_calls else "end_turn"
        call_ids = [call.id or new_id("toolu_") for call in reply.tool_calls]
        if not stream:
            return JsonBody(200, _whole_message(reply, ctx, call_ids, stop_reason))
        return EventStream(_message_events(reply, ctx, call_ids, stop_reason))

    def error(self, spec: ErrorSpec, ctx: RenderContext, *, stream: bool) -> Rendered:
        """An HTTP error, or ``message_start`` + ``ping`` + an ``error`` event in-stream."""
        payload = self.error_payload(spec.status, spec.message, spec.type, spec.code)
        if not (stream and spec.in_stream):
            return JsonBody(spec.status, payload)
        return EventStream(
            [
                SseEvent.json(
                    "message_start",
                    {"type": "message_start", "message": _message(ctx, None, [])},
                ),
                _ping(),
                SseEvent.json("error", {"type": "error", "error": payload["error"]}),
            ]
        )

    def error_payload(
        self, status: int, message: str, type_: str | None = None, code: str | None = None
    ) -> dict[str, Any]:
        """``{"type": "error", "error": {"type": ..., "message": ...}, "request_id": ...}``."""
        del code  # the Anthropic error shape has no code
        return {
            "type": "error",
            "error": {"type": type_ or anthropic_error_type(status), "message": message},
            "request_id": new_id("req_"),
        }


def _whole_message(
    reply: Reply, ctx: RenderContext, call_ids: list[str], stop_reason: str
) -> dict[str, Any]:
    """The message as one JSON body."""
    content: list[dict[str, Any]] = []
    if reply.text is not None:
        content.append({"type": "text", "text": reply.text})
    for call, call_id in zip(reply.tool_calls, call_ids, strict=True):
        content.append(
            {
                "type": "tool_use",
                "id": call_id,
                "name": call.flat_name,
                "input": json.loads(call.arguments),
            }
        )
    message = _message(ctx, reply, content)
    message["stop_reason"] = stop_reason
    message["usage"] = _usage(ctx, _output_tokens(reply))
    return message


def _message_events(
    reply: Reply, ctx: RenderContext, call_ids: list[str], stop_reason: str
) -> list[SseEvent]:
    """The message as server-sent events, in the real API's order (see the module docstring)."""
    events = [
        SseEvent.json(
            "message_start",
            {"type": "message_start", "message": _message(ctx, reply, [])},
        )
    ]
    index = 0
    if reply.text is not None:
        events.append(_block_start(index, {"type": "text", "text": ""}))
        events.append(_ping())
        events.extend(
            _block_delta(index, {"type": "text_delta", "text": piece})
            for piece in pieces(reply.text)
        )
        events.append(_block_stop(index))
        index += 1
    for call, call_id in zip(reply.tool_calls, call_ids, strict=True):
        block = {"type": "tool_use", "id": call_id, "name": call.flat_name, "input": {}}
        events.append(_block_start(index, block))
        if index == 0:
            events.append(_ping())
        events.extend(
            _block_delta(index, {"type": "input_json_delta", "partial_json": piece})
            for piece in pieces(call.arguments)
        )
        events.append(_block_stop(index))
        index += 1
    events.append(
        SseEvent.json(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": _output_tokens(reply)},
            },
        )
    )
    events.append(SseEvent.json("message_stop", {"type": "message_stop"}))
    return events


def _block_start(index: int, block: dict[str, Any]) -> SseEvent:
    return SseEvent.json(
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": block},
    )


def _block_delta(index: int, delta: dict[str, Any]) -> SseEvent:
    return SseEvent.json(
        "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    )


def _block_stop(index: int) -> SseEvent:
    return SseEvent.json("content_block_stop", {"type": "content_block_stop", "index": index})


def _ping() -> SseEvent:
    return SseEvent.json("ping", {"type": "ping"})
