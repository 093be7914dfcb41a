"""What the wire renderers produce, and what they share."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from .record import RecordedRequest
from .replies import ErrorSpec, Reply
from .sse import SseEvent

__all__ = [
    "DELTA_CHARS",
    "EventStream",
    "JsonBody",
    "RenderContext",
    "Rendered",
    "WireRenderer",
    "pieces",
]

DELTA_CHARS = 24
"""Characters per streamed text or argument delta."""


@dataclass(frozen=True, slots=True)
class RenderContext:
    """Per-request facts a renderer needs: the model to echo, the input token estimate, and
    the recorded request (for ``tools``, ``stream_options`` and the like)."""

    model: str
    input_tokens: int
    request: RecordedRequest

    @property
    def body(self) -> dict[str, Any]:
        """The request body as a dict (empty if it was not an object)."""
        return self.request.body if isinstance(self.request.body, dict) else {}


@dataclass(frozen=True, slots=True)
class JsonBody:
    """A plain JSON response."""

    status: int
    payload: Any


@dataclass(frozen=True, slots=True)
class EventStream:
    """A ``200 text/event-stream`` response; the last event is the terminal one."""

    events: list[SseEvent]


Rendered = JsonBody | EventStream


class WireRenderer(Protocol):
    """One wire format: renders replies and errors in that API's own shapes."""

    def reply(self, reply: Reply, ctx: RenderContext, *, stream: bool) -> Rendered:
        """An assistant turn (``reply.error`` is ``None``)."""
        ...

    def error(self, spec: ErrorSpec, ctx: RenderContext, *, stream: bool) -> Rendered:
        """A scripted error, in-stream when ``spec.in_stream`` and ``stream``."""
        ...

    def error_payload(
        self, status: int, message: str, type_: str | None = None, code: str | None = None
    ) -> dict[str, Any]:
        """The API's error body for an HTTP error status."""
        ...


def pieces(value: str, size: int = DELTA_CHARS) -> Iterator[str]:
    """``value`` cut into deltas of at most ``size`` characters (nothing for "")."""
    for start in range(0, len(value), size):
        yield value[start : start + size]
