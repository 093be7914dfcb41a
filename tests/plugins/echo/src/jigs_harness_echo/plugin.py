"""Entry point module of the echo kind."""

from collections.abc import Callable
from typing import Any

from jigs.plugin import Harness, hookimpl

from jigs_harness_echo._harness import EchoHarness


@hookimpl
def jigs_register_harnesses(register: Callable[[Harness[Any]], None]) -> None:
    register(EchoHarness())
