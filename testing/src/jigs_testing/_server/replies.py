"""Scripted replies: what the fake model answers, independent of the wire format.

A :class:`Reply` is rendered into whichever format the request spoke (Anthropic Messages,
OpenAI Responses or Chat Completions), streamed or not, by the ``wire_*`` modules. A
:class:`DynamicReply` wraps a function of the recorded request and is resolved when the request
arrives. The small constructors (:func:`text`, :func:`tool_call`, :func:`tool_calls`,
:func:`error`, :func:`reply`) are the public way to build them; they validate their arguments and
raise :class:`ValueError` (or :class:`TypeError`) at construction, never at serve time.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from .record import RecordedRequest

__all__ = [
    "DynamicReply",
    "ErrorSpec",
    "Reply",
    "ReplyFunction",
    "ScriptEntry",
    "ScriptItem",
    "ToolCall",
    "coerce_entry",
    "error",
    "reply",
    "text",
    "tool_call",
    "tool_calls",
]

_MCP_PREFIX = "mcp__"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call the fake model makes.

    ``arguments`` is the JSON text of an object, exactly as sent on the wire. ``namespace`` is
    the Responses-API namespace (Codex's MCP tools live in ``mcp__<server>``); formats without
    namespaces see the flat name ``<namespace>__<name>``. ``id`` overrides the generated call id
    (Anthropic ``tool_use.id``, Responses ``call_id``, Chat ``tool_calls[].id``).
    """

    name: str
    arguments: str = "{}"
    id: str | None = None
    namespace: str | None = None

    @property
    def flat_name(self) -> str:
        """The name as Anthropic and Chat Completions clients know it."""
        return f"{self.namespace}__{self.name}" if self.namespace else self.name

    def split_mcp_name(self) -> tuple[str | None, str]:
        """``(namespace, name)`` for the Responses API, splitting ``mcp__<server>__<tool>``.

        An explicit namespace wins. A flat ``mcp__server__tool`` name splits at the first
        ``__`` after the server name; any other name has no namespace.
        """
        if self.namespace:
            return self.namespace, self.name
        if self.name.startswith(_MCP_PREFIX):
            server, sep, tool = self.name[len(_MCP_PREFIX) :].partition("__")
            if sep and server and tool:
                return f"{_MCP_PREFIX}{server}", tool
        return None, self.name


@dataclass(frozen=True, slots=True)
class ErrorSpec:
    """An API error: HTTP ``status`` and ``message``, rendered in the request's own error shape.

    ``type`` and ``code`` override the defaults derived from the status. With ``in_stream`` a
    streaming request gets a 200 stream that starts normally and then carries the error event
    (Anthropic ``error``, Responses ``response.failed``, Chat an ``error`` chunk); a
    non-streaming request still gets the plain HTTP error.
    """

    status: int
    message: str
    type: str | None = None
    code: str | None = None
    in_stream: bool = False


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted model reply.

    Exactly one of two shapes: an assistant turn (``text`` and/or ``tool_calls``, text first) or
    an ``error``. ``delay`` is the number of seconds to wait before the reply starts.
    ``cut_after`` cuts the reply off: a streamed reply sends that many events (never the
    terminal one) and then closes the connection; a plain JSON reply sends its head and half of
    its body. ``model`` overrides the model name echoed back (default: the one asked for).
    """

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    error: ErrorSpec | None = None
    delay: float = 0.0
    cut_after: int | None = None
    model: str | None = None

    @property
    def kind(self) -> str:
        """``"error"``, ``"tool_calls"`` or ``"text"``: a short label for logs."""
        if self.error is not None:
            return "error"
        return "tool_calls" if self.tool_calls else "text"


ReplyFunction: TypeAlias = "Callable[[RecordedRequest], Reply | str | Awaitable[Reply | str]]"
"""What :func:`reply` takes: a function (plain or ``async``) of the recorded request."""


@dataclass(frozen=True, slots=True)
class DynamicReply:
    """A reply computed from the request when it arrives.

    ``function`` receives the :class:`~jigs_testing.RecordedRequest` and returns (or, if it is
    ``async``, resolves to) a :class:`Reply` or a string (taken as :func:`text`). ``delay`` is
    added to the returned reply's own delay. If the function raises, the request gets an HTTP
    500 API error naming the exception and the failure is kept in ``ModelServer.failures``.
    """

    function: ReplyFunction
    delay: float = 0.0

    @property
    def kind(self) -> str:
        """``"dynamic"``: a short label for logs."""
        return "dynamic"


ScriptEntry: TypeAlias = Reply | DynamicReply
ScriptItem: TypeAlias = "Reply | DynamicReply | str | ReplyFunction"
"""What a script accepts: a reply, a str (taken as :func:`text`) or a reply function."""


def _check_delay(delay: float) -> float:
    if isinstance(delay, bool) or not isinstance(delay, int | float):
        raise TypeError(f"delay must be a number of seconds, not {type(delay).__name__}")
    if not math.isfinite(delay) or delay < 0:
        raise ValueError(f"delay must be a finite number of seconds >= 0, not {delay!r}")
    return float(delay)


def _check_cut_after(cut_after: int | None) -> int | None:
    if cut_after is None:
        return None
    if isinstance(cut_after, bool) or not isinstance(cut_after, int):
        raise TypeError(f"cut_after must be an int (events to send), not {cut_after!r}")
    if cut_after < 0:
        raise ValueError(f"cut_after must be >= 0, not {cut_after}")
    return cut_after


def _arguments_json(arguments: Mapping[str, Any] | str | None, name: str) -> str:
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError as exc:
            raise ValueError(f"tool call {name!r}: arguments is not valid JSON: {exc}") from exc
        if not isinstance(parsed, dict):
            raise ValueError(f"tool call {name!r}: arguments must be a JSON object")
        return arguments
    if not isinstance(arguments, Mapping):
        raise TypeError(f"tool call {name!r}: arguments must be a mapping or a JSON string")
    try:
        return json.dumps(dict(arguments), separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"tool call {name!r}: arguments are not JSON-serialisable: {exc}") from exc


def _make_tool_call(
    name: str,
    arguments: Mapping[str, Any] | str | None = None,
    *,
    id: str | None = None,
    namespace: str | None = None,
) -> ToolCall:
    if not isinstance(name, str) or not name:
        raise ValueError("a tool call needs a non-empty name")
    return ToolCall(
        name=name,
        arguments=_arguments_json(arguments, name),
        id=id,
        namespace=namespace or None,
    )


def text(
    content: str,
    *,
    delay: float = 0.0,
    cut_after: int | None = None,
    model: str | None = None,
) -> Reply:
    """A plain assistant text reply (Anthropic ``end_turn``, Chat ``stop``)."""
    if not isinstance(content, str):
        raise TypeError(f"text() needs a str, not {type(content).__name__}")
    return Reply(
        text=content,
        delay=_check_delay(delay),
        cut_after=_check_cut_after(cut_after),
        model=model,
    )


def tool_call(
    name: str,
    arguments: Mapping[str, Any] | str | None = None,
    *,
    id: str | None = None,
    namespace: str | None = None,
    text: str | None = None,
    delay: float = 0.0,
    cut_after: int | None = None,
    model: str | None = None,
) -> Reply:
    """A reply that calls one tool (Anthropic ``tool_use``, Responses ``function_call``).

    ``arguments`` is a mapping or the JSON text of an object. A name ``mcp__<server>__<tool>``
    (or ``namespace="mcp__<server>"`` with ``name="<tool>"``) is sent to Responses clients as
    ``"namespace": "mcp__<server>", "name": "<tool>"``, the way Codex expects MCP tool calls.
    ``text`` adds an assistant text block before the call.
    """
    call = _make_tool_call(name, arguments, id=id, namespace=namespace)
    return tool_calls([call], text=text, delay=delay, cut_after=cut_after, model=model)


def tool_calls(
    calls: Iterable[ToolCall | Mapping[str, Any] | tuple[str, Mapping[str, Any]]],
    *,
    text: str | None = None,
    delay: float = 0.0,
    cut_after: int | None = None,
    model: str | None = None,
) -> Reply:
    """A reply that calls several tools at once (parallel tool calls), in order.

    Each call is a :class:`ToolCall`, a ``(name, arguments)`` pair or a mapping with ``name``
    and optional ``arguments``, ``id`` and ``namespace``.
    """
    built: list[ToolCall] = []
    for call in calls:
        if isinstance(call, ToolCall):
            built.append(call)
        elif isinstance(call, tuple):
            name, arguments = call
            built.append(_make_tool_call(name, arguments))
        elif isinstance(call, Mapping):
            unknown = set(call) - {"name", "arguments", "id", "namespace"}
            if unknown:
                raise ValueError(f"unknown tool call fields: {sorted(unknown)}")
            built.append(
                _make_tool_call(
                    call.get("name", ""),
                    call.get("arguments"),
                    id=call.get("id"),
                    namespace=call.get("namespace"),
                )
            )
        else:
            raise TypeError(f"not a tool call: {call!r}")
    if not built:
        raise ValueError("tool_calls() needs at least one call")
    if text is not None and not isinstance(text, str):
        raise TypeError("text must be a str")
    return Reply(
        text=text,
        tool_calls=tuple(built),
        delay=_check_delay(delay),
        cut_after=_check_cut_after(cut_after),
        model=model,
    )


def error(
    status: int = 500,
    message: str = "error scripted by jigs_testing.ModelServer",
    *,
    type: str | None = None,
    code: str | None = None,
    in_stream: bool = False,
    delay: float = 0.0,
    cut_after: int | None = None,
) -> Reply:
    """An API error reply in the request's own error shape.

    Anthropic: ``{"type": "error", "error": {"type": "api_error", "message": ...}}``; OpenAI:
    ``{"error": {"message": ..., "type": ..., "param": null, "code": ...}}``. The error type is
    derived from ``status`` unless given. See :class:`ErrorSpec` for ``in_stream``.
    """
    if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
        raise ValueError(f"error status must be an int in 400..599, not {status!r}")
    return Reply(
        error=ErrorSpec(
            status=status, message=str(message), type=type, code=code, in_stream=in_stream
        ),
        delay=_check_delay(delay),
        cut_after=_check_cut_after(cut_after),
    )


def reply(function: ReplyFunction, *, delay: float = 0.0) -> DynamicReply:
    """A reply computed from the request, e.g. ``reply(lambda r: f"{r.message_count} msgs")``."""
    if not callable(function):
        raise TypeError("reply() needs a callable taking the RecordedRequest")
    return DynamicReply(function=function, delay=_check_delay(delay))


def coerce_entry(item: object) -> ScriptEntry:
    """Turn a script item into a :data:`ScriptEntry`: strings become :func:`text`, callables
    become :func:`reply`. Raises :class:`TypeError` for anything else."""
    if isinstance(item, Reply | DynamicReply):
        return item
    if isinstance(item, str):
        return text(item)
    if callable(item):
        return reply(item)
    raise TypeError(
        f"a script entry must be a Reply, a str or a callable, not {type(item).__name__}"
    )
