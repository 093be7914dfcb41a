"""Fixtures for the model server tests: asyncio through anyio (``model_server`` comes from the
opt-in plugin ``jigs_testing.pytest_plugin``, enabled in ``tests/conftest.py``)."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
