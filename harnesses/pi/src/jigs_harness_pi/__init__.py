"""The Pi coding agent as a jigs harness kind (``pi``), run with :func:`jigs.steps.run_agent`.

Pi has no model object: ``create_agent_runner`` refuses a Pi descriptor at once
(:class:`~jigs.errors.ModelNotAvailableError`); ``run_agent`` runs ``pi --mode json`` for a whole
turn. Install the CLI with ``jigs install pi``; check it with ``jigs doctor --harness pi``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jigs_harness_pi._descriptor import (
        AnthropicCompatible,
        ModelPrice,
        ModelSource,
        OpenAICompatible,
        OpenRouter,
        PiDescriptor,
    )
    from jigs_harness_pi._executable import (
        MIN_VERSION,
        PI_PACKAGE,
        PI_VERSION,
        PiExecutable,
        resolve_pi,
    )
    from jigs_harness_pi._harness import PiHarness

__all__ = [
    "MIN_VERSION",
    "PI_PACKAGE",
    "PI_VERSION",
    "AnthropicCompatible",
    "ModelPrice",
    "ModelSource",
    "OpenAICompatible",
    "OpenRouter",
    "PiDescriptor",
    "PiExecutable",
    "PiHarness",
    "resolve_pi",
]

#: Each public name and the module it lives in.
_EXPORTS: dict[str, str] = {
    "AnthropicCompatible": "jigs_harness_pi._descriptor",
    "ModelPrice": "jigs_harness_pi._descriptor",
    "ModelSource": "jigs_harness_pi._descriptor",
    "OpenAICompatible": "jigs_harness_pi._descriptor",
    "OpenRouter": "jigs_harness_pi._descriptor",
    "PiDescriptor": "jigs_harness_pi._descriptor",
    "MIN_VERSION": "jigs_harness_pi._executable",
    "PI_PACKAGE": "jigs_harness_pi._executable",
    "PI_VERSION": "jigs_harness_pi._executable",
    "PiExecutable": "jigs_harness_pi._executable",
    "resolve_pi": "jigs_harness_pi._executable",
    "PiHarness": "jigs_harness_pi._harness",
}


def __getattr__(name: str) -> Any:
    """The public names, imported on first access: importing the package (as resolving the kind
    does, for its ``plugin`` module) loads neither the engine nor the checks."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
