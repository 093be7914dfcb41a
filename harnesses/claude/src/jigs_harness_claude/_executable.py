"""Where the ``claude`` CLI comes from, in a documented order.

1. ``$JIGS_CLAUDE_EXECUTABLE`` (an explicit path; pointing at nothing runnable is an error);
2. ``claude`` on the agent's ``PATH``;
3. the native CLI bundled in the ``claude-agent-sdk`` wheel, a dependency of this distribution,
   so ``pip install jigs-harness-claude`` is enough on a fresh machine. It is located through
   :func:`importlib.util.find_spec` (or the wheel's file list), never by importing
   ``claude_agent_sdk`` (that costs ~1 s).
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Mapping
from pathlib import Path

from jigs.executables import (
    Candidate,
    Resolved,
    find_executable,
    from_env_var,
    on_path,
    wheel_package_dir,
)

__all__ = [
    "ENV_VAR",
    "FIX",
    "MINIMUM_VERSION",
    "TESTED_VERSION",
    "bundled_cli",
    "resolve_executable",
]

#: The variable that names an explicit CLI path.
ENV_VAR = "JIGS_CLAUDE_EXECUTABLE"
#: The oldest CLI jigs accepts (stream-json results with ``structured_output``, ``--session-id``,
#: ``--strict-mcp-config`` and ``--setting-sources``). Only TESTED_VERSION is verified end to end.
MINIMUM_VERSION = (2, 1, 0)
TESTED_VERSION = "2.1.332"
FIX = (
    "Install it with `pip install jigs-harness-claude` (the claude-agent-sdk wheel it depends on "
    f"bundles the CLI), or `npm install -g @anthropic-ai/claude-code@{TESTED_VERSION}`, or point "
    f"${ENV_VAR} at a claude executable"
)


@functools.cache
def bundled_cli() -> Path | None:
    """The CLI inside the installed ``claude-agent-sdk`` wheel, or None when it is absent.

    The wheel's package folder is found with :func:`importlib.util.find_spec` (a top-level name:
    nothing is imported) and used when the wheel's metadata folder sits next to it and the CLI
    is in ``_bundled``; anything else (a zip, another layout) asks the wheel's installed file
    list through :mod:`importlib.metadata`, whose import costs tens of ms in a fresh process.
    """
    found = _bundled_by_spec()
    if found is not None:
        return found

    try:
        files = importlib.metadata.files("claude-agent-sdk")
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files or ():
        if file.name == "claude" and file.parent.name == "_bundled":
            return Path(str(file.locate())).resolve()
    return None


def _bundled_by_spec() -> Path | None:
    folder = wheel_package_dir("claude_agent_sdk", "claude-agent-sdk")
    binary = folder / "_bundled" / "claude" if folder is not None else None
    return binary.resolve() if binary is not None and binary.is_file() else None


def _bundled(env: Mapping[str, str]) -> Path | None:
    return bundled_cli()


CANDIDATES = (
    from_env_var(ENV_VAR),
    on_path("claude"),
    Candidate("the claude-agent-sdk wheel (pip)", _bundled),
)


def resolve_executable(env: Mapping[str, str]) -> Resolved:
    """The CLI to run, and which candidate found it. Raises
    :class:`~jigs.errors.CliNotFoundError` listing every place it looked."""
    return find_executable("claude", CANDIDATES, env, fix=FIX)
