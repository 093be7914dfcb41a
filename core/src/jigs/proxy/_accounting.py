"""The credential proxy's accounts: one :class:`ProxiedRequest` for every request it forwarded
(status, timings, sizes, and the token usage the upstream reported, read by
:class:`~jigs.proxy._usage.UsageTap` as the response streams by), the count of refused ones,
and the step's :class:`ModelLedger`: the one count of a proxied step's model calls and tokens,
and its budget gate (see :mod:`jigs.proxy._endpoint`).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

import anyio

from jigs.engine._logging import logger
from jigs.engine._usage import Usage
from jigs.proxy._usage import UsageTap

__all__ = ["Accounts", "LedgerCount", "ModelLedger", "Outcome", "ProxiedRequest", "Tally"]

Outcome: TypeAlias = Literal[
    "ok", "upstream_unreachable", "upstream_timeout", "upstream_cut", "client_gone", "closed"
]

_debug_enabled = functools.partial(logging.getLogger("jigs").isEnabledFor, logging.DEBUG)


@dataclass(frozen=True)
class ProxiedRequest:
    """One request the proxy forwarded (refused requests are only counted and logged).

    ``path`` is the path after the step token, without the query (e.g. ``/v1/messages``).
    ``status`` is the status the client got: the upstream's, 502/504 when the upstream failed
    before answering, 0 when the client went away before any answer. ``usage`` is what the
    upstream reported for a model response (``None`` for anything else); ``model`` is the model
    the response names. ``first_byte_seconds`` is the time from the request head to the first
    body byte sent back (``None`` if none was).
    ``outcome`` says how it ended: ``"ok"``, ``"upstream_unreachable"``,
    ``"upstream_timeout"``, ``"upstream_cut"`` (the upstream broke off mid-response),
    ``"client_gone"`` or ``"closed"`` (cut by :meth:`CredentialProxy.aclose`).
    """

    method: str
    path: str
    status: int
    usage: Usage | None
    model: str | None
    request_bytes: int
    response_bytes: int
    seconds: float
    first_byte_seconds: float | None
    outcome: Outcome


class Tally:
    """One forwarded request while it is relayed; :meth:`record` when it ends."""

    __slots__ = (
        "first_byte",
        "method",
        "outcome",
        "path",
        "request_bytes",
        "response_bytes",
        "started",
        "status",
        "tap",
    )

    def __init__(self, method: str, path: str) -> None:
        self.method = method
        self.path = path
        self.started = time.perf_counter()
        self.request_bytes = 0
        self.response_bytes = 0
        self.first_byte: float | None = None
        self.status = 0
        self.outcome: Outcome = "ok"
        self.tap: UsageTap | None = None

    def failed(self, status: int, outcome: Outcome) -> None:
        self.status, self.outcome = status, outcome

    def sent(self) -> None:
        """A body byte went back to the client."""
        if self.first_byte is None:
            self.first_byte = time.perf_counter() - self.started

    def record(self) -> ProxiedRequest:
        tap = self.tap
        return ProxiedRequest(
            method=self.method,
            path=self.path,
            status=self.status,
            usage=tap.result() if tap is not None else None,
            model=tap.model if tap is not None else None,
            request_bytes=self.request_bytes,
            response_bytes=self.response_bytes,
            seconds=time.perf_counter() - self.started,
            first_byte_seconds=self.first_byte,
            outcome=self.outcome,
        )


class Accounts:
    """One proxy's records and refusals; hands each record to ``on_request`` (an exception it
    raises is logged and ignored)."""

    def __init__(self, on_request: Callable[[ProxiedRequest], object] | None) -> None:
        self.records: list[ProxiedRequest] = []
        self.refused = 0
        self.port: int | None = None
        self._on_request = on_request

    def record(self, record: ProxiedRequest) -> None:
        self.records.append(record)
        usage = record.usage
        if _debug_enabled():  # rendering an event stdlib then drops costs ~0.1 ms a request
            logger.debug(
                "jigs.proxy.request",
                method=record.method,
                path=record.path,
                status=record.status,
                outcome=record.outcome,
                seconds=round(record.seconds, 4),
                input_tokens=usage.input_tokens if usage else None,
                output_tokens=usage.output_tokens if usage else None,
                port=self.port,
            )
        if self._on_request is not None:
            try:
                self._on_request(record)
            except Exception as exc:
                logger.warning("jigs.proxy.hook_failed", error=type(exc).__name__, port=self.port)


@dataclass(frozen=True)
class LedgerCount:
    """Model calls and tokens (input with cached, the jigs :class:`~jigs.models.Usage` way)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0

    def minus(self, other: LedgerCount) -> LedgerCount:
        return LedgerCount(
            self.calls - other.calls,
            self.input_tokens - other.input_tokens,
            self.output_tokens - other.output_tokens,
            self.cached_input_tokens - other.cached_input_tokens,
        )


class ModelLedger:
    """Every model call one step's proxy forwarded, and the step's budget gate.

    Written by the proxy's loop (:meth:`admit`, :meth:`add`), read by the step's engine
    (:meth:`start_turn`, :meth:`count`, :meth:`refuse`, :meth:`price`): thread-safe. A call is
    a forwarded request whose response reported token usage."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = LedgerCount()
        self._turn_start = LedgerCount()
        self._in_flight = 0
        self._budget: float | None = None
        self._rate: float | None = None  # USD per token, as the CLI priced its own calls
        self._refusal: str | None = None
        self.over_budget = False
        """Whether a call of the current turn was refused because its budget is spent."""

    def admit(self) -> str | None:
        """Before the proxy forwards a request: why it may not (the budget is spent), or None."""
        with self._lock:
            if self._refusal is None and self._budget is not None and self._rate is not None:
                turn = self._count.minus(self._turn_start)
                if (turn.input_tokens + turn.output_tokens) * self._rate > self._budget:
                    self._refusal = _over(self._budget)
            if self._refusal is not None:
                self.over_budget = True
                return self._refusal
            self._in_flight += 1
            return None

    def add(self, record: ProxiedRequest) -> None:
        """A forwarded request ended (each admitted one ends here once)."""
        usage = record.usage
        with self._lock:
            self._in_flight = max(0, self._in_flight - 1)
            if usage is None:
                return
            cached = usage.cached_input_tokens or 0
            inputs = usage.input_tokens or 0
            c = self._count
            self._count = LedgerCount(
                c.calls + 1,
                c.input_tokens + inputs,
                c.output_tokens + (usage.output_tokens or 0),
                c.cached_input_tokens + cached,
            )

    def start_turn(self, budget_usd: float | None) -> None:
        """A turn begins: its counts start from here, under its own budget."""
        with self._lock:
            self._turn_start = self._count
            self._budget = budget_usd
            self._refusal = None
            self.over_budget = False

    def count(self) -> LedgerCount:
        """The current turn's calls and tokens so far."""
        with self._lock:
            return self._count.minus(self._turn_start)

    def price(self, cost_usd: float, tokens: int) -> None:
        """The CLI reported ``cost_usd`` for ``tokens`` of its own: the rate the proxy prices
        the turn's calls at from now on (to refuse them once the budget is spent)."""
        if tokens > 0 and cost_usd >= 0:
            with self._lock:
                self._rate = cost_usd / tokens

    def refuse(self, why: str) -> None:
        """Refuse every further call of this turn with ``why``."""
        with self._lock:
            self._refusal = why

    async def settle(self, seconds: float = 1.0) -> None:
        """Wait (up to ``seconds``) until no forwarded request is still being relayed: the CLI
        may report its turn done a moment before the proxy recorded the last response."""
        ends = time.monotonic() + seconds
        while self._in_flight and time.monotonic() < ends:
            await anyio.sleep(0.005)


def _over(budget: float) -> str:
    return (
        f"the step's turn is over its max_budget_usd of ${budget:g} (every model call through "
        "the proxy counts); jigs refuses further model calls of this turn"
    )
