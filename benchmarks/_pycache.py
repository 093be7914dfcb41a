"""Fresh Python processes with bytecode caches, as on a user's machine.

This machine's environment sets ``PYTHONDONTWRITEBYTECODE=1``, and uv installs the workspace
without compiling, so a fresh ``python`` compiles every module it imports from source (about half
a second for a jigs step here). A user's install has its ``.pyc`` files, so the whole-process
benchmarks run their Python children with caches on, kept out of the source trees under one
prefix in the benchmark cache dir (the first run of each side writes them: the warm-up).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def cache_dir() -> Path:
    """``$JIGS_BENCH_CACHE``, else ``$XDG_CACHE_HOME/jigs-bench`` or ``~/.cache/jigs-bench``."""
    base = os.environ.get("JIGS_BENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "jigs-bench"
    )
    return Path(base)


def with_bytecode_cache(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` in which Python reads and writes bytecode caches under
    ``cache_dir()/pycache`` (``PYTHONPYCACHEPREFIX``), without ``PYTHONDONTWRITEBYTECODE``."""
    out = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out["PYTHONPYCACHEPREFIX"] = str(cache_dir() / "pycache")
    return out


def describe() -> str:
    """One line for a benchmark's output."""
    inherited = "set" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "not set"
    return (
        f"python children: bytecode caches on under {cache_dir() / 'pycache'} "
        f"(PYTHONDONTWRITEBYTECODE was {inherited} here)"
    )
