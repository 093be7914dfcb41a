"""The Pi coding agent as a jigs harness kind (``pi``), run with :func:`jigs.steps.run_agent`.

Pi has no model object: ``create_agent_runner`` refuses a Pi descriptor at once
(:class:`~jigs.errors.ModelNotAvailableError`); ``run_agent`` runs ``pi --mode json`` for a whole
turn. Install the CLI with ``jigs install pi``; check it with ``jigs doctor --harness pi``.
"""

from __future__ import annotations

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
