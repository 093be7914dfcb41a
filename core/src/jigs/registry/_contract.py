"""The plugin contract check: is a kind built for the contract this core implements?

:data:`jigs.plugin.CONTRACT_VERSION` is ``"major.minor"``. A kind fits when it declares the same
major and a minor at most this core's (:attr:`jigs.plugin.Harness.contract`). Anything else (a
newer minor, another major, nothing declared, a malformed value) raises
:class:`~jigs.errors.HarnessContractError`.
"""

from __future__ import annotations

import importlib.metadata
import re
from typing import Any

from jigs.errors import HarnessContractError
from jigs.plugin import CONTRACT_VERSION

__all__ = ["CORE_RELEASES", "check_contract", "core_releases_for", "fits", "parse"]

#: The jigs-core releases implementing each contract version, as ``(lowest, first beyond)``
#: release numbers, in release order (what a refusal tells the operator to pin). One entry is
#: added whenever :data:`~jigs.plugin.CONTRACT_VERSION` changes.
CORE_RELEASES: dict[str, tuple[str, str]] = {"1.0": ("0.1", "0.2")}


#: ``major.minor``: ASCII digits, no leading zero, at most 4 each.
_VERSION = re.compile(r"(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})")


def parse(version: object) -> tuple[int, int] | None:
    """``"major.minor"`` as two ints, or None for anything else."""
    if not isinstance(version, str):
        return None
    found = _VERSION.fullmatch(version)
    if found is None:
        return None
    return int(found[1]), int(found[2])


def fits(declared: object, core: str = CONTRACT_VERSION) -> bool:
    """Whether a kind declaring ``declared`` loads on a core implementing ``core``."""
    kind, ours = parse(declared), parse(core)
    if kind is None or ours is None:
        return False
    return kind[0] == ours[0] and kind[1] <= ours[1]


def check_contract(
    harness: Any,
    *,
    distribution: str | None = None,
    distribution_version: str | None = None,
    core: str = CONTRACT_VERSION,
) -> None:
    """Return if ``harness`` (a :class:`~jigs.plugin.Harness`) fits ``core``; raise
    :class:`~jigs.errors.HarnessContractError` naming the kind, what it declares and the
    jigs-core versions that fit otherwise."""
    declared = getattr(harness, "contract", None)
    if fits(declared, core):
        return
    kind = str(getattr(harness, "kind", "?"))
    shown: str | None
    if declared is None:
        shown = None
    elif parse(declared) is not None:
        shown = str(declared)
    elif (  # a short plain string is shown (a version, never a secret); anything else is not
        isinstance(declared, str)
        and len(declared) <= 16
        and declared.isascii()
        and declared.isprintable()
    ):
        shown = f"<malformed {declared!r}, not 'major.minor'>"
    else:  # never echo an arbitrary object; a malformed value is named by its shape
        shown = f"<malformed {type(declared).__name__}, not 'major.minor'>"
    releases = core_releases_for(shown) if shown is not None else None
    raise HarnessContractError(
        kind,
        contract=shown,
        core_contract=core,
        core_version=_core_version(),
        fits=releases,
        distribution=distribution,
        distribution_version=distribution_version,
    )


def core_releases_for(declared: str) -> str | None:
    """The jigs-core releases a kind declaring ``declared`` loads on, as a requirement suffix
    (``">=0.1,<0.2"``), or None when no release in :data:`CORE_RELEASES` does."""
    spans = [span for contract, span in CORE_RELEASES.items() if fits(declared, contract)]
    if not spans:
        return None
    return f">={spans[0][0]},<{spans[-1][1]}"


def _core_version() -> str:
    try:
        return importlib.metadata.version("jigs-core")
    except importlib.metadata.PackageNotFoundError:  # a source tree on sys.path
        return "unknown"
