"""Entry point module of the codex kind (``jigs.harnesses: codex``)."""

from collections.abc import Callable
from typing import Any

from jigs.plugin import Harness, hookimpl

from jigs_harness_codex._harness import CodexHarness

__all__ = ["jigs_register_harnesses"]


@hookimpl
def jigs_register_harnesses(register: Callable[[Harness[Any]], None]) -> None:
    register(CodexHarness())
