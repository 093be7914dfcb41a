"""Finding a harness CLI and its version, in a documented order, for every kind.

A kind lists candidates in order (an explicit env var, ``PATH``, a pip-installed copy, a copy that
``jigs install`` put in the data dir); :func:`find_executable` returns the first that exists and is
executable, or raises :class:`~jigs.errors.CliNotFoundError` listing every place it looked.
:func:`version_check` builds the installation check ``jigs doctor`` shows.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from shutil import which

import anyio

from jigs.checks import Check, CheckFailure, CheckOk, CheckResult
from jigs.errors import CliCommandError, CliNotFoundError
from jigs.policy._paths import data_dir
from jigs.policy._redact import redact_known, secret_values

__all__ = [
    "Candidate",
    "Resolved",
    "build_key",
    "cli_version",
    "find_executable",
    "from_env_var",
    "installed_dir",
    "on_path",
    "parse_version",
    "version_check",
    "wheel_package_dir",
    "which",
]


def build_key(executable: Path, salt: str = "") -> str:
    """A name for what a kind keeps per build of ``executable`` (a home seed, a cache): from its
    real path, size and modification time, and ``salt`` (bump it when what is kept changes).
    Another build, or another format, gets another name. Raises :class:`OSError` when the
    executable cannot be stat'ed."""
    real = executable.resolve()
    stat = real.stat()
    data = f"{salt}:{real}:{stat.st_size}:{stat.st_mtime_ns}".encode("utf-8", "surrogateescape")
    return hashlib.sha256(data).hexdigest()[:16]


def wheel_package_dir(package: str, distribution: str) -> Path | None:
    """The folder of top-level ``package`` when the wheel ``distribution`` installed it: found
    with :func:`importlib.util.find_spec` (nothing is imported) and trusted only when the
    distribution's ``.dist-info`` folder sits next to it. None for anything else (not installed,
    a namespace package, a zip, another layout): a caller then asks the wheel's file list through
    :mod:`importlib.metadata`, whose import costs tens of ms in a fresh process."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    if len(folders) != 1:
        return None
    folder = Path(folders[0])
    return folder if _has_dist_info(str(folder.parent), distribution) else None


#: (site dir, its mtime, distribution) -> whether its ``.dist-info`` is there: the listing of a
#: site dir (hundreds of entries) is read again only once an install or removal changed it.
_DIST_INFO: dict[tuple[str, int, str], bool] = {}


def _has_dist_info(site: str, distribution: str) -> bool:
    try:
        key = (site, os.stat(site).st_mtime_ns, distribution)
    except OSError:
        return False
    found = _DIST_INFO.get(key)
    if found is None:
        try:
            siblings = os.listdir(site)
        except OSError:
            return False
        prefix = distribution.replace("-", "_").lower() + "-"
        found = any(n.lower().startswith(prefix) and n.endswith(".dist-info") for n in siblings)
        _DIST_INFO[key] = found
    return found


@dataclass(frozen=True)
class Resolved:
    """An executable and which candidate found it (shown by ``jigs doctor``)."""

    path: Path
    source: str


@dataclass(frozen=True)
class Candidate:
    """One place to look: a description and a function that returns a path or None."""

    where: str
    find: Callable[[Mapping[str, str]], Path | None]


def _runnable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def from_env_var(name: str) -> Candidate:
    """The path in ``$name`` (an explicit setting wins over everything)."""

    def find(env: Mapping[str, str]) -> Path | None:
        value = env.get(name) or os.environ.get(name)
        return Path(value) if value else None

    return Candidate(f"${name}", find)


def on_path(name: str) -> Candidate:
    """``name`` on the agent's ``PATH``."""

    def find(env: Mapping[str, str]) -> Path | None:
        found = which(name, path=env.get("PATH", os.environ.get("PATH", "")))
        return Path(found) if found else None

    return Candidate(f"{name} on PATH", find)


def installed_dir(kind: str) -> Path:
    """Where ``jigs install <kind>`` puts the kind's CLI: ``$JIGS_CLI_DIR/<kind>``, by default
    ``<jigs data dir>/clis/<kind>``."""
    base = os.environ.get("JIGS_CLI_DIR")
    return (Path(base) if base else data_dir() / "clis") / kind


def find_executable(
    kind: str, candidates: Sequence[Candidate], env: Mapping[str, str], *, fix: str
) -> Resolved:
    """The first candidate that is an executable file. An explicit env var that points at
    nothing runnable is an error, not a fall-through."""
    tried: list[str] = []
    for candidate in candidates:
        path = candidate.find(env)
        if path is None:
            tried.append(f"{candidate.where}: not found")
            continue
        if _runnable(path):
            return Resolved(path, candidate.where)
        tried.append(f"{candidate.where}: {path} is not an executable file")
        if candidate.where.startswith("$"):
            break
    raise CliNotFoundError(kind, tried, fix)


_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> tuple[int, int, int] | None:
    """The first ``X.Y[.Z]`` in ``text`` ("2.1.332 (Claude Code)", "codex-cli 0.171.0")."""
    match = _VERSION.search(text)
    if match is None:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


async def cli_version(
    path: Path, env: Mapping[str, str], *, args: Sequence[str] = ("--version",), timeout: float = 12
) -> str:
    """What ``<path> --version`` prints, run under ``env`` with stdin closed.

    Raises :class:`~jigs.errors.CliCommandError` (a ``RuntimeError``) when it exits non-zero,
    with the end of its redacted stderr; ``OSError`` when it cannot be started."""
    with anyio.fail_after(timeout):
        result = await anyio.run_process(
            [str(path), *args],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            check=False,
        )

    # redacted before any cut, so no secret is shown in part (the env's secret values included)
    secrets = secret_values(env)
    out = redact_known((result.stdout or b"").decode(errors="replace"), secrets).strip()
    err = redact_known((result.stderr or b"").decode(errors="replace"), secrets).strip()
    if result.returncode != 0:
        command = f"{path} {' '.join(args)}"
        raise CliCommandError(
            f"{command} exited with {result.returncode}: {err[-300:]}",
            command=command,
            returncode=result.returncode,
        )
    return out or err


def version_check(
    kind: str,
    label: str,
    resolve: Callable[[Mapping[str, str]], Resolved],
    env: Mapping[str, str],
    *,
    minimum: tuple[int, int, int] | None,
    fix: str,
) -> Check:
    """The ``harness.<kind>-cli`` check: found, runs, and at least ``minimum``."""

    async def run() -> CheckResult:
        try:
            resolved = resolve(env)
        except CliNotFoundError as exc:
            return CheckFailure(reason=str(exc).split(". ", 1)[0], repair=fix)
        try:
            text = await cli_version(resolved.path, env)
        except (OSError, RuntimeError) as exc:
            return CheckFailure(reason=f"{resolved.path} does not run: {exc}", repair=fix)
        version = parse_version(text)
        if version is None:
            return CheckFailure(
                reason=f"{resolved.path} --version printed no version: {text[:100]!r}", repair=fix
            )
        shown = ".".join(map(str, version))
        if minimum is not None and version < minimum:
            need = ".".join(map(str, minimum))
            return CheckFailure(
                reason=f"{resolved.path} is version {shown}; jigs needs at least {need}",
                repair=fix,
            )
        return CheckOk(f"{resolved.path} ({resolved.source}), version {shown}")

    return Check(f"harness.{kind}-cli", label, run)
