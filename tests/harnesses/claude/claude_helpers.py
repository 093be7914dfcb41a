"""Helpers shared by the claude kind's tests."""

from __future__ import annotations

from jigs import harnesses
from jigs.descriptors import HarnessDescriptor
from jigs_testing import ModelServer

KEY_ENV = "JIGS_TEST_ANTHROPIC_KEY"
AGENTS_ENV = ["IS_SANDBOX"]


def descriptor_for(server: ModelServer, **settings: object) -> HarnessDescriptor:
    """A claude descriptor whose endpoint is ``server``, keyed by the dummy ``KEY_ENV``."""
    return harnesses.claude(base_url=server.anthropic_base_url, api_key_env=KEY_ENV, **settings)
