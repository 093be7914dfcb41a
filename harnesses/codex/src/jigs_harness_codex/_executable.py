"""Finding the Codex CLI, in this order (``jigs doctor`` shows which one won):

1. ``$JIGS_CODEX_EXECUTABLE`` (an explicit setting; pointing at nothing runnable is an error);
2. ``codex`` on the agent's ``PATH``;
3. the native binary of the pinned runtime wheel ``openai-codex-cli-bin`` (a dependency of this
   distribution), located without importing it (see :func:`wheel_binary`);
4. a copy ``jigs install codex`` put in jigs' data dir.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from pathlib import Path

from jigs.executables import (
    Candidate,
    Resolved,
    find_executable,
    from_env_var,
    installed_dir,
    on_path,
    wheel_package_dir,
)

__all__ = [
    "ENV_VAR",
    "MINIMUM_VERSION",
    "RUNTIME_WHEEL",
    "RUNTIME_WHEEL_VERSION",
    "fix_hint",
    "resolve_executable",
    "wheel_binary",
]

ENV_VAR = "JIGS_CODEX_EXECUTABLE"
RUNTIME_WHEEL = "openai-codex-cli-bin"
#: The wheel version this distribution pins (and whose app-server protocol jigs was tested on).
RUNTIME_WHEEL_VERSION = "0.163.0"
#: The oldest Codex whose app server speaks the methods jigs uses.
MINIMUM_VERSION = (0, 163, 0)
_WHEEL_PACKAGE = "codex_cli_bin"
_WHEEL_ENTRIES = ("codex_cli_bin/bin/codex", "codex_cli_bin/bin/codex.exe")


def fix_hint() -> str:
    """How to get a Codex CLI jigs can use."""
    return (
        f"reinstall the harness (pip install --force-reinstall jigs-harness-codex, which brings "
        f"{RUNTIME_WHEEL}=={RUNTIME_WHEEL_VERSION}), put `codex` on PATH, or set {ENV_VAR} to "
        f"the codex binary"
    )


def wheel_binary() -> Path | None:
    """The codex binary of the installed runtime wheel, or None when it is not installed.

    The wheel's package folder is found with :func:`importlib.util.find_spec` (a top-level name:
    nothing is imported) and used when the wheel's own metadata folder sits next to it and the
    binary is there; anything else (no such folder, a zip, another layout) asks the wheel's
    installed file list through :mod:`importlib.metadata`, whose import costs tens of ms in a
    fresh process.
    """
    found = _wheel_binary_by_spec()
    if found is not None:
        return found

    try:
        files = importlib.metadata.files(RUNTIME_WHEEL)
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files or ():
        if file.as_posix() in _WHEEL_ENTRIES:
            return Path(str(file.locate())).resolve()
    return None


def _wheel_binary_by_spec() -> Path | None:
    package = wheel_package_dir(_WHEEL_PACKAGE, RUNTIME_WHEEL)
    if package is None:
        return None
    for entry in _WHEEL_ENTRIES:
        binary = package.parent / entry
        if binary.is_file():
            return binary.resolve()
    return None


def _from_wheel(env: Mapping[str, str]) -> Path | None:
    return wheel_binary()


def _from_install_dir(env: Mapping[str, str]) -> Path | None:
    path = installed_dir("codex") / "node_modules" / ".bin" / "codex"
    return path if path.exists() else None


CANDIDATES: tuple[Candidate, ...] = (
    from_env_var(ENV_VAR),
    on_path("codex"),
    Candidate(f"the {RUNTIME_WHEEL} wheel", _from_wheel),
    Candidate("jigs install codex", _from_install_dir),
)


def resolve_executable(env: Mapping[str, str]) -> Resolved:
    """The Codex CLI to run, or :class:`~jigs.errors.CliNotFoundError` listing every place."""
    return find_executable("codex", CANDIDATES, env, fix=fix_hint())
