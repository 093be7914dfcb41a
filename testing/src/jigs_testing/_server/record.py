"""The request log entry: what a client sent, minus every header value."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

__all__ = ["RecordedRequest", "WireFormat", "count_messages", "requested_model"]

WireFormat: TypeAlias = Literal["anthropic", "responses", "chat", "models", "count_tokens", "other"]

MODEL_WIRES: frozenset[str] = frozenset({"anthropic", "responses", "chat"})

# Keys whose string values are structure or identifiers, not conversation text.
_NOT_TEXT_KEYS = frozenset(
    {
        "type",
        "role",
        "id",
        "call_id",
        "tool_use_id",
        "tool_call_id",
        "status",
        "cache_control",
        "signature",
        "encrypted_content",
        "media_type",
        "detail",
        "format",
    }
)
_TEXT_SECTIONS = ("system", "instructions", "messages", "input", "prompt")


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One HTTP request the server received (CONNECT and proxy requests are logged apart).

    ``header_names`` holds the lower-cased header names in arrival order; header values are
    never kept, because they carry API keys. ``user_agent`` is the one value kept. ``body`` is
    the parsed JSON body (``None`` when there was none or it was not JSON; ``problem`` then says
    why). ``reply_index`` is the position in the script of the reply that answered this request,
    ``None`` when no scripted reply was used (not a model request, a bad request, or the script
    had run out).
    """

    index: int
    method: str
    path: str
    query: str
    wire: WireFormat
    header_names: tuple[str, ...]
    user_agent: str | None
    body: Any = field(repr=False)
    model: str | None
    message_count: int
    stream: bool
    reply_index: int | None
    received_at: float
    problem: str | None = None
    body_size: int = field(default=0)

    @property
    def is_model_request(self) -> bool:
        """True for Anthropic Messages, Responses and Chat Completions requests."""
        return self.wire in MODEL_WIRES

    @property
    def target(self) -> str:
        """Path and query as sent, e.g. ``/v1/messages?beta=true``."""
        return f"{self.path}?{self.query}" if self.query else self.path

    def has_header(self, name: str) -> bool:
        """Whether a header with this name (any case) was sent."""
        return name.lower() in self.header_names

    def text(self) -> str:
        """Every string of conversation content in the request, joined with newlines.

        Walks ``system``, ``instructions``, ``messages``, ``input`` and ``prompt`` (text
        blocks, string contents, tool results, tool-call arguments) and skips structural
        fields such as ``type``, ``role`` and ids. Tool definitions are not included. Meant for
        searching a canary: ``assert "CANARY" in req.text()``.
        """
        if not isinstance(self.body, dict):
            return ""
        parts: list[str] = []
        for section in _TEXT_SECTIONS:
            if section in self.body:
                parts.extend(_strings(self.body[section]))
        return "\n".join(parts)

    def tool_names(self) -> list[str]:
        """Names of the tools offered to the model, flattened (``mcp__srv__tool`` for a
        Responses namespace ``mcp__srv`` holding ``tool``)."""
        if not isinstance(self.body, dict):
            return []
        tools = self.body.get("tools")
        if not isinstance(tools, list):
            return []
        return list(_tool_names(tools))

    def summary(self) -> dict[str, Any]:
        """A JSON-ready dict of everything except the body (safe to log)."""
        return {
            "index": self.index,
            "method": self.method,
            "path": self.path,
            "query": self.query,
            "wire": self.wire,
            "header_names": list(self.header_names),
            "user_agent": self.user_agent,
            "model": self.model,
            "message_count": self.message_count,
            "stream": self.stream,
            "reply_index": self.reply_index,
            "problem": self.problem,
        }


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        if value:
            yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in _NOT_TEXT_KEYS:
                yield from _strings(item)


def _tool_names(tools: list[Any]) -> Iterator[str]:
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        function = tool.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            yield function["name"]
        elif tool.get("type") == "namespace" and isinstance(tool.get("tools"), list):
            prefix = tool.get("name")
            for inner in _tool_names(tool["tools"]):
                yield f"{prefix}__{inner}" if prefix else inner
        elif isinstance(tool.get("name"), str):
            yield tool["name"]


def count_messages(body: Any) -> int:
    """Number of messages (Anthropic, Chat) or input items (Responses) in a request body.

    A Responses ``input`` given as a plain string counts as one item. This is how a test proves
    that a resumed session re-sent its history.
    """
    if not isinstance(body, dict):
        return 0
    for key in ("messages", "input"):
        value = body.get(key)
        if isinstance(value, list):
            return len(value)
        if isinstance(value, str):
            return 1
    return 0


def requested_model(body: Any) -> str | None:
    """The ``model`` a request body asked for, if it is a string."""
    if isinstance(body, dict) and isinstance(body.get("model"), str):
        return str(body["model"])
    return None
