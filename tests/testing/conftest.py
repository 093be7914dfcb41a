"""Fixtures for the model server tests: asyncio through anyio, and ``model_server``."""

from __future__ import annotations

import pytest

# Registered by the jigs pytest11 entry point once jigs-core is installed; imported here too so
# these tests also run from a source checkout.
from jigs_testing.pytest_plugin import model_server

__all__ = ["model_server"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
