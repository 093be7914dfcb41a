"""The echo harness kind: jigs' own test kind, with a small Python program as its CLI."""

from jigs_harness_echo._harness import EchoDescriptor, EchoHarness

__all__ = ["EchoDescriptor", "EchoHarness"]
