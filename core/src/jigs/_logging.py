"""jigs' structlog logger, routed through the stdlib logger ``"jigs"``.

jigs never configures logging: the application does. Like any library, jigs is silent by default
(stdlib logging shows nothing below WARNING without a handler); an application that configures
structlog or stdlib logging sees every event. Events have dotted names and keyword fields and
never carry a secret value: environments are logged by name only, and every event passes through
:class:`RedactingLogger`, which replaces each value the step registered as secret
(:mod:`jigs._secrets`) in the event name and its fields before the application's processors see
them. :func:`redact_processor` does the same as a structlog processor, for applications that want
it in their own chain (it also covers rendered tracebacks).

:data:`logger` is a cheap stand-in (a step may run in a fresh process, and importing structlog
costs more than jigs' own import): ``bind`` only records fields, and structlog is imported on the
first event something can receive. An event below WARNING is dropped without going through
structlog only when nothing could see it: structlog is unconfigured (never imported, or imported
but never given a configuration, :func:`structlog.is_configured`, its processor list still the
built-in one and no configured chain cached; so nobody added a processor that captures it) and
the stdlib logger ``"jigs"`` is not enabled for its level (so structlog's
default chain, which only renders, would hand it to a stdlib logger that drops it). Every other
event goes through a real :class:`RedactingLogger` built from structlog's configuration at that
moment, exactly as a ``structlog.wrap_logger`` proxy would.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import structlog.stdlib

    class RedactingLogger(structlog.stdlib.BoundLogger): ...


__all__ = ["RedactingLogger", "logger", "redact_processor", "timed"]

#: stdlib level numbers of structlog's level methods (others always go through structlog).
_LEVELS = {"debug": 10, "info": 20}


def _scrub(value: Any, depth: int = 0) -> Any:
    from jigs._secrets import redact_known

    if isinstance(value, str):
        return redact_known(value)
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


_real: list[Any] = []


def _redacting_class() -> type[Any]:
    import structlog.stdlib

    class RedactingLogger(structlog.stdlib.BoundLogger):
        """jigs' bound logger: known secret values never reach the application's processors."""

        def _process_event(
            self, method_name: str, event: str | None, event_kw: dict[str, Any]
        ) -> tuple[Any, Any]:
            self._context = _scrub(self._context)
            return super()._process_event(
                method_name, _scrub(event), {k: _scrub(v) for k, v in event_kw.items()}
            )

    RedactingLogger.__module__ = __name__
    return RedactingLogger


def _structlog_logger() -> Any:
    """The ``structlog.wrap_logger`` proxy jigs emits through (structlog imported once)."""
    if not _real:
        import logging

        import structlog

        _real.append(structlog.wrap_logger(logging.getLogger("jigs"), wrapper_class=_redacting()))
    return _real[0]


_classes: list[type[Any]] = []


def _redacting() -> type[Any]:
    if not _classes:
        _classes.append(_redacting_class())
    return _classes[0]


def _default_chain(structlog: Any) -> bool:
    """Whether an event would run structlog's default chain as it ships: never configured, its
    processor list still the built-in one (item by item: the list can be edited in place), and
    jigs' logger not one that cached a configured chain. Anything unknown counts as not."""
    try:
        if structlog.is_configured():
            return False
        config = sys.modules.get("structlog._config")
        builtin = getattr(config, "_BUILTIN_DEFAULT_PROCESSORS", None)
        processors = structlog.get_config()["processors"]
        if builtin is None or len(processors) != len(builtin):
            return False
        if any(a is not b for a, b in zip(processors, builtin, strict=True)):
            return False
    except Exception:
        return False
    return not _real or "bind" not in vars(_real[0])


def _unheard(level: int) -> bool:
    """Whether an event at ``level`` reaches nobody (see the module docstring)."""
    structlog = sys.modules.get("structlog")
    if structlog is not None and not _default_chain(structlog):
        return False
    logging = sys.modules.get("logging")
    if logging is None:  # never imported: no handler or level was set, so below WARNING is off
        return True
    return not bool(logging.getLogger("jigs").isEnabledFor(level))


class LazyLogger:
    """A bound logger that becomes a structlog :class:`RedactingLogger` when an event can be
    heard. ``bind``/``new``/``unbind``/``try_unbind`` work on the recorded fields; the level
    methods emit; any other attribute is the real bound logger's."""

    __slots__ = ("_fields",)

    def __init__(self, fields: dict[str, Any] | None = None) -> None:
        self._fields: dict[str, Any] = dict(fields or {})

    def bind(self, **fields: Any) -> LazyLogger:
        return LazyLogger({**self._fields, **fields})

    def new(self, **fields: Any) -> LazyLogger:
        return LazyLogger(fields)

    def unbind(self, *keys: str) -> LazyLogger:
        missing = [k for k in keys if k not in self._fields]
        if missing:
            raise KeyError(missing[0])
        return LazyLogger({k: v for k, v in self._fields.items() if k not in keys})

    def try_unbind(self, *keys: str) -> LazyLogger:
        return LazyLogger({k: v for k, v in self._fields.items() if k not in keys})

    def _bound(self) -> Any:
        real = _structlog_logger()
        return real.bind(**self._fields) if self._fields else real

    def _emit(self, method: str, event: Any, args: tuple[Any, ...], fields: dict[str, Any]) -> Any:
        level = _LEVELS.get(method)
        if level is not None and _unheard(level):
            return None
        return getattr(self._bound(), method)(event, *args, **fields)

    def debug(self, event: Any = None, *args: Any, **fields: Any) -> Any:
        return self._emit("debug", event, args, fields)

    def info(self, event: Any = None, *args: Any, **fields: Any) -> Any:
        return self._emit("info", event, args, fields)

    def warning(self, event: Any = None, *args: Any, **fields: Any) -> Any:
        return self._emit("warning", event, args, fields)

    def error(self, event: Any = None, *args: Any, **fields: Any) -> Any:
        return self._emit("error", event, args, fields)

    def exception(self, event: Any = None, *args: Any, **fields: Any) -> Any:
        return self._emit("exception", event, args, fields)

    def critical(self, event: Any = None, *args: Any, **fields: Any) -> Any:
        return self._emit("critical", event, args, fields)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._bound(), name)

    def __repr__(self) -> str:
        return f"<jigs LazyLogger(context={self._fields!r})>"


logger: Any = LazyLogger()


def __getattr__(name: str) -> Any:
    if name == "RedactingLogger":
        return _redacting()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
