"""jigs' structlog logger, routed through the stdlib logger ``"jigs"``.

jigs never configures logging: the application does. Like any library, jigs is silent by default
(stdlib logging shows nothing below WARNING without a handler); an application that configures
structlog or stdlib logging sees every event. Events have dotted names and keyword fields and
never carry a secret value: environments are logged by name only, and every event passes through
:class:`RedactingLogger`, which replaces each value the step registered as secret
(:mod:`jigs.policy._secrets`) in the event name and its fields before the application's processors
see them. :func:`redact_processor` does the same as a structlog processor, for applications that
want it in their own chain (it also covers rendered tracebacks).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import structlog
import structlog.stdlib

from jigs.engine import _otel
from jigs.policy import _secrets

__all__ = ["RedactingLogger", "logger", "redact_processor", "timed"]


def _scrub(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return _secrets.redact_known(value)
    if depth > 4:
        return value
    if isinstance(value, dict):
        return {_scrub(k, depth + 1): _scrub(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return type(value)(_scrub(v, depth + 1) for v in value)
    return value


def redact_processor(logger: Any, method_name: str, event_dict: Any) -> Any:
    """A structlog processor: every known secret value in the event dict is replaced."""
    return _scrub(event_dict)


class RedactingLogger(structlog.stdlib.BoundLogger):
    """jigs' bound logger: known secret values never reach the application's processors."""

    def _process_event(
        self, method_name: str, event: str | None, event_kw: dict[str, Any]
    ) -> tuple[Any, Any]:
        self._context = _scrub(self._context)
        return super()._process_event(
            method_name, _scrub(event), {k: _scrub(v) for k, v in event_kw.items()}
        )


#: jigs' logger: structlog's configuration is read when an event is emitted (a lazy proxy), so an
#: application may configure structlog after importing jigs.
logger: Any = structlog.wrap_logger(logging.getLogger("jigs"), wrapper_class=RedactingLogger)


@contextmanager
def timed(
    event: str, log: Any = None, *, span: Any = None, **fields: Any
) -> Iterator[dict[str, Any]]:
    """Log ``event`` with ``seconds`` when the block ends; ``fields`` (mutable) are added.

    On an exception the event is logged as ``<event>.failed`` with the error type. With
    ``span`` (an OpenTelemetry span, see :mod:`jigs.engine._otel`) the block is also a child span.
    """
    target = log if log is not None else logger
    extra: dict[str, Any] = dict(fields)
    child = None
    if span is not None:
        child = _otel.start(event, span)
    started = time.perf_counter()
    try:
        yield extra
    except BaseException as exc:
        target.info(
            f"{event}.failed",
            error=type(exc).__name__,
            seconds=round(time.perf_counter() - started, 4),
            **extra,
        )
        if child is not None:
            _otel.end(child, exc)
        raise
    target.info(event, seconds=round(time.perf_counter() - started, 4), **extra)
    if child is not None:
        _otel.end(child)
