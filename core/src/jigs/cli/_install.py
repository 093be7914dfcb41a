"""``jigs install [KIND...]``: install the CLIs that ``pip`` does not bring, showing progress.

Each kind that overrides :meth:`jigs.plugin.Harness.install` is installed in turn under a progress
line on stderr (a spinner with the elapsed seconds on a terminal, a plain ``KIND: installing...``
line otherwise); stdout gets one result line per kind. A failed install does not stop the others.
Then each kind's :meth:`~jigs.plugin.Harness.warm` builds what a fresh worker's first step would
otherwise build (its home seed, its compile cache); a failed warm-up is reported and does not change
the exit code, since the step builds what is missing. Exit code 0 when every kind's CLI is in place
(installed now or brought by its distribution), 1 when an install failed, a kind is unknown, or
there was no kind at all (nothing could be installed).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import anyio
import structlog

from jigs.cli._output import progress
from jigs.env import build_env
from jigs.errors import JigsError
from jigs.plugin import Harness
from jigs.registry._registry import default_registry

__all__ = ["install"]


def _has_installer(harness: object) -> bool:
    return getattr(type(harness), "install", None) is not Harness.install


def _keeps_something(harness: object) -> bool:
    return getattr(type(harness), "warm", None) is not Harness.warm


async def _install_one(kind: str) -> bool:
    try:
        harness = default_registry().get(kind)
    except JigsError as exc:
        print(f"{kind}: FAILED: {exc}", flush=True)
        return False
    if await _install_cli(kind, harness):
        if _keeps_something(harness):
            await _warm(kind, harness)
        return True
    return False


async def _install_cli(kind: str, harness: Harness[Any]) -> bool:
    nothing = f"{kind}: nothing to install (its CLI comes with its distribution)"
    if not _has_installer(harness):
        print(nothing, flush=True)
        return True
    started = time.monotonic()
    try:
        with progress(f"{kind}: installing its CLI"):
            what = await harness.install(build_env([]))
    except NotImplementedError:
        print(nothing, flush=True)
        return True
    except Exception as exc:  # a failed install (npm, disk, network) must not stop the others
        seconds = time.monotonic() - started
        print(f"{kind}: FAILED after {seconds:.1f}s: {type(exc).__name__}: {exc}", flush=True)
        return False
    print(f"{kind}: {what} ({time.monotonic() - started:.1f}s)", flush=True)
    return True


async def _warm(kind: str, harness: Harness[Any]) -> None:
    """The kind's warm-up; an optimisation, so a failure is said and not counted."""
    started = time.monotonic()
    log = structlog.get_logger("jigs.install").bind(kind=kind)
    try:
        with progress(f"{kind}: preparing what its first step would build"):
            what = await harness.warm(build_env([]), log)
    except Exception as exc:
        seconds = time.monotonic() - started
        print(
            f"{kind}: warm-up failed after {seconds:.1f}s ({type(exc).__name__}: {exc}); "
            f"its first step builds what is missing",
            flush=True,
        )
        return
    if what is not None:
        print(f"{kind}: {what} ({time.monotonic() - started:.1f}s)", flush=True)


def install(kinds: list[str]) -> int:
    """Install ``kinds`` (default: every enabled kind); the exit code (see the module doc)."""
    chosen = kinds or default_registry().enabled_kinds()
    if not chosen:
        print(
            "jigs install: no harness kind is installed; e.g. pip install jigs-harness-claude",
            file=sys.stderr,
        )
        return 1

    async def run_all() -> bool:
        results = [await _install_one(kind) for kind in chosen]
        return all(results)

    return 0 if anyio.run(run_all) else 1
