"""A V8 compile cache for Pi, made by the worker and shown read-only to sandboxed steps.

Pi turns on Node's compile cache (``module.enableCompileCache()``), which lives in
``$TMPDIR/node-compile-cache`` unless ``NODE_COMPILE_CACHE`` names a directory. A sandboxed
step has a fresh, private ``/tmp``, so every turn compiled Pi's bundle from scratch: about
120 ms per turn here (``benchmarks/bench_pi.py`` went from 1.05 to 1.36 of raw ``pi`` with the
sandbox on). So the worker makes the cache once per Pi build with ``NODE_COMPILE_CACHE``
pointing at a fresh directory under jigs' data dir, and every step's sandbox shows that
directory **read-only** with ``NODE_COMPILE_CACHE`` pointing at it.

What the cache holds is what the run that made it loaded. ``pi --version`` loads the start-up
code only (23 entries with Pi 1.x); a turn loads its agent loop, tools and model provider too
(34), and a step whose cache lacked those compiled them on every turn: about 12 ms of CPU per
turn (a turn with each cache, alternated, 15 pairs). So the cache is made by one turn per model
API a step can use (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages), in a
sandbox with no network, against a loopback port nobody listens on: each turn fails at its
model request, after its provider's code is loaded; no model is called. A cache made that way
had the same entries as one made by a turn that got its answer.

An agent can neither write the cache nor plant code in it; Node checks each entry
against its source (a mismatched entry is compiled afresh, never run). A cache that cannot be
made is logged and the step runs without it (slower, the same).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
from jigs.executables import installed_dir
from jigs.harnesses import load
from jigs.processes import launch
from jigs.sandbox import SandboxView

from jigs_harness_pi._descriptor import PiDescriptor
from jigs_harness_pi._executable import PiExecutable, install_paths
from jigs_harness_pi._home import PiHome, model_flag

__all__ = ["compile_cache"]

#: Bumped when what a cache holds changes, so a cache of an older jigs is made again.
_FORMAT = 2
#: Seconds the cache's turns may take in all.
_BUILD_TIMEOUT = 60.0
_OWNER = "pi compile cache"
#: The placeholder key variable of those turns (nothing serves their URL).
_KEY_ENV = "JIGS_PI_CACHE_KEY"
#: Where the cache's turns send their model request: a loopback port nobody listens on.
_NOWHERE = {"name": "jigscache", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
_NOWHERE |= {"api_key_env": _KEY_ENV}


def _key(pi: PiExecutable) -> str:
    """The cache's name: the sizes and modification times of the Node and the script it
    compiles (a new build of either gets a cache of its own; Node still checks every entry)."""
    parts = []
    for part in pi.argv:
        stat = os.stat(part) if os.path.exists(part) else None
        parts.append(f"{stat.st_size:x}-{stat.st_mtime_ns:x}" if stat else "0")
    return "-".join(parts)


#: One model per API a step can use: a failed turn with each loads that provider's code.
_SOURCES: tuple[dict[str, str], ...] = (
    {"type": "openai-compatible", "api": "chat-completions"},
    {"type": "openai-compatible", "api": "responses"},
    {"type": "anthropic-compatible"},
)


def _cache_turn(pi: PiExecutable, source: dict[str, str]) -> tuple[list[str], PiHome]:
    """The argv of one failing turn of ``source``'s API, and the agent dir it reads."""
    descriptor = load({"kind": "pi", "model": {**source, **_NOWHERE}})
    assert isinstance(descriptor, PiDescriptor)
    home = PiHome(descriptor)
    argv = [*pi.argv, "--mode", "json", "--model", model_flag(descriptor), "--no-session"]
    argv += ["-ne", "-ns", "-np", "--no-themes", "-na", "--no-mcp", "-nc", "--", "jigs cache"]
    return argv, home


async def _fill(pi: PiExecutable, env: Mapping[str, str], work: Path) -> None:
    """Run the cache's turns (:data:`_SOURCES`) with ``NODE_COMPILE_CACHE`` at ``work``, each
    in a sandbox with no network that shows ``work`` read-write."""
    for source in _SOURCES:
        argv, home = _cache_turn(pi, source)
        try:
            view = SandboxView(home=str(work), network="deny")
            view.expose(work, writable=True)
            view.expose(home.path, writable=True)
            for path in install_paths(pi.argv):
                view.expose(path)
            run_env = {
                "PATH": env.get("PATH") or os.defpath,
                "HOME": str(work),
                "NODE_COMPILE_CACHE": str(work),
                "PI_CODING_AGENT_DIR": str(home.path),
                "PI_OFFLINE": "1",
                "PI_SKIP_VERSION_CHECK": "1",
                "PI_TELEMETRY": "0",
                _KEY_ENV: "jigs-compile-cache",
            }
            process = await launch(
                argv, cwd=work, env=run_env, owner=_OWNER, stdout="discard", sandbox=view
            )
            async with process:
                await process.wait()  # the turn fails at its model request, as it should
        finally:
            home.remove()


async def compile_cache(pi: PiExecutable, env: Mapping[str, str], log: Any) -> Path | None:
    """The compile cache directory for ``pi`` (made now if missing: needs the sandbox), or None
    when it could not be made. Never raises."""
    work: Path | None = None
    try:
        # beside the installed CLIs in jigs' data dir (clis/pi/..), which no sandbox shows
        final = (
            installed_dir("pi").parent.parent
            / "caches"
            / "node-compile"
            / f"pi-{_FORMAT}-{_key(pi)}"
        )
        if final.is_dir():
            return final
        final.parent.mkdir(parents=True, exist_ok=True)
        work = Path(os.fspath(final) + f".building-{os.getpid()}")
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(mode=0o755)
        with anyio.fail_after(_BUILD_TIMEOUT):
            await _fill(pi, env, work)
        if not any(path.is_file() for path in work.rglob("*")):
            raise RuntimeError("node wrote no compile cache")
        try:
            work.rename(final)
        except OSError:  # another worker made it meanwhile
            shutil.rmtree(work, ignore_errors=True)
        log.info("pi.compile_cache.made", path=str(final))
        return final if final.is_dir() else None
    except Exception as exc:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
        log.warning("pi.compile_cache.failed", error=type(exc).__name__)
        return None
