"""Entry point module of the ``pi`` kind (``[project.entry-points."jigs.harnesses"] pi``)."""

from collections.abc import Callable
from typing import Any

from jigs.plugin import Harness, hookimpl

from jigs_harness_pi._harness import PiHarness

__all__ = ["jigs_register_harnesses"]


@hookimpl
def jigs_register_harnesses(register: Callable[[Harness[Any]], None]) -> None:
    """Register the Pi harness kind."""
    register(PiHarness())
