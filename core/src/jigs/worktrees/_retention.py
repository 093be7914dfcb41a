"""The worktrees a run was given, recorded under the run, and the one rule for removing one.

A provisioned worktree is recorded in ``<data>/runs/<safe run id>/worktrees.json``: the run owns
it, ``jigs runs`` lists it, and both :func:`jigs.worktrees.release` and ``jigs runs prune`` remove
it only when :func:`removal_problem` finds nothing that would be lost: no agent holds its lock,
it has no uncommitted change, and every branch in it points at a commit its repository holds.
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Annotated

from pydantic import Field

from jigs.engine._logging import logger
from jigs.engine._types import _Data
from jigs.errors import WorktreeError
from jigs.policy._files import remove_tree, write_atomic
from jigs.policy._git import GitRunner
from jigs.policy._lock import worktree_locked
from jigs.policy._paths import _safe, data_dir

__all__ = [
    "WORKTREES_FILE",
    "Worktree",
    "forget",
    "recorded",
    "remember",
    "removal_problem",
    "remove",
]

#: The file under a run's directory that lists its worktrees.
WORKTREES_FILE = "worktrees.json"
_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
#: What a git failure in a worktree jigs reads back says the caller needs.
NEEDS = "jigs.worktrees needs a git repository it can read (see `git status` there)"


class Worktree(_Data):
    """A worktree :func:`jigs.worktrees.provision` made for a run: its own clone of ``repo`` at
    ``path``, on ``branch`` (named by the run), started at the commit ``base``. Frozen; goes
    through JSON (``to_data()`` / ``from_data()``) to a later step."""

    #: The run the worktree belongs to (``RunMetadata.workflow_run_id``).
    run_id: Annotated[str, Field(min_length=1, max_length=4096)]
    #: The worktree (absolute): pass it as ``cwd=`` to the run's steps.
    path: str
    #: The repository it was cloned from (absolute), its clone's ``origin``.
    repo: str
    #: The branch the worktree is on: ``jigs/<run id made safe for a ref name>``.
    branch: str
    #: The commit the branch started at (an object id): :func:`jigs.worktrees.diff`'s base.
    base: Annotated[str, Field(pattern=r"^([0-9a-f]{40}|[0-9a-f]{64})$")]


def _records_path(run_id: str) -> Path:
    return data_dir() / "runs" / _safe(run_id) / WORKTREES_FILE


def recorded(run_id: str) -> list[Worktree]:
    """The worktrees recorded under run ``run_id`` (a record that does not parse is skipped)."""
    return recorded_at(_records_path(run_id))


def recorded_at(path: Path) -> list[Worktree]:
    """The worktrees listed in one run's ``worktrees.json``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    found: list[Worktree] = []
    for item in data if isinstance(data, list) else []:
        with contextlib.suppress(Exception):  # a damaged record: the rest still count
            found.append(Worktree.from_data(item))
    return found


def _write(run_id: str, worktrees: list[Worktree]) -> None:
    data = json.dumps([w.to_data() for w in worktrees], indent=1).encode()
    write_atomic(_records_path(run_id), data)


def remember(worktree: Worktree) -> None:
    """Record ``worktree`` under its run (replacing a record of the same path)."""
    others = [w for w in recorded(worktree.run_id) if w.path != worktree.path]
    _write(worktree.run_id, [*others, worktree])


def forget(worktree: Worktree) -> None:
    """Drop ``worktree``'s record from its run."""
    _write(worktree.run_id, [w for w in recorded(worktree.run_id) if w.path != worktree.path])


def _shown(text: str) -> str:
    return text if text.isprintable() and len(text) <= 200 else repr(text[:200])


async def removal_problem(worktree: Worktree) -> str | None:
    """Why removing ``worktree`` would lose something (and how to fix it), or None.

    Checked in order: an agent holds its lock; it has uncommitted changes (untracked files
    count, ignored ones do not); a branch in it points at a commit that no ref of its
    repository contains (work never fetched back). Git runs hardened
    (:mod:`jigs.policy._git`): the worktree is the agent's, so nothing it planted runs."""
    path = Path(worktree.path)
    if not path.exists():
        return None
    if worktree_locked(path):
        return f"an agent holds the lock of {path}; release it once that step has closed"
    try:
        git = await GitRunner.open(path, error=WorktreeError, needs=NEEDS)
        status = await git.run("status", "--porcelain", "--untracked-files=normal")
        heads = await git.run(
            "for-each-ref", "--format=%(objectname) %(refname:short)", "refs/heads"
        )
    except WorktreeError as exc:
        return (
            f"jigs cannot read it as a git repository ({exc}); remove it by hand if nothing in "
            f"it is needed"
        )
    if status:
        changed = len(status.splitlines())
        return (
            f"{path} has uncommitted changes ({changed} paths); commit them (then fetch the "
            f"branch into {worktree.repo}) or discard them"
        )
    return await _unpushed(worktree, heads)


async def _unpushed(worktree: Worktree, heads: str) -> str | None:
    """The first branch of the worktree whose tip no ref of its repository contains."""
    repo = Path(worktree.repo)
    if not repo.is_dir():
        return f"its repository {repo} is gone, so jigs cannot tell whether its branches are kept"
    source = await GitRunner.open(repo, error=WorktreeError, needs=NEEDS)
    for line in heads.splitlines():
        oid, _, branch = line.partition(" ")
        if not _OID.fullmatch(oid):
            return f"branch {_shown(branch)} in {worktree.path} names no commit jigs can check"
        held = await source.run(
            "for-each-ref", "--count=1", "--format=%(refname)", "--contains", oid, ok=True
        )
        if not held:
            return (
                f"branch {_shown(branch)} has commits {repo} does not hold; fetch them (`git -C "
                f"{repo} fetch {worktree.path} {_shown(branch)}`) or delete the branch"
            )
    return None


def remove(worktree: Worktree) -> None:
    """Delete the worktree's directory (and its run's directory of worktrees once empty). The
    caller checked :func:`removal_problem` first, and drops the record."""
    path = Path(worktree.path)
    remove_tree(path)
    with contextlib.suppress(OSError):
        path.parent.rmdir()  # only when no other worktree of the run is left there
    logger.info("worktree.removed", run_id=worktree.run_id, path=str(path))
