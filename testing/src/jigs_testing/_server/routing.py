"""Which API a request path belongs to, matched on the path's suffix.

``/v1/messages``, ``/messages`` and ``/anything/v1/messages`` are all Anthropic Messages; a
trailing slash is ignored and the query string (``?beta=true``) plays no part.
"""

from __future__ import annotations

from dataclasses import dataclass

from .record import WireFormat

__all__ = ["Route", "classify"]


@dataclass(frozen=True, slots=True)
class Route:
    """Where a path leads: its wire format, the method it needs, and for
    ``GET …/models/<id>`` the model asked about."""

    wire: WireFormat
    method: str | None
    model_id: str | None = None


_SUFFIXES: tuple[tuple[str, WireFormat, str], ...] = (
    ("/messages/count_tokens", "count_tokens", "POST"),
    ("/messages", "anthropic", "POST"),
    ("/responses", "responses", "POST"),
    ("/chat/completions", "chat", "POST"),
    ("/models", "models", "GET"),
)


def classify(path: str) -> Route:
    """The route for ``path`` (without query); ``wire="other"`` when nothing matches."""
    trimmed = path.rstrip("/") or "/"
    for suffix, wire, method in _SUFFIXES:
        if trimmed.endswith(suffix):
            return Route(wire, method)
    head, _, last = trimmed.rpartition("/")
    if last and (head == "/models" or head.endswith("/models")):
        return Route("models", "GET", model_id=last)
    return Route("other", None)
