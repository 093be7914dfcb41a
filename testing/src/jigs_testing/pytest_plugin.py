"""pytest plugin for jigs: provides the ``model_server`` fixture (see :mod:`jigs_testing`)."""

from __future__ import annotations

from ._server.pytest_fixture import model_server

__all__ = ["model_server"]
