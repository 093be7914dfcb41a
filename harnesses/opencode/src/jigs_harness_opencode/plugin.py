"""Entry point module of the ``opencode`` kind (``[project.entry-points."jigs.harnesses"]``)."""

from collections.abc import Callable
from typing import Any

from jigs.plugin import Harness, hookimpl

from jigs_harness_opencode._harness import OpencodeHarness

__all__ = ["jigs_register_harnesses"]


@hookimpl
def jigs_register_harnesses(register: Callable[[Harness[Any]], None]) -> None:
    """Register the opencode harness kind."""
    register(OpencodeHarness())
