"""Entry point module of the echo kind."""

from collections.abc import Callable

from jigs.plugin import Harness, hookimpl

from jigs_harness_echo._harness import EchoHarness


@hookimpl
def jigs_register_harnesses(register: Callable[[Harness], None]) -> None:
    register(EchoHarness())
