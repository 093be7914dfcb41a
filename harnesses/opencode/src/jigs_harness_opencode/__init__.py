"""opencode as a jigs harness kind (``opencode``), run with :func:`jigs.steps.run_agent`.

opencode has no model object: ``create_agent_runner`` refuses an opencode descriptor at once
(:class:`~jigs.errors.ModelNotAvailableError`); ``run_agent`` runs ``opencode run --format json``
for a whole turn. Install the CLI with ``jigs install opencode``; check it with
``jigs doctor --harness opencode``.
"""

from __future__ import annotations

from jigs_harness_opencode._descriptor import OpencodeDescriptor
from jigs_harness_opencode._executable import (
    MIN_VERSION,
    OPENCODE_PACKAGE,
    OPENCODE_VERSION,
    resolve_opencode,
)
from jigs_harness_opencode._harness import OpencodeHarness

__all__ = [
    "MIN_VERSION",
    "OPENCODE_PACKAGE",
    "OPENCODE_VERSION",
    "OpencodeDescriptor",
    "OpencodeHarness",
    "resolve_opencode",
]
