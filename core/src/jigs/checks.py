"""A small checks engine: installation, descriptor and just-in-time checks.

A :class:`Check` has an id, a label and an async ``run`` that returns :class:`CheckOk` or
:class:`CheckFailure` (a reason and a repair). :func:`run_checks` runs checks concurrently, each
under its own timeout; a check that raises or does not answer in time is reported as a failure of
that check, never as an exception out of the engine. Every known secret value
(:mod:`jigs.policy._secrets`) is redacted from an outcome's detail, reason and repair.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import anyio

from jigs.policy import _secrets

__all__ = [
    "CHECK_TIMEOUT",
    "Check",
    "CheckFailure",
    "CheckOk",
    "CheckOutcome",
    "FailedCheck",
    "run_checks",
]

#: Seconds a single check may take before it is reported as unanswered.
CHECK_TIMEOUT = 15.0


@dataclass(frozen=True)
class CheckOk:
    """The check passed; ``detail`` is shown by ``jigs doctor``."""

    detail: str = ""


@dataclass(frozen=True)
class CheckFailure:
    """The check failed: ``reason`` says what is wrong, ``repair`` how to fix it."""

    reason: str
    repair: str


CheckResult = CheckOk | CheckFailure


@dataclass(frozen=True)
class Check:
    """One named check. ``run`` must be safe to run concurrently with other checks."""

    id: str
    label: str
    run: Callable[[], Awaitable[CheckResult]]
    timeout: float | None = None


@dataclass(frozen=True)
class CheckOutcome:
    """What one check concluded, with how long it took."""

    id: str
    label: str
    ok: bool
    detail: str = ""
    reason: str = ""
    repair: str = ""
    unanswered: bool = False
    seconds: float = 0.0

    def _concluded(self) -> tuple[object, ...]:
        """Every field but ``seconds``: how long a check took is not what it concluded."""
        fields = (self.id, self.label, self.ok, self.detail, self.reason, self.repair)
        return (*fields, self.unanswered)

    def __eq__(self, other: object) -> bool:
        if type(other) is not CheckOutcome:
            return NotImplemented
        return self._concluded() == other._concluded()

    def __hash__(self) -> int:
        return hash(self._concluded())


#: A failed outcome (``ok`` is False). An alias for readability in signatures.
FailedCheck = CheckOutcome


def _redacted(outcome: CheckOutcome) -> CheckOutcome:
    return dataclasses.replace(
        outcome,
        detail=_secrets.redact_known(outcome.detail),
        reason=_secrets.redact_known(outcome.reason),
        repair=_secrets.redact_known(outcome.repair),
    )


async def _run_one(check: Check, default_timeout: float) -> CheckOutcome:
    return _redacted(await _run_check(check, default_timeout))


async def _run_check(check: Check, default_timeout: float) -> CheckOutcome:
    timeout = check.timeout if check.timeout is not None else default_timeout
    started = time.perf_counter()
    try:
        with anyio.fail_after(timeout):
            result: object = await check.run()
    except TimeoutError:
        return CheckOutcome(
            check.id,
            check.label,
            ok=False,
            reason=f"the check did not answer within {timeout:g}s",
            repair="look at why it hangs (run `jigs doctor` for details)",
            unanswered=True,
            seconds=time.perf_counter() - started,
        )
    except Exception as exc:  # a broken check is a failure of that check, not of the engine
        return CheckOutcome(
            check.id,
            check.label,
            ok=False,
            reason=f"the {check.id} check itself failed: {type(exc).__name__}: {exc}",
            repair="report this as a bug in the plugin that provides the check",
            seconds=time.perf_counter() - started,
        )
    seconds = time.perf_counter() - started
    if isinstance(result, CheckOk):
        return CheckOutcome(check.id, check.label, ok=True, detail=result.detail, seconds=seconds)
    if not isinstance(result, CheckFailure):
        return CheckOutcome(
            check.id,
            check.label,
            ok=False,
            reason=f"the {check.id} check returned {type(result).__name__}, not a check result",
            repair="report this as a bug in the plugin that provides the check",
            seconds=seconds,
        )
    return CheckOutcome(
        check.id,
        check.label,
        ok=False,
        reason=result.reason,
        repair=result.repair,
        seconds=seconds,
    )


async def run_checks(
    checks: Sequence[Check], *, timeout: float = CHECK_TIMEOUT
) -> list[CheckOutcome]:
    """Run every check concurrently and return their outcomes in the order given."""
    outcomes: list[CheckOutcome | None] = [None] * len(checks)

    async def one(index: int, check: Check) -> None:
        outcomes[index] = await _run_one(check, timeout)

    async with anyio.create_task_group() as tg:
        for index, check in enumerate(checks):
            tg.start_soon(one, index, check)
    return [o for o in outcomes if o is not None]
