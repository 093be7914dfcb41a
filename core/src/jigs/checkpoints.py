"""Worktree checkpoints for retried steps: the git state at a step's start, restored on a retry.

A checkpoint is a commit under ``refs/jigs/checkpoints/<key>`` in the worktree's repository. Its
tree is the working tree as it was (tracked and untracked files, ``.gitignore`` respected); its
message records ``HEAD``, the branch and the index. :func:`step_checkpoint` takes one when a step
starts for the first time and restores it when the same step (same key) starts again, before the
agent runs: files the failed or killed attempt wrote, deleted or committed are put back. Ignored
files (build outputs) are not touched. The ref is removed when the step succeeds.

Off by default: the integrations take one only when asked (``checkpoint=`` on
``jigs_dbos.step`` / ``jigs_temporal.activity``). Failures raise
:class:`~jigs.errors.CheckpointError` (not retryable: the worktree is not a usable git
repository, or git failed).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from jigs.errors import CheckpointError

__all__ = ["drop", "restore", "save", "step_checkpoint", "worktree_parameter"]

_PREFIX = "refs/jigs/checkpoints/"
_IDENTITY = {
    "GIT_AUTHOR_NAME": "jigs",
    "GIT_AUTHOR_EMAIL": "jigs@localhost",
    "GIT_COMMITTER_NAME": "jigs",
    "GIT_COMMITTER_EMAIL": "jigs@localhost",
}


def _ref(key: str) -> str:
    import hashlib

    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", key)[:80].strip(".")
    return f"{_PREFIX}{cleaned}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


async def _git(
    worktree: Path, *args: str, env: dict[str, str] | None = None, ok: bool = False
) -> str:
    import anyio

    full = {**os.environ, **_IDENTITY, **(env or {})}
    result = await anyio.run_process(["git", *args], cwd=worktree, env=full, check=False)
    if result.returncode != 0 and not ok:
        raise CheckpointError(
            f"git {args[0]} failed in {worktree} ({result.returncode}): "
            f"{result.stderr.decode(errors='replace').strip()[:300]}; the worktree checkpoint "
            f"needs a git repository without merge conflicts",
            worktree=worktree,
        )
    return result.stdout.decode().strip() if result.returncode == 0 else ""


async def save(worktree: Path, key: str) -> None:
    """Record the worktree's state under ``key`` (replacing an older checkpoint of it)."""
    head = await _git(worktree, "rev-parse", "--verify", "-q", "HEAD", ok=True)
    branch = await _git(worktree, "symbolic-ref", "-q", "HEAD", ok=True)
    index_tree = await _git(worktree, "write-tree")
    git_dir = Path(await _git(worktree, "rev-parse", "--absolute-git-dir"))
    with tempfile.TemporaryDirectory(prefix="jigs-checkpoint-") as tmp:
        index = Path(tmp) / "index"
        if (git_dir / "index").exists():
            index.write_bytes((git_dir / "index").read_bytes())
        env = {"GIT_INDEX_FILE": str(index)}
        await _git(worktree, "add", "-A", env=env)
        work_tree = await _git(worktree, "write-tree", env=env)
    meta = json.dumps({"head": head or None, "branch": branch or None, "index": index_tree})
    parents = ["-p", head] if head else []
    commit = await _git(worktree, "commit-tree", work_tree, *parents, "-m", meta)
    await _git(worktree, "update-ref", _ref(key), commit)


async def restore(worktree: Path, key: str) -> bool:
    """Put the worktree back to the state saved under ``key``; False when there is none."""
    ref = _ref(key)
    commit = await _git(worktree, "rev-parse", "--verify", "-q", ref, ok=True)
    if not commit:
        return False
    meta = json.loads(await _git(worktree, "log", "-1", "--format=%B", commit))
    await _git(worktree, "read-tree", f"{commit}^{{tree}}")
    await _git(worktree, "checkout-index", "-a", "-f")
    await _git(worktree, "clean", "-fdq")
    head, branch = meta["head"], meta["branch"]
    if branch:
        await _git(worktree, "symbolic-ref", "HEAD", branch)
        if head:
            await _git(worktree, "update-ref", branch, head)
        else:
            await _git(worktree, "update-ref", "-d", branch, ok=True)
    elif head:
        await _git(worktree, "update-ref", "--no-deref", "HEAD", head)
    await _git(worktree, "read-tree", meta["index"])
    return True


async def drop(worktree: Path, key: str) -> None:
    await _git(worktree, "update-ref", "-d", _ref(key), ok=True)


@asynccontextmanager
async def step_checkpoint(worktree: str | Path, key: str) -> AsyncIterator[bool]:
    """Around one step: restore ``key``'s checkpoint if a previous attempt left one (yields
    True), else save one (yields False); drop it when the block succeeds, keep it when it
    raises (the next attempt restores it)."""
    path = Path(worktree)
    restored = await restore(path, key)
    if not restored:
        await save(path, key)
    from jigs._logging import logger

    logger.info("checkpoint.ready", worktree=str(path), restored=restored)
    yield restored
    await drop(path, key)


def worktree_parameter(
    func: Callable[..., Any], parameter: str | None
) -> Callable[[tuple[Any, ...], dict[str, Any]], str | Path] | None:
    """How to read the worktree from a call of ``func``: its argument named ``parameter``
    (None when ``parameter`` is None). Raises :class:`~jigs.errors.InvalidInputError` when
    ``func`` has no such parameter."""
    if parameter is None:
        return None
    import inspect

    signature = inspect.signature(func)
    if parameter not in signature.parameters:
        from jigs.errors import InvalidInputError

        raise InvalidInputError(
            f"checkpoint={parameter!r} names no parameter of {func.__qualname__}; name the one "
            f"that holds the worktree",
            argument="checkpoint",
        )

    def read(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | Path:
        value: str | Path = signature.bind(*args, **kwargs).arguments[parameter]
        return value

    return read
