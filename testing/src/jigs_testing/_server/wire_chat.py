"""OpenAI Chat Completions shapes (``POST /v1/chat/completions``), streamed and plain.

Stream: a role chunk, content deltas, then per tool call a chunk with its ``id``, ``type`` and
``function.name`` followed by ``function.arguments`` deltas, a chunk with ``finish_reason``
(``stop`` or ``tool_calls``), a usage chunk with empty ``choices`` when the request set
``stream_options.include_usage`` (every earlier chunk then carries ``"usage": null``), and
finally ``data: [DONE]``. Chat streams have no ``event:`` names.
"""

from __future__ import annotations

import time
from typing import Any

from .ids import new_id
from .openai_errors import openai_error_payload
from .render import EventStream, JsonBody, RenderContext, Rendered, pieces
from .replies import ErrorSpec, Reply
from .sse import SseEvent
from .usage import estimate_tokens

__all__ = ["ChatRenderer"]


def _usage(ctx: RenderContext, reply: Reply) -> dict[str, Any]:
    size = len(reply.text or "") + sum(len(c.arguments) for c in reply.tool_calls)
    output = estimate_tokens(size)
    return {
        "prompt_tokens": ctx.input_tokens,
        "completion_tokens": output,
        "total_tokens": ctx.input_tokens + output,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _wants_usage(ctx: RenderContext) -> bool:
    options = ctx.body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


class _Chunks:
    """Builds ``chat.completion.chunk`` objects sharing one id, timestamp and model."""

    def __init__(self, ctx: RenderContext, model: str | None) -> None:
        self.head: dict[str, Any] = {
            "id": new_id("chatcmpl-"),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model or ctx.model,
            "service_tier": "default",
            "system_fingerprint": None,
        }
        self.with_usage = _wants_usage(ctx)

    def choice(self, delta: dict[str, Any], finish_reason: str | None = None) -> SseEvent:
        chunk = {
            **self.head,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }
        if self.with_usage:
            chunk["usage"] = None
        return SseEvent.json(None, chunk)

    def usage(self, usage: dict[str, Any]) -> SseEvent:
        return SseEvent.json(None, {**self.head, "choices": [], "usage": usage})


_DONE = SseEvent(None, "[DONE]")


class ChatRenderer:
    """Renders replies as the OpenAI Chat Completions API does."""

    def reply(self, reply: Reply, ctx: RenderContext, *, stream: bool) -> Rendered:
        """One choice: text content and/or ``tool_calls``."""
        finish = "tool_calls" if reply.tool_calls else "stop"
        call_ids = [call.id or new_id("call_") for call in reply.tool_calls]
        if not stream:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": reply.text,
                "refusal": None,
                "annotations": [],
            }
            if reply.tool_calls:
                message["tool_calls"] = [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": call.flat_name, "arguments": call.arguments},
                    }
                    for call, call_id in zip(reply.tool_calls, call_ids, strict=True)
                ]
            return JsonBody(
                200,
                {
                    "id": new_id("chatcmpl-"),
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": reply.model or ctx.model,
                    "choices": [
                        {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
                    ],
                    "usage": _usage(ctx, reply),
                    "service_tier": "default",
                    "system_fingerprint": None,
                },
            )

        chunks = _Chunks(ctx, reply.model)
        first_content = "" if reply.text is not None else None
        events = [chunks.choice({"role": "assistant", "content": first_content, "refusal": None})]
        events.extend(chunks.choice({"content": piece}) for piece in pieces(reply.text or ""))
        for index, (call, call_id) in enumerate(zip(reply.tool_calls, call_ids, strict=True)):
            opening = {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": call.flat_name, "arguments": ""},
            }
            events.append(chunks.choice({"tool_calls": [opening]}))
            events.extend(
                chunks.choice({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in pieces(call.arguments)
            )
        events.append(chunks.choice({}, finish))
        if chunks.with_usage:
            events.append(chunks.usage(_usage(ctx, reply)))
        events.append(_DONE)
        return EventStream(events)

    def error(self, spec: ErrorSpec, ctx: RenderContext, *, stream: bool) -> Rendered:
        """An HTTP error, or a role chunk then an ``{"error": …}`` chunk in-stream."""
        payload = self.error_payload(spec.status, spec.message, spec.type, spec.code)
        if not (stream and spec.in_stream):
            return JsonBody(spec.status, payload)
        chunks = _Chunks(ctx, None)
        return EventStream(
            [
                chunks.choice({"role": "assistant", "content": "", "refusal": None}),
                SseEvent.json(None, payload),
            ]
        )

    def error_payload(
        self, status: int, message: str, type_: str | None = None, code: str | None = None
    ) -> dict[str, Any]:
        """``{"error": {"message": ..., "type": ..., "param": null, "code": ...}}``."""
        return openai_error_payload(status, message, type_, code)
