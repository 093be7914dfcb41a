"""Claude Code as a jigs harness kind.

``pip install jigs-harness-claude`` registers the kind ``claude``::

    from jigs import harnesses
    builder = harnesses.claude(model="sonnet")                       # the operator's login
    local = harnesses.claude(base_url="http://127.0.0.1:8080", api_key_env="GATEWAY_KEY")

Provider options a step may pass (``provider_options={"claude": {...}}``): ``on_event`` (called
with every :mod:`jigs.events` event). The step's tool gate (``approve_tool``, a step option of
:mod:`jigs.steps`) sees every tool call before it runs (a PreToolUse hook).
"""

from __future__ import annotations

from jigs_harness_claude._descriptor import ClaudeDescriptor, Effort
from jigs_harness_claude._events import ClaudeDecoder
from jigs_harness_claude._executable import (
    ENV_VAR,
    MINIMUM_VERSION,
    TESTED_VERSION,
    bundled_cli,
    resolve_executable,
)
from jigs_harness_claude._harness import ClaudeHarness
from jigs_harness_claude._sessions import transcript_path

__all__ = [
    "ENV_VAR",
    "MINIMUM_VERSION",
    "TESTED_VERSION",
    "ClaudeDecoder",
    "ClaudeDescriptor",
    "ClaudeHarness",
    "Effort",
    "bundled_cli",
    "resolve_executable",
    "transcript_path",
]
