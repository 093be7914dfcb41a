"""Read token usage out of a model response as it streams by, without holding it back.

The credential proxy feeds every response chunk to a :class:`UsageTap`; when the response ends
the tap reports the ``usage`` the upstream sent, merged over the whole stream, as a
:class:`~jigs.models.Usage`. It understands the three wire formats the CLIs speak:

- Anthropic Messages: ``message_start`` (``message.usage``) then ``message_delta`` (``usage``);
- OpenAI Responses: ``response.completed`` / ``response.incomplete`` (``response.usage``);
- OpenAI Chat Completions: the chunk carrying ``usage`` (with ``stream_options.include_usage``);

streamed (SSE) or plain JSON (a top-level ``usage``). Anything else yields no usage. The tap
never raises on what the upstream sends: malformed events are skipped.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from typing import Any

from jigs.engine._usage import Usage

__all__ = ["UsageTap", "usage_from_wire"]

_MAX_EVENT = 1024 * 1024
"""An SSE event longer than this (bytes, without a boundary) is skipped, not buffered."""

_MAX_JSON = 16 * 1024 * 1024
"""A plain JSON body longer than this is not parsed for usage."""

_USAGE = b'"usage"'


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_from_wire(raw: Mapping[str, Any]) -> Usage:
    """The :class:`~jigs.models.Usage` of a ``usage`` object of any of the three wires.

    ``input_tokens`` / ``output_tokens`` come from ``input_tokens`` / ``output_tokens``
    (Anthropic, Responses) or ``prompt_tokens`` / ``completion_tokens`` (Chat), and count cached
    input as jigs' usage does: Anthropic's ``input_tokens`` excludes ``cache_read_input_tokens``
    and ``cache_creation_input_tokens``, so they are added; OpenAI's includes its
    ``*_tokens_details.cached_tokens``. ``cached_input_tokens`` is the cache read,
    ``cache_write_tokens`` Anthropic's cache creation. Each is ``None`` when the wire did not
    say."""
    details = raw.get("input_tokens_details") or raw.get("prompt_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, Mapping) else None
    inputs = _int(raw.get("input_tokens"))
    inputs = inputs if inputs is not None else _int(raw.get("prompt_tokens"))
    outputs = _int(raw.get("output_tokens"))
    outputs = outputs if outputs is not None else _int(raw.get("completion_tokens"))
    written = _int(raw.get("cache_creation_input_tokens"))
    if "cache_read_input_tokens" in raw or "cache_creation_input_tokens" in raw:
        cached = _int(raw.get("cache_read_input_tokens"))
        if inputs is not None:  # Anthropic's input_tokens excludes the cache
            inputs += (cached or 0) + (written or 0)
    return Usage(
        input_tokens=inputs,
        output_tokens=outputs,
        total_tokens=inputs + outputs if inputs is not None and outputs is not None else None,
        cached_input_tokens=cached,
        cache_write_tokens=written,
    )


class UsageTap:
    """Watches one response body. Feed it with :meth:`feed`, then read :meth:`result`.

    ``content_type`` and ``content_encoding`` are the response's headers: SSE and JSON bodies
    are read, gzip and deflate are decoded (on the side: the bytes forwarded stay as they are),
    and any other type or encoding switches the tap off.
    """

    def __init__(self, content_type: str | None, content_encoding: str | None) -> None:
        media = (content_type or "").split(";", 1)[0].strip().lower()
        self._mode = {"text/event-stream": "sse", "application/json": "json"}.get(media)
        encoding = (content_encoding or "identity").strip().lower()
        self._decoder: Any = None
        if encoding in ("gzip", "x-gzip"):
            self._decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._decoder = zlib.decompressobj(zlib.MAX_WBITS)
        elif encoding != "identity":
            self._mode = None
        self._buffer = bytearray()
        self._usage: dict[str, Any] = {}
        self.model: str | None = None
        """The model the response names, when it does."""

    def feed(self, data: bytes) -> None:
        """One chunk of the body, exactly as received."""
        if self._mode is None or not data:
            return
        if self._decoder is not None:
            try:
                data = self._decoder.decompress(data)
            except zlib.error:
                self._mode = None
                return
        if self._mode == "json":
            if len(self._buffer) + len(data) > _MAX_JSON:
                self._mode = None
                self._buffer.clear()
                return
            self._buffer += data
            return
        self._buffer += data.replace(b"\r", b"")
        while True:
            end = self._buffer.find(b"\n\n")
            if end < 0:
                if len(self._buffer) > _MAX_EVENT:
                    self._buffer.clear()
                return
            event = bytes(self._buffer[:end])
            del self._buffer[: end + 2]
            if _USAGE in event:
                self._read_event(event)

    def _read_event(self, event: bytes) -> None:
        lines = [line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
        if lines:
            self._read_object(b"\n".join(lines))

    def _read_object(self, text: bytes) -> None:
        try:
            obj = json.loads(text)
        except ValueError:
            return
        if not isinstance(obj, dict):
            return
        for holder in (obj, obj.get("message"), obj.get("response")):
            if not isinstance(holder, dict):
                continue
            usage = holder.get("usage")
            if isinstance(usage, dict):
                self._usage.update(usage)
            model = holder.get("model")
            if isinstance(model, str) and model:
                self.model = model

    def result(self) -> Usage | None:
        """The usage seen so far (call at the end of the body); ``None`` if there was none."""
        if self._mode == "json" and self._buffer:
            self._read_object(bytes(self._buffer))
            self._buffer.clear()
        return usage_from_wire(self._usage) if self._usage else None
