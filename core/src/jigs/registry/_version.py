"""jigs-core's version, read from its distribution's metadata (a module of its own so that
modules ``jigs/__init__`` imports can use it)."""

from __future__ import annotations

import importlib.metadata

__all__ = ["__version__"]

try:
    __version__ = importlib.metadata.version("jigs-core")
except importlib.metadata.PackageNotFoundError:  # a source tree on sys.path
    __version__ = "unknown"
