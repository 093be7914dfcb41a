"""The opencode kind's just-in-time check: no opencode project config in the worktree.

``OPENCODE_DISABLE_PROJECT_CONFIG`` keeps the worktree's ``opencode.json`` and ``.opencode`` dirs
out of opencode's main config, but opencode 1.18's second config loader (``v2/Config``, which
loads plugins and skills) walks up from the working directory for ``.opencode``,
``opencode.json`` and ``opencode.jsonc`` without looking at that switch: a ``.opencode/plugins/
x.ts`` in the worktree runs inside opencode. jigs cannot hide a worktree path from the CLI, so a
step on a worktree holding any of them is refused (:class:`~jigs.errors.JitCheckError` naming
each file) until they are removed or moved away.
"""

from __future__ import annotations

import os
from pathlib import Path

from jigs.checks import Check, CheckFailure, CheckOk, CheckResult

__all__ = ["project_config_check"]

_NAMES = ("opencode.json", "opencode.jsonc")
#: Files named in a refusal (a huge .opencode dir is summarised).
_SHOWN = 20


def _directories(cwd: Path) -> list[Path]:
    """``cwd`` and, inside a git repository, its parents up to the repository's root: where
    opencode looks (in the sandbox only the worktree is there; without one, the machine)."""
    walked: list[Path] = []
    for directory in (cwd, *cwd.parents):
        walked.append(directory)
        if (directory / ".git").exists():
            return walked
    return [cwd]


def project_files(cwd: Path) -> list[Path]:
    """The opencode project config files opencode would read from ``cwd``."""
    files: list[Path] = []
    for directory in _directories(cwd):
        files += [directory / name for name in _NAMES if (directory / name).is_file()]
        dot = directory / ".opencode"
        if dot.is_dir() and not dot.is_symlink():
            for root, _dirs, names in os.walk(dot):
                files += [Path(root) / name for name in sorted(names)]
        elif dot.exists():
            files.append(dot)
    return files


def project_config_check(cwd: Path) -> Check:
    async def run() -> CheckResult:
        files = project_files(cwd)
        if not files:
            return CheckOk("no opencode project config in the worktree")
        shown = ", ".join(str(p) for p in files[:_SHOWN])
        more = f" and {len(files) - _SHOWN} more" if len(files) > _SHOWN else ""
        return CheckFailure(
            reason=f"the worktree holds opencode project config that opencode would load "
            f"(plugins, skills, providers) whatever jigs decides: {shown}{more}",
            repair="remove or move these files (or run this step on a worktree without them); "
            "give the step its instructions and MCP servers through the descriptor",
        )

    return Check("harness.opencode-project-config", "opencode project config", run)
