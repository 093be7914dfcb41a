"""A pristine home to copy from, so a fresh ``CODEX_HOME`` starts fast.

On a fresh home Codex spends about 150 ms creating and migrating its SQLite databases and
unpacking its system skills, on every invocation. jigs does that once per Codex binary: it starts
``codex app-server`` on an empty home, answers ``initialize``, lets it exit, checkpoints the
databases and keeps the result (no thread, no login, no config) under
``installed_dir("codex")/home-seeds/<binary key>``. Each private home is then seeded by copying.

Codex makes one more database, its thread history (``thread_history_1.sqlite``), at a home's
first turn: ~7 ms of every step's turn. So jigs also runs ``codex app-server`` once on a scratch
home, starts a throwaway thread there, gives it one history item (``thread/inject_items``: no
model call) and deletes it (``thread/delete``), all through Codex's own protocol, and moves only
that database, checked migrated and empty, into the seed: nothing else of the scratch home (its
state, logs, markers) reaches it. If that fails in any way, the seed goes without it.

The seed is an optimisation only: if it cannot be built, the home starts empty and Codex builds
its state itself. It is keyed by the binary's path, size and mtime, so another Codex version never
reads a seed it did not write, and it is published atomically (a complete marker, then a rename).

Copying the seed still costs a step 10-30 ms, so the copy for the *next* step is made ahead, off
the step's path: while a step's app server starts, :func:`prepare_spare` copies the seed into
``<seed>.spares/building-*`` on a thread and publishes it as ``ready-*`` by a rename;
:func:`claim_spare` moves one ready copy into a new home with one ``rename`` (atomic: two steps
never get the same copy; a copy is never shared, only pristine seed state, no config, login or
session). Without a ready spare (the first step of a process, a different filesystem) the home
is copied as before.

Codex's system skills (``skills/.system``, ~70 files unpacked once into the seed) are not
copied: a home's ``skills/.system`` is a symlink to the seed's, which the step's sandbox shows
read-only (:func:`system_skills`). Codex finds its marker there and reads them as from a copy
(the model's request lists the same skills); the step can change none of them. Copying them and
deleting them again cost each step ~7.5 ms of the worker's CPU and disk work, more than
the rest of the home (issue 35: four concurrent Codex steps were 1.34x four ``codex exec``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import stat
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
from jigs import processes
from jigs.executables import build_key, installed_dir
from jigs.plugin.tools import make_dir, remove_tree

from jigs_harness_codex._rpc import AppServer, NotHandled

__all__ = [
    "claim_spare",
    "copy_seed",
    "ensure_seed",
    "prepare_spare",
    "seed_path",
    "system_skills",
]

_MARKER = ".jigs-seed-complete"
_SKIP = frozenset({_MARKER, "config.toml", "auth.json", "sessions", "tmp", "thread-writer-locks"})
#: Codex's thread history database, which it makes at a home's first turn (in the seed).
_HISTORY_DB = "thread_history_1.sqlite"
#: Sends one request to the seed's app server and returns its result.
_Call = Callable[[str, Any], Awaitable[Any]]
#: Bumped when what a seed holds changes, so a seed of an older jigs is built again.
_FORMAT = 3
#: The one history item the throwaway thread gets (a user message: never sent to a model).
_SEED_ITEM = {
    "type": "message",
    "role": "user",
    "content": [{"type": "input_text", "text": "jigs home seed"}],
}
_SEED_CONFIG = (
    "check_for_update_on_startup = false\n"
    "allow_login_shell = false\n"
    "[analytics]\nenabled = false\n"
    "[features]\nplugins = false\n"
)
#: Binaries whose seed could not be built in this process (not retried: each try costs time).
_FAILED: set[Path] = set()
#: Ready spare copies kept per seed (one step at a time needs one; more would only cost disk).
SPARES = 2
#: A ``building-*`` spare older than this (seconds) was left by a process that died: removed.
_STALE = 600.0
#: Seeds a spare is being copied for in this process (one copy at a time per seed).
_BUILDING: set[Path] = set()
_BUILDING_LOCK = threading.Lock()


def seed_path(executable: Path) -> Path:
    """Where the seed of this binary lives."""
    return installed_dir("codex") / "home-seeds" / build_key(executable, f"codex-seed-{_FORMAT}")


def _checkpoint(directory: Path) -> None:
    for database in directory.glob("*.sqlite"):
        connection = sqlite3.connect(database)
        try:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            connection.close()
    for leftover in [*directory.glob("*.sqlite-wal"), *directory.glob("*.sqlite-shm")]:
        leftover.unlink(missing_ok=True)


class _NoHistory(RuntimeError):
    """The throwaway thread did not give a clean, migrated, empty thread history database."""


async def _run_server(
    executable: Path,
    env: Mapping[str, str],
    home: Path,
    cwd: Path,
    *,
    log: Any,
    steps: Callable[[_Call], Awaitable[None]] | None = None,
) -> None:
    """Run ``codex app-server`` on ``home``: ``initialize``, then (with ``steps``) the
    ``initialized`` notification and ``steps(call)``, then the end of input, and wait for its
    clean exit. The conversation is the kind's own :class:`~jigs_harness_codex._rpc.AppServer`
    (a server request gets "not handled"). Raises what it raises (a refused request, a crash,
    a line that is not JSON), ``RuntimeError`` for an unclean exit, or what the launch raises.
    The caller bounds it in time."""

    async def not_handled(method: str, params: Any) -> Any:
        raise NotHandled(f"the seed's server asked {method}")

    process = await processes.launch(
        [str(executable), "app-server"],
        cwd=cwd,
        env={**env, "CODEX_HOME": str(home)},
        stdin="pipe",
        owner="codex home seed",
    )
    async with process:
        server = AppServer(process, on_request=not_handled, log=log)
        await server.request("initialize", {"clientInfo": {"name": "jigs", "version": "seed"}})
        if steps is not None:
            await server.send({"method": "initialized"})
            await steps(server.request)
        assert process.stdin is not None
        await process.stdin.aclose()  # Codex exits at end of input
        if await process.wait() != 0:
            raise RuntimeError("codex app-server did not exit cleanly")


def _throwaway_thread(cwd: Path) -> Callable[[_Call], Awaitable[None]]:
    """Steps that start a thread in ``cwd``, give it one history item (``thread/inject_items``:
    no model call) and delete it: Codex makes and migrates its thread history database on the
    way."""

    async def steps(call: _Call) -> None:
        options = {"cwd": str(cwd), "approvalPolicy": "never", "sandbox": "read-only"}
        thread = (await call("thread/start", options))["thread"]["id"]
        await call("thread/inject_items", {"threadId": thread, "items": [_SEED_ITEM]})
        await call("thread/delete", {"threadId": thread})

    return steps


def _empty_history(database: Path) -> None:
    """Raise :class:`_NoHistory` unless ``database`` is a migrated thread history database
    with no row in any of its tables."""
    if not database.is_file():
        raise _NoHistory("no thread history database was made")
    try:
        connection = sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise _NoHistory(f"{database.name} cannot be opened: {exc}") from None
    try:
        names = [
            name
            for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        if "_sqlx_migrations" not in names:
            raise _NoHistory(f"{database.name} is not migrated")
        for name in names:
            if name.startswith(("_", "sqlite_")):
                continue
            quoted = name.replace('"', '""')
            (rows,) = connection.execute(f'SELECT count(*) FROM "{quoted}"').fetchone()
            if rows:
                raise _NoHistory(f"{database.name} still holds {rows} row(s) in {name}")
    except sqlite3.Error as exc:
        raise _NoHistory(f"{database.name} cannot be checked: {exc}") from None
    finally:
        connection.close()


async def _history(
    executable: Path, env: Mapping[str, str], work: Path, timeout: float, log: Any
) -> None:
    """Put a migrated, empty thread history database into the seed being built in ``work``.
    It is made in a scratch home of its own (a throwaway thread, started, given one item and
    deleted), and only that database, checked empty, is taken: nothing else of that home (its
    state, logs, markers) reaches the seed. Never raises: any failure is logged and the seed is
    built without it."""
    if timeout <= 0:
        log.info("codex.home_seed.history_skipped", error="no time left")
        return
    scratch = make_dir("jigs-codex-seed-history-")
    try:
        home, cwd = scratch / "home", scratch / "cwd"
        home.mkdir()
        cwd.mkdir()
        (home / "config.toml").write_text(_SEED_CONFIG, encoding="utf-8")
        with anyio.fail_after(timeout):
            await _run_server(executable, env, home, cwd, log=log, steps=_throwaway_thread(cwd))
        _checkpoint(home)
        database = home / _HISTORY_DB
        _empty_history(database)
        _checkpoint(home)  # what the check's reading made
        os.replace(database, work / _HISTORY_DB)
    except Exception as exc:  # an optimisation of an optimisation: the seed goes on without it
        log.info("codex.home_seed.history_skipped", error=f"{type(exc).__name__}: {exc}")
    finally:
        remove_tree(scratch)


async def ensure_seed(
    executable: Path, env: Mapping[str, str], log: Any, *, timeout: float = 5.0
) -> Path | None:
    """The seed of ``executable``, built now (within ``timeout`` seconds in all, under ``env``:
    the step's environment without its credentials) if missing; None when it cannot be had. A
    binary whose seed failed is not tried again by this process."""
    final: Path | None = None
    try:
        final = seed_path(executable)
        if (final / _MARKER).is_file():
            return final
        if final in _FAILED:
            return None
        final.parent.mkdir(parents=True, exist_ok=True)
        work = make_dir("building-", final.parent)
        try:
            (work / "config.toml").write_text(_SEED_CONFIG, encoding="utf-8")
            started = anyio.current_time()
            with anyio.fail_after(timeout):
                await _run_server(executable, env, work, work, log=log)
            _checkpoint(work)
            # the rest of the budget, for the thread history (an extra, skipped on its own)
            await _history(executable, env, work, timeout - (anyio.current_time() - started), log)
            for name in _SKIP:
                path = work / name
                if path.is_dir():
                    remove_tree(path)
                elif name != _MARKER:
                    path.unlink(missing_ok=True)
            (work / _MARKER).write_text(str(executable), encoding="utf-8")
            with contextlib.suppress(OSError):  # another process published it first
                work.rename(final)
        finally:
            remove_tree(work)
        if (final / _MARKER).is_file():
            log.info("codex.home_seed.built", seed=str(final))
            return final
    except Exception as exc:  # an optimisation must never fail the step
        log.warning("codex.home_seed.unavailable", error=f"{type(exc).__name__}: {exc}")
    if final is not None:
        _FAILED.add(final)
    return None


def system_skills(seed: Path) -> Path:
    """The seed's system skills, which every home seeded from it links to (read-only)."""
    return seed / "skills" / ".system"


def copy_seed(seed: Path, home: Path) -> None:
    """Copy the seed's state into a fresh home (never its marker, config or login): contents,
    and the mode only of an executable file, the rest with the home's own modes and times.
    Copying every file's metadata (``copy2``) doubled the copy's CPU, and Codex reads neither.
    Symlinks inside the seed's folders stay links (as Codex wrote them); a top-level entry is
    copied as what it points to. ``skills/.system`` is linked to the seed's, not copied."""
    for entry in seed.iterdir():
        if entry.name in _SKIP:
            continue
        if entry.is_dir():
            shutil.copytree(
                entry,
                home / entry.name,
                symlinks=True,
                copy_function=_copy_file,
                ignore=_system_skills_of(seed),
            )
        else:
            _copy_file(entry, home / entry.name)
    if system_skills(seed).is_dir():
        (home / "skills").mkdir(exist_ok=True)
        (home / "skills" / ".system").symlink_to(system_skills(seed), target_is_directory=True)


def _system_skills_of(seed: Path) -> Callable[[str, list[str]], set[str]]:
    skills = str(seed / "skills")
    return lambda directory, names: {".system"} if directory == skills else set()


def _copy_file(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    shutil.copyfile(source, target)
    mode = os.stat(source).st_mode
    if mode & 0o111:  # a script Codex may run: keep it executable
        os.chmod(target, stat.S_IMODE(mode))


def _spares(seed: Path) -> Path:
    return seed.with_name(seed.name + ".spares")


def claim_spare(seed: Path, home: Path) -> bool:
    """Move a ready copy of ``seed`` onto ``home`` (an empty directory, replaced by the rename).
    False when there is none (or it cannot be moved there); never raises."""
    try:
        ready = sorted(_spares(seed).glob("ready-*"))
    except OSError:
        return False
    for spare in ready:
        try:
            spare.rename(home)
        except FileNotFoundError:
            continue  # another step took it
        except OSError:
            return False  # another filesystem, or ``home`` is not empty: copy instead
        return True
    return False


def _build_spare(seed: Path, log: Any) -> None:
    spares = _spares(seed)
    try:
        spares.mkdir(exist_ok=True)
        now = time.time()
        for entry in spares.iterdir():
            # a copy a process that died left (or a trash of an older jigs)
            left = entry.name.startswith(("building-", "trash-"))
            if left and now - entry.stat().st_mtime > _STALE:
                shutil.rmtree(entry, ignore_errors=True)
        if len(list(spares.glob("ready-*"))) >= SPARES:
            return
        work = make_dir("building-", spares)
        try:
            copy_seed(seed, work)
            work.rename(spares / ("ready-" + work.name.removeprefix("building-")))
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    except Exception as exc:  # an optimisation: the next step copies the seed itself
        log.info("codex.home_spare.failed", error=f"{type(exc).__name__}: {exc}")
    finally:
        with _BUILDING_LOCK:
            _BUILDING.discard(seed)


def prepare_spare(seed: Path, log: Any) -> None:
    """Copy ``seed`` for a later step on a thread of its own, unless a copy is under way or
    :data:`SPARES` are ready. Returns at once; never raises. The thread is not a daemon: the
    interpreter lets it finish its copy (tens of milliseconds) before it exits."""
    with _BUILDING_LOCK:
        if seed in _BUILDING:
            return
        _BUILDING.add(seed)
    try:
        threading.Thread(
            target=_build_spare, args=(seed, log), name="jigs-codex-spare-home"
        ).start()
    except RuntimeError:  # interpreter shutting down, or no thread to be had
        with _BUILDING_LOCK:
            _BUILDING.discard(seed)
