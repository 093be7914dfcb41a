"""jigs: open coding-agent CLIs for workflow steps, under one policy."""

from __future__ import annotations

import importlib.metadata

from jigs import harnesses
from jigs._types import AgentSessionRef, RunMetadata
from jigs.errors import JigsError

__all__ = ["AgentSessionRef", "JigsError", "RunMetadata", "__version__", "harnesses"]

try:
    __version__ = importlib.metadata.version("jigs-core")
except importlib.metadata.PackageNotFoundError:  # a source tree on sys.path
    __version__ = "unknown"
