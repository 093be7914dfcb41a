"""Codex as a jigs harness kind: a private CODEX_HOME per invocation, its own app server, and
threads a later step of the same run can resume.

``pip install jigs-harness-codex`` is all a user needs: the native Codex binary arrives with the
pinned ``openai-codex-cli-bin`` wheel. Build descriptors with ``jigs.harnesses.codex(...)`` or
:class:`CodexDescriptor`.
"""

from __future__ import annotations

from jigs_harness_codex._descriptor import CodexDescriptor
from jigs_harness_codex._harness import CodexHarness
from jigs_harness_codex._rpc import AppServerRpcError
from jigs_harness_codex._version import __version__

__all__ = [
    "AppServerRpcError",
    "CodexDescriptor",
    "CodexHarness",
    "__version__",
]
