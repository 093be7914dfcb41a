"""A pristine home to copy from, so a fresh ``CODEX_HOME`` starts fast.

On a fresh home Codex spends about 150 ms creating and migrating its SQLite databases and
unpacking its system skills, on every invocation. jigs does that once per Codex binary: it starts
``codex app-server`` on an empty home, answers ``initialize``, lets it exit, checkpoints the
databases and keeps the result (no thread, no login, no config) under
``installed_dir("codex")/home-seeds/<binary key>``. Each private home is then seeded by copying.

The seed is an optimisation only: if it cannot be built, the home starts empty and Codex builds
its state itself. It is keyed by the binary's path, size and mtime, so another Codex version never
reads a seed it did not write, and it is published atomically (a complete marker, then a rename).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jigs.executables import installed_dir

__all__ = ["copy_seed", "ensure_seed", "seed_path"]

_MARKER = ".jigs-seed-complete"
_SKIP = frozenset({_MARKER, "config.toml", "auth.json", "sessions", "tmp", "thread-writer-locks"})
_SEED_CONFIG = (
    "check_for_update_on_startup = false\n"
    "allow_login_shell = false\n"
    "[analytics]\nenabled = false\n"
    "[features]\nplugins = false\n"
)
#: Binaries whose seed could not be built in this process (not retried: each try costs time).
_FAILED: set[Path] = set()


def seed_path(executable: Path) -> Path:
    """Where the seed of this binary lives."""
    real = executable.resolve()
    stat = real.stat()
    key = hashlib.sha256(f"{real}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    return installed_dir("codex") / "home-seeds" / key


def _checkpoint(directory: Path) -> None:
    import sqlite3

    for database in directory.glob("*.sqlite"):
        connection = sqlite3.connect(database)
        try:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            connection.close()
    for leftover in [*directory.glob("*.sqlite-wal"), *directory.glob("*.sqlite-shm")]:
        leftover.unlink(missing_ok=True)


async def _build(executable: Path, env: Mapping[str, str], target: Path, timeout: float) -> None:
    import anyio  # here, not at module level: resolving the kind imports this module
    from jigs.processes import launch

    process = await launch(
        [str(executable), "app-server"],
        cwd=target,
        env={**env, "CODEX_HOME": str(target)},
        stdin="pipe",
        owner="codex home seed",
    )
    async with process:
        assert process.stdin is not None
        init = {
            "id": 1,
            "method": "initialize",
            "params": {"clientInfo": {"name": "jigs", "version": "seed"}},
        }
        with anyio.fail_after(timeout):
            await process.stdin.send((json.dumps(init) + "\n").encode())
            line = await process.read_line()
            if not line or b'"result"' not in line:
                raise RuntimeError("codex app-server did not initialize")
            await process.stdin.aclose()  # Codex exits at end of input
            if await process.wait() != 0:
                raise RuntimeError("codex app-server did not exit cleanly")


async def ensure_seed(
    executable: Path, env: Mapping[str, str], log: Any, *, timeout: float = 5.0
) -> Path | None:
    """The seed of ``executable``, built now (within ``timeout`` seconds, under ``env``: the
    step's environment without its credentials) if missing; None when it cannot be had. A
    binary whose seed failed is not tried again by this process."""
    final: Path | None = None
    try:
        final = seed_path(executable)
        if (final / _MARKER).is_file():
            return final
        if final in _FAILED:
            return None
        final.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="building-", dir=final.parent))
        try:
            (work / "config.toml").write_text(_SEED_CONFIG, encoding="utf-8")
            await _build(executable, env, work, timeout)
            _checkpoint(work)
            for name in _SKIP:
                path = work / name
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                elif name != _MARKER:
                    path.unlink(missing_ok=True)
            (work / _MARKER).write_text(str(executable), encoding="utf-8")
            with contextlib.suppress(OSError):  # another process published it first
                work.rename(final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if (final / _MARKER).is_file():
            log.info("codex.home_seed.built", seed=str(final))
            return final
    except Exception as exc:  # an optimisation must never fail the step
        log.warning("codex.home_seed.unavailable", error=f"{type(exc).__name__}: {exc}")
    if final is not None:
        _FAILED.add(final)
    return None


def copy_seed(seed: Path, home: Path) -> None:
    """Copy the seed's state into a fresh home (never its marker, config or login)."""
    for entry in seed.iterdir():
        if entry.name in _SKIP:
            continue
        if entry.is_dir():
            shutil.copytree(entry, home / entry.name, symlinks=True)
        else:
            shutil.copy2(entry, home / entry.name)
