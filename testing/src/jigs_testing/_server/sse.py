"""Server-sent events framing."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["SseEvent", "dumps"]


def dumps(value: Any) -> str:
    """Compact JSON, UTF-8 characters kept as they are."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One SSE event: an optional ``event:`` name and one ``data:`` line.

    Anthropic and Responses streams name every event; Chat Completions streams do not.
    """

    event: str | None
    data: str

    @classmethod
    def json(cls, event: str | None, payload: Any) -> SseEvent:
        """An event whose data is ``payload`` as compact JSON."""
        return cls(event, dumps(payload))

    def encode(self) -> bytes:
        """The wire bytes, ending with the blank line that dispatches the event."""
        head = f"event: {self.event}\n" if self.event is not None else ""
        return f"{head}data: {self.data}\n\n".encode()
