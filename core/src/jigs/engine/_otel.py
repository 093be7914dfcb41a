"""OpenTelemetry spans for steps, stages, turns and tool calls -- a no-op without the API.

Install ``jigs-core[otel]`` (``opentelemetry-api``) and configure a tracer provider in the
application; jigs then records (it uses the API only once the application has imported it, so a
step that is not traced pays nothing for it):

- ``jigs.step`` (child of whatever span is current when the step opens), with ``jigs.kind``,
  ``jigs.run_id`` and ``jigs.worktree``;
- one span per pipeline stage (``runner.env.built``, ``runner.lock.acquired``,
  ``runner.checks.jit``, ...), children of the step span;
- ``invoke_agent <kind>`` per turn (GenAI semantic conventions: ``gen_ai.operation.name``,
  ``gen_ai.agent.name``, ``gen_ai.request.model``, ``gen_ai.conversation.id``,
  ``gen_ai.usage.input_tokens`` / ``output_tokens``, ``gen_ai.response.finish_reasons``);
- ``execute_tool <name>`` per tool call (``gen_ai.tool.name``, ``gen_ai.tool.call.id``), children
  of the turn span.

A turn's CLI gets ``TRACEPARENT`` (W3C trace context) for CLIs that continue a trace.
Without ``opentelemetry-api`` every function here returns None and costs nothing.
"""

from __future__ import annotations

import sys
from typing import Any

from jigs.registry._version import __version__

__all__ = ["end", "start", "traceparent"]

_cache: dict[str, Any] = {}


def _get_tracer() -> Any:
    if "tracer" not in _cache:
        # an optional extra: an application that traces has imported it already (setting a
        # tracer provider needs it), so jigs never imports it itself
        if "opentelemetry.trace" not in sys.modules:
            return None
        from opentelemetry import trace

        # a proxy: spans go to whatever provider the application sets, even later
        _cache["tracer"] = trace.get_tracer("jigs", __version__)
    return _cache["tracer"]


def start(name: str, parent: Any = None, **attributes: Any) -> Any:
    """Start a span (a child of ``parent``, else of the current span); None without the API."""
    tracer = _get_tracer()
    if tracer is None:
        return None
    from opentelemetry import trace

    context = trace.set_span_in_context(parent) if parent is not None else None
    clean = {k: v for k, v in attributes.items() if v is not None}
    return tracer.start_span(name, context=context, attributes=clean)


def end(span: Any, error: BaseException | None = None, **attributes: Any) -> None:
    """Set ``attributes``, mark an error, and end ``span`` (None: nothing)."""
    if span is None:
        return
    for key, value in attributes.items():
        if value is not None:
            span.set_attribute(key, value)
    if error is not None:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", type(error).__name__)
        span.set_status(Status(StatusCode.ERROR, type(error).__name__))
    span.end()


def traceparent(span: Any) -> str | None:
    """The W3C ``traceparent`` value of ``span`` (None when not recording)."""
    if span is None:
        return None
    context = span.get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
