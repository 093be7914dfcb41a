"""The Pi coding agent as a jigs harness kind (``pi``), run with :func:`jigs.steps.run_agent`.

Pi has no model object: ``create_agent_runner`` refuses a Pi descriptor at once
(:class:`~jigs.errors.ModelNotAvailableError`); ``run_agent`` runs ``pi --mode json`` for a whole
turn. Install the CLI with ``jigs install pi``; check it with ``jigs doctor --harness pi``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jigs._lazy import lazy_exports

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


# the package's names are imported on first access: importing it (as resolving the kind does,
# for its ``plugin`` module) loads neither the engine nor the checks
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
