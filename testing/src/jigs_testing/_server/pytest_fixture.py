"""The ``model_server`` pytest fixture (registered through :mod:`jigs_testing.pytest_plugin`).

Importing this module is cheap: the server loads when the fixture is first used.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .server import ModelServer

__all__ = ["model_server"]


@pytest.fixture
async def model_server(anyio_backend: object) -> AsyncIterator[ModelServer]:
    """A running :class:`~jigs_testing.ModelServer` with an empty script.

    Add replies with ``model_server.add(text("hi"))``. Needs the anyio pytest plugin: mark the
    test ``@pytest.mark.anyio``. The server stops when the test ends.
    """
    from .server import ModelServer

    del anyio_backend  # requested so that anyio runs this async fixture
    async with ModelServer() as server:
        yield server
