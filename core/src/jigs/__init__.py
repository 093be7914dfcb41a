"""jigs: open coding-agent CLIs for workflow steps, under one policy."""

from __future__ import annotations

from jigs import harnesses
from jigs.engine._types import AgentSessionRef, RunMetadata
from jigs.errors import JigsError
from jigs.registry._version import __version__

__all__ = ["AgentSessionRef", "JigsError", "RunMetadata", "__version__", "harnesses"]
