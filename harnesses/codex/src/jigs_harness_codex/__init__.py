"""Codex as a jigs harness kind: a private CODEX_HOME per invocation, its own app server, and
threads a later step of the same run can resume.

``pip install jigs-harness-codex`` is all a user needs: the native Codex binary arrives with the
pinned ``openai-codex-cli-bin`` wheel. Build descriptors with ``jigs.harnesses.codex(...)`` or
:class:`CodexDescriptor`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    """The public names, imported on first access: importing the package (as resolving the kind
    does, for its ``plugin`` module) loads neither the engine nor the checks."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
