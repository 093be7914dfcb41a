"""The jigs-testing pytest plugin: the ``model_server`` fixture (see :mod:`jigs_testing`).

Opt-in: installing jigs-testing registers nothing with pytest. Enable it in your ``conftest.py``::

    pytest_plugins = ["jigs_testing.pytest_plugin"]

The fixture is async: the tests that use it need the anyio pytest plugin (``@pytest.mark.anyio``
and an ``anyio_backend`` fixture).
"""

from __future__ import annotations

from ._server.pytest_fixture import model_server

__all__ = ["model_server"]
