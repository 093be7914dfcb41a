"""jigs: open coding-agent CLIs for workflow steps, under one policy."""

from __future__ import annotations

from jigs import harnesses
from jigs._types import AgentSessionRef, RunMetadata
from jigs._version import __version__
from jigs.errors import JigsError

__all__ = ["AgentSessionRef", "JigsError", "RunMetadata", "__version__", "harnesses"]
