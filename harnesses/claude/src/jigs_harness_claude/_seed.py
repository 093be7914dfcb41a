"""A reused Claude Code config file (``.claude.json``) for sandboxed steps.

Claude Code keeps its global state in ``~/.claude.json`` (``$CLAUDE_CONFIG_DIR/.claude.json``
when that is set). A user's reused home has it; a sandboxed step's ``HOME`` is an empty tmpfs,
and on a missing file Claude Code runs its first-start work on every turn (its config
migrations, registering its built-in plugins, a backup, rewriting the file), which cost a turn
about 10 ms of CPU (measured with the same binary and turn, a fresh home against a reused one).

So jigs makes that file once per binary, the way Claude Code makes it itself: it runs the binary
once (``claude -p``) in a scratch home, in a sandbox with no network, against a loopback port
nobody listens on (the turn fails at its first model request: no model is called), and keeps
the ``.claude.json`` it wrote, under ``installed_dir("claude")/home-seeds/``, keyed by the
binary's path, size and mtime (another version never reads a file it did not write) and a
format number. Nothing of the operator's or of any step reaches it, and the keys that would
configure a step (``projects``, ``mcpServers``) are dropped. Each sandboxed step gets a copy in
its private dir, linked at the place Claude Code reads (:meth:`jigs.plugin.HarnessContext.expose`
with ``at``): what the step's CLI (or its agent) writes there dies with the step.

The file is an optimisation only: when it cannot be made, the step runs without it and Claude
Code does its first-start work itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
from jigs.executables import build_key, installed_dir
from jigs.processes import ManagedProcess, launch
from jigs.sandbox import SandboxView

__all__ = ["build_seed", "ensure_seed", "seed_path"]

#: Bumped when what a seed holds changes, so a seed of an older jigs is made again.
_FORMAT = 1
#: The most bytes a seed may have (Claude Code's own first file is well under 1 KiB).
_MAX_BYTES = 256 * 1024
#: Keys that configure a step (per-project trust and tools, user-scope MCP servers): never seeded.
_DROPPED = frozenset({"projects", "mcpServers"})
#: A loopback port nobody listens on inside the seed's own network namespace.
_NOWHERE = "http://127.0.0.1:9"
#: Seconds the seed's run may take to print its first event (Claude Code: well under one).
_FIRST_LINE = 3.0
#: Binaries whose seed could not be made in this process (not retried: each try costs time).
_FAILED: set[Path] = set()


def seed_path(executable: Path) -> Path:
    """Where the seed of this binary lives (a JSON file)."""
    key = build_key(executable, f"claude-seed-{_FORMAT}")
    return installed_dir("claude") / "home-seeds" / f"{key}.json"


def _checked(raw: bytes) -> bytes:
    """The seed's bytes from what Claude Code wrote: a JSON object, without the keys that
    configure a step. Raises :class:`ValueError` for anything else."""
    if len(raw) > _MAX_BYTES:
        raise ValueError(f"the config file has {len(raw)} bytes (at most {_MAX_BYTES})")
    data = json.loads(raw)
    if not isinstance(data, dict) or not data:
        raise ValueError("the config file is not a non-empty JSON object")
    kept = {key: value for key, value in data.items() if key not in _DROPPED}
    return json.dumps(kept, indent=2).encode()


_OWNER = "claude home seed"


def _argv(executable: Path) -> list[str]:
    argv = [str(executable), "-p", "--output-format", "stream-json", "--verbose"]
    argv += ["--strict-mcp-config", "--mcp-config", '{"mcpServers":{}}']
    argv += ["--setting-sources", "project", "--no-session-persistence", "--", "jigs home seed"]
    return argv


async def _first_start(process: ManagedProcess) -> None:
    """Wait for the seed's run to end (its turn fails at its model request, as it should).
    Something that is not Claude Code (no stream-json event first, or nothing within
    :data:`_FIRST_LINE` seconds) is given up on at once, not waited for."""
    first: bytes | None = None
    with anyio.move_on_after(_FIRST_LINE):
        first = await process.read_line()
    try:
        event = json.loads(first) if first else None
    except ValueError:
        event = None
    if not isinstance(event, dict) or "type" not in event:
        raise ValueError("the executable did not start as Claude Code (no stream-json event)")
    while await process.read_line() is not None:
        pass
    await process.wait()


async def build_seed(executable: Path, env: Mapping[str, str]) -> bytes:
    """Run ``executable`` once in a scratch home, sandboxed with no network, and return the
    checked ``.claude.json`` it wrote. ``env`` adds to the run's minimal environment (e.g.
    ``IS_SANDBOX``). Raises what the launch raises, :class:`ValueError` for a missing or
    unusable file; the caller bounds it in time."""
    scratch = Path(tempfile.mkdtemp(prefix="jigs-claude-seed-"))
    try:
        home, cwd = scratch / "home", scratch / "cwd"
        home.mkdir()
        cwd.mkdir()
        view = SandboxView(network="deny")
        view.expose(scratch, writable=True)
        run_env = {
            "PATH": os.defpath,
            **env,
            "HOME": str(home),
            "ANTHROPIC_BASE_URL": _NOWHERE,
            "ANTHROPIC_API_KEY": "jigs-home-seed",  # a placeholder: nothing serves the URL
            "CLAUDE_CODE_MAX_RETRIES": "0",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        process = await launch(_argv(executable), cwd=cwd, env=run_env, owner=_OWNER, sandbox=view)
        async with process:
            await _first_start(process)
        config = home / ".claude.json"
        if not config.is_file() or config.is_symlink():
            raise ValueError("Claude Code wrote no config file")
        return _checked(config.read_bytes())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


async def ensure_seed(
    executable: Path, env: Mapping[str, str], log: Any, *, timeout: float = 8.0
) -> bytes | None:
    """The seed of ``executable`` (checked each time it is read: a damaged file is made again),
    made now (within ``timeout`` seconds) if missing; None when it cannot be had (logged as
    ``claude.home_seed.unavailable``). Never raises; a binary whose seed failed is not tried
    again by this process."""
    final: Path | None = None
    try:
        final = seed_path(executable)
        with contextlib.suppress(OSError, ValueError):
            return _checked(final.read_bytes())
        if final in _FAILED:
            return None
        with anyio.fail_after(timeout):
            data = await build_seed(executable, env)
        final.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".building-", dir=final.parent)
        with contextlib.ExitStack() as cleanup:
            cleanup.callback(Path(name).unlink, missing_ok=True)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(name, final)  # atomic: a concurrent step reads the old or the new file
        log.info("claude.home_seed.built", seed=str(final))
        return data
    except Exception as exc:  # an optimisation must never fail the step
        log.warning("claude.home_seed.unavailable", error=f"{type(exc).__name__}: {exc}")
    if final is not None:
        _FAILED.add(final)
    return None
