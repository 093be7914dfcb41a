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

Every git command goes through :mod:`jigs.policy._git`: the repository is the agent's, so no hook,
fsmonitor, filter driver or other command its config names runs, and git gets none of the
worker's environment (no model key, no secret).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from jigs.engine._logging import logger
from jigs.errors import CheckpointError, InvalidInputError
from jigs.policy._git import GitRunner, commit_message, copy_index

__all__ = ["drop", "restore", "save", "step_checkpoint", "worktree_parameter"]

_PREFIX = "refs/jigs/checkpoints/"
_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_BRANCH = re.compile(r"refs/heads/[^\s\x00-\x1f]{1,400}")
_IDENTITY = {
    "GIT_AUTHOR_NAME": "jigs",
    "GIT_AUTHOR_EMAIL": "jigs@localhost",
    "GIT_COMMITTER_NAME": "jigs",
    "GIT_COMMITTER_EMAIL": "jigs@localhost",
}


def _ref(key: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", key)[:80].strip(".")
    return f"{_PREFIX}{cleaned}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


async def save(worktree: Path, key: str) -> None:
    """Record the worktree's state under ``key`` (replacing an older checkpoint of it)."""
    git = await GitRunner.open(worktree, _IDENTITY)
    head = await git.run("rev-parse", "--verify", "-q", "HEAD", ok=True)
    branch = await git.run("symbolic-ref", "-q", "HEAD", ok=True)
    index_tree = await git.run("write-tree")
    git_dir = Path(await git.run("rev-parse", "--absolute-git-dir"))
    with tempfile.TemporaryDirectory(prefix="jigs-checkpoint-") as tmp:
        index = Path(tmp) / "index"
        if not git.filters:
            # with filter drivers neutralised, an index entry whose stat matches would keep
            # its filtered blob while the rest are stored raw: start empty so every file is
            # stored as its bytes (and checked out as its bytes, without the smudge filter)
            copy_index(git_dir, index)
        env = {"GIT_INDEX_FILE": str(index)}
        await git.run("add", "-A", env=env)
        work_tree = await git.run("write-tree", env=env)
    meta = json.dumps({"head": head or None, "branch": branch or None, "index": index_tree})
    parents = ["-p", head] if head else []
    commit = await git.run("commit-tree", "--no-gpg-sign", work_tree, *parents, "-m", meta)
    await git.run("update-ref", _ref(key), commit)


def _meta(raw: str, worktree: Path) -> dict[str, Any]:
    """The checkpoint commit's recorded state; the ref lives in the agent-writable repository,
    so the message is parsed and checked, never trusted."""
    try:
        meta = json.loads(commit_message(raw))
        # each value becomes an argument of git: an object id or a branch ref, never an option
        if (
            isinstance(meta, dict)
            and (meta.get("head") is None or _OID.fullmatch(str(meta["head"])))
            and _OID.fullmatch(str(meta.get("index")))
            and (meta.get("branch") is None or _BRANCH.fullmatch(str(meta["branch"])))
        ):
            return meta
    except ValueError:
        pass
    raise CheckpointError(
        f"the checkpoint commit in {worktree} does not hold what jigs recorded; delete the "
        f"refs under {_PREFIX} and retry the step",
        worktree=worktree,
    )


async def restore(worktree: Path, key: str) -> bool:
    """Put the worktree back to the state saved under ``key``; False when there is none."""
    git = await GitRunner.open(worktree, _IDENTITY)
    ref = _ref(key)
    commit = await git.run("rev-parse", "--verify", "-q", f"{ref}^{{commit}}", ok=True)
    if not commit:
        return False
    meta = _meta(await git.run("cat-file", "commit", commit), worktree)
    await git.run("read-tree", f"{commit}^{{tree}}")
    await git.run("checkout-index", "-a", "-f")
    await git.run("clean", "-fdq")
    head, branch = meta["head"], meta["branch"]
    if branch:
        await git.run("symbolic-ref", "HEAD", branch)
        if head:
            await git.run("update-ref", branch, head)
        else:
            await git.run("update-ref", "-d", branch, ok=True)
    elif head:
        await git.run("update-ref", "--no-deref", "HEAD", head)
    await git.run("read-tree", meta["index"])
    return True


async def drop(worktree: Path, key: str) -> None:
    git = await GitRunner.open(worktree, _IDENTITY)
    await git.run("update-ref", "-d", _ref(key), ok=True)


@asynccontextmanager
async def step_checkpoint(worktree: str | Path, key: str) -> AsyncIterator[bool]:
    """Around one step: restore ``key``'s checkpoint if a previous attempt left one (yields
    True), else save one (yields False); drop it when the block succeeds, keep it when it
    raises (the next attempt restores it)."""
    path = Path(worktree)
    restored = await restore(path, key)
    if not restored:
        await save(path, key)

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

    signature = inspect.signature(func)
    if parameter not in signature.parameters:
        raise InvalidInputError(
            f"checkpoint={parameter!r} names no parameter of {func.__qualname__}; name the one "
            f"that holds the worktree",
            argument="checkpoint",
        )

    def read(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | Path:
        value: str | Path = signature.bind(*args, **kwargs).arguments[parameter]
        return value

    return read
