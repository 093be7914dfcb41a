"""jigs' structlog logger, routed through the stdlib logger ``"jigs"``.

jigs never configures logging: the application does. Like any library, jigs is silent by default
(stdlib logging shows nothing below WARNING without a handler); an application that configures
structlog or stdlib logging sees every event. Events have dotted names and keyword fields and
never carry a secret value: environments are logged by name only."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import structlog

__all__ = ["logger", "timed"]

logger: Any = structlog.wrap_logger(
    logging.getLogger("jigs"), wrapper_class=structlog.stdlib.BoundLogger
)


@contextmanager
def timed(
    event: str, log: Any = None, *, span: Any = None, **fields: Any
) -> Iterator[dict[str, Any]]:
    """Log ``event`` with ``seconds`` when the block ends; ``fields`` (mutable) are added.

    On an exception the event is logged as ``<event>.failed`` with the error type. With
    ``span`` (an OpenTelemetry span, see :mod:`jigs._otel`) the block is also a child span.
    """
    target = log if log is not None else logger
    extra: dict[str, Any] = dict(fields)
    child = None
    if span is not None:
        from jigs import _otel

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
            from jigs import _otel

            _otel.end(child, exc)
        raise
    target.info(event, seconds=round(time.perf_counter() - started, 4), **extra)
    if child is not None:
        from jigs import _otel

        _otel.end(child)
