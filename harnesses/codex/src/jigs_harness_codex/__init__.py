"""Codex as a jigs harness kind: a private CODEX_HOME per invocation, its own app server, and
threads a later step of the same run can resume.

``pip install jigs-harness-codex`` is all a user needs: the native Codex binary arrives with the
pinned ``openai-codex-cli-bin`` wheel. Build descriptors with ``jigs.harnesses.codex(...)`` or
:class:`CodexDescriptor`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jigs._lazy import lazy_exports

from jigs_harness_codex._version import __version__

if TYPE_CHECKING:
    from jigs_harness_codex._descriptor import CodexDescriptor
    from jigs_harness_codex._harness import CodexHarness
    from jigs_harness_codex._rpc import AppServerRpcError

__all__ = [
    "AppServerRpcError",
    "CodexDescriptor",
    "CodexHarness",
    "__version__",
]

#: Each public name and the module it lives in.
_EXPORTS: dict[str, str] = {
    "CodexDescriptor": "jigs_harness_codex._descriptor",
    "CodexHarness": "jigs_harness_codex._harness",
    "AppServerRpcError": "jigs_harness_codex._rpc",
}


# the package's names are imported on first access: importing it (as resolving the kind does,
# for its ``plugin`` module) loads neither the engine nor the checks
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
