"""A V8 compile cache for Pi, made by the worker and shown read-only to sandboxed steps.

Pi turns on Node's compile cache (``module.enableCompileCache()``), which lives in
``$TMPDIR/node-compile-cache`` unless ``NODE_COMPILE_CACHE`` names a directory. A sandboxed
step has a fresh, private ``/tmp``, so every turn compiled Pi's bundle from scratch: about
120 ms per turn here (``benchmarks/bench_pi.py`` went from 1.05 to 1.36 of raw ``pi`` with the
sandbox on). So the worker makes the cache once per Pi build, outside any sandbox, by running
``pi --version`` with ``NODE_COMPILE_CACHE`` pointing at a fresh directory under jigs' data
dir, and every step's sandbox shows that directory **read-only** with ``NODE_COMPILE_CACHE``
pointing at it. An agent can neither write it nor plant code in it; Node checks each entry
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

from jigs_harness_pi._executable import PiExecutable

__all__ = ["compile_cache"]

#: Seconds the one-off ``pi --version`` may take to make the cache.
_BUILD_TIMEOUT = 60.0


def _key(pi: PiExecutable) -> str:
    """The cache's name: the sizes and modification times of the Node and the script it
    compiles (a new build of either gets a cache of its own; Node still checks every entry)."""
    parts = []
    for part in pi.argv:
        stat = os.stat(part) if os.path.exists(part) else None
        parts.append(f"{stat.st_size:x}-{stat.st_mtime_ns:x}" if stat else "0")
    return "-".join(parts)


async def compile_cache(pi: PiExecutable, env: Mapping[str, str], log: Any) -> Path | None:
    """The compile cache directory for ``pi`` (made now if missing), or None when it could not
    be made. Never raises."""
    work: Path | None = None
    try:
        # beside the installed CLIs in jigs' data dir (clis/pi/..), which no sandbox shows
        final = installed_dir("pi").parent.parent / "caches" / "node-compile" / f"pi-{_key(pi)}"
        if final.is_dir():
            return final
        final.parent.mkdir(parents=True, exist_ok=True)
        work = Path(os.fspath(final) + f".building-{os.getpid()}")
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(mode=0o755)
        run_env = {
            "PATH": env.get("PATH") or os.defpath,
            "HOME": str(work),
            "NODE_COMPILE_CACHE": str(work),
        }
        with anyio.fail_after(_BUILD_TIMEOUT):
            await anyio.run_process([*pi.argv, "--version"], env=run_env, check=True, cwd=work)
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
