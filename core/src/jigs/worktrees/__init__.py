"""Worktrees a workflow provisions for a run, the diff a fresh prompt needs, and their release.

::

    tree = await worktrees.provision(repo, run=run, base="main")
    result = await run_agent(harness=..., cwd=tree.path, prompt=..., run=run)
    print(await worktrees.diff(tree.path, tree.base))
    await worktrees.release(run, succeeded=True)

:func:`provision` gives the run its own clone of a repository, on a branch named by the run
(``jigs/<run id>``), recorded under the run (``jigs runs show RUN`` lists it). A clone rather than
a linked ``git worktree``: a linked worktree's git data lives in the repository's own ``.git``,
which the step's sandbox does not show the agent (and must not let it write: hooks and config
there run in the operator's git), so git would not work inside it. The clone copies the objects
(never hard links, which the agent could rewrite in place); its ``origin`` is the repository.

:func:`release` removes a successful run's worktrees and keeps a failed run's
(:class:`RetentionPolicy` says otherwise), and never removes one that would lose something: one
an agent holds the lock of, one with uncommitted changes, one with a branch whose commits the
repository does not hold (fetch them first). ``jigs runs prune`` applies the same rule.

Every git command goes through :mod:`jigs.policy._git` (no hook, filter or other command the
repository names runs; git gets none of the worker's secrets). Failures raise
:class:`~jigs.errors.WorktreeError` (a repository git cannot read, a base that names no commit)
or :class:`~jigs.errors.InvalidInputError` (an argument of the wrong shape). Checkpoints of a
retried step's worktree are :mod:`jigs.worktrees.checkpoints`.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import platformdirs

from jigs.engine._logging import logger
from jigs.engine._types import RunMetadata, _Data
from jigs.errors import InvalidInputError, WorktreeError
from jigs.policy._files import remove_tree
from jigs.policy._git import GitRunner, copy_index
from jigs.policy._paths import _safe, data_dir
from jigs.stores._session_sync import record_run
from jigs.worktrees._retention import (
    NEEDS,
    Worktree,
    forget,
    recorded,
    remember,
    removal_problem,
    remove,
)

__all__ = [
    "Released",
    "RetentionPolicy",
    "Worktree",
    "default_root",
    "diff",
    "provision",
    "recorded",
    "release",
]


class RetentionPolicy(_Data):
    """What :func:`release` does with a run's worktrees: ``"remove"`` or ``"keep"``, after a run
    that succeeded and after one that failed. The default removes a successful run's and keeps a
    failed one's for a human to look at. A worktree that would lose something is kept whatever
    the policy says."""

    on_success: Literal["remove", "keep"] = "remove"
    on_failure: Literal["remove", "keep"] = "keep"


class Released(_Data):
    """One worktree :func:`release` looked at: whether it was removed, and if not, why."""

    worktree: Worktree
    removed: bool
    #: Why it was kept (the policy, or what removing it would lose and how to fix that).
    reason: str | None = None


def default_root() -> Path:
    """Where :func:`provision` puts worktrees unless told: ``worktrees`` in the user's state
    dir (``~/.local/state/jigs/worktrees`` on Linux), outside the jigs data dir, which no step
    may run in."""
    return platformdirs.user_state_path("jigs", appauthor=False) / "worktrees"


def _run_of(run: object) -> RunMetadata:
    if isinstance(run, RunMetadata):
        return run
    if isinstance(run, Mapping) and all(isinstance(k, str) for k in run):
        return RunMetadata(**run)
    raise InvalidInputError(
        f"run must be a jigs.RunMetadata, got {type(run).__name__}", argument="run"
    )


def _directory(value: object, argument: str) -> Path:
    if not isinstance(value, str | os.PathLike) or "\x00" in os.fspath(value):
        raise InvalidInputError(f"{argument} must be a path without NUL bytes", argument=argument)
    path = Path(os.fspath(value)).resolve()
    if argument == "repo" and not path.is_dir():
        raise InvalidInputError(
            f"the repository {path} does not exist or is not a directory", argument=argument
        )
    return path


def _revision(value: object, argument: str) -> str:
    """A revision the caller named: a string git can only read as one (never an option)."""
    if (
        not isinstance(value, str)
        or not value
        or value.startswith("-")
        or not value.isprintable()
        or len(value) > 1000
    ):
        raise InvalidInputError(
            f"{argument} must name a commit (a branch, a tag or an object id), not an option, "
            f"empty or holding control characters",
            argument=argument,
        )
    return value


def _branch(run_id: str) -> str:
    """``jigs/<run id>``, made a valid ref name (a digest keeps changed names apart)."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]+", "-", run_id).strip("-")[:80]
    if cleaned != run_id or not cleaned:
        cleaned = f"{cleaned}-{hashlib.sha256(run_id.encode()).hexdigest()[:8]}".lstrip("-")
    return f"jigs/{cleaned}"


async def _commit(git: GitRunner, revision: str, where: Path) -> str:
    oid = await git.run(
        "rev-parse", "--verify", "-q", "--end-of-options", f"{revision}^{{commit}}", ok=True
    )
    if not oid:
        raise WorktreeError(
            f"{revision!r} names no commit in {where}; pass a branch, tag or commit it holds",
            worktree=where,
        )
    return oid


async def provision(
    repo: str | os.PathLike[str],
    *,
    run: RunMetadata | Mapping[str, Any],
    base: str = "HEAD",
    root: str | os.PathLike[str] | None = None,
) -> Worktree:
    """A worktree of ``repo`` for ``run``: a clone at ``<root>/<run>/<repo name>`` on the branch
    ``jigs/<run id>`` started at ``base`` (a branch, tag or commit of ``repo``), recorded under
    the run. ``root`` defaults to :func:`default_root`.

    Idempotent per run and repository: a retried step gets the worktree the first attempt made
    (as it is now). Raises :class:`~jigs.errors.WorktreeError` when ``repo`` is no git
    repository, ``base`` names no commit of it that a branch or tag holds, or the path is taken
    by something else; :class:`~jigs.errors.InvalidInputError` for an argument of the wrong
    shape."""
    meta = _run_of(run)
    source = _directory(repo, "repo")
    revision = _revision(base, "base")
    place = _directory(root if root is not None else default_root(), "root")
    data = data_dir().resolve()
    if place == data or data in place.parents:
        raise InvalidInputError(
            f"root {place} is inside the jigs data directory, where no step may run; pick "
            f"another directory",
            argument="root",
        )
    path = place / _safe(meta.workflow_run_id) / source.name
    for known in recorded(meta.workflow_run_id):
        if Path(known.path) == path and Path(known.repo) == source and path.is_dir():
            return known
    git = await GitRunner.open(source, error=WorktreeError, needs=NEEDS)
    oid = await _commit(git, revision, source)
    if path.exists():
        raise WorktreeError(
            f"{path} exists and is no worktree jigs recorded for run {meta.workflow_run_id!r}; "
            f"remove it or pass another root",
            worktree=path,
        )
    return await _clone(git, meta, source, path, oid)


async def _clone(git: GitRunner, run: RunMetadata, source: Path, path: Path, oid: str) -> Worktree:
    branch = _branch(run.workflow_run_id)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        # copies, never hard links: the agent could rewrite a linked object file in place
        await git.run(
            "clone",
            "-q",
            "--no-hardlinks",
            "--no-checkout",
            "--",
            str(source),
            str(path),
            local_transport=True,
        )
        tree = await GitRunner.open(path, error=WorktreeError, needs=NEEDS)
        await _commit(tree, oid, path)  # a commit no branch or tag holds did not come along
        await tree.run("checkout", "-q", "-b", branch, oid)
        worktree = Worktree(
            run_id=run.workflow_run_id, path=str(path), repo=str(source), branch=branch, base=oid
        )
        remember(worktree)
    except BaseException:
        remove_tree(path)
        raise
    record_run(run)
    logger.info("worktree.provisioned", run_id=run.workflow_run_id, path=str(path), base=oid)
    return worktree


async def diff(path: str | os.PathLike[str], base: str) -> str:
    """The unified diff from ``base`` (a commit, e.g. :attr:`Worktree.base`) to the worktree at
    ``path`` as it is now: committed and uncommitted changes, new files included (ignored ones
    not). For a prompt that shows the agent, or a reviewer, what changed.

    No diff driver, textconv or external diff the repository names runs (``--no-ext-diff
    --no-textconv``); the repository's index is not touched. Raises
    :class:`~jigs.errors.WorktreeError` when ``path`` is no git repository or ``base`` names
    no commit in it."""
    where = _directory(path, "path")
    git = await GitRunner.open(where, error=WorktreeError, needs=NEEDS)
    oid = await _commit(git, _revision(base, "base"), where)
    git_dir = Path(await git.run("rev-parse", "--absolute-git-dir"))
    with tempfile.TemporaryDirectory(prefix="jigs-diff-") as tmp:
        index = Path(tmp) / "index"
        if not git.filters:  # as a checkpoint does: a stat cache only when no filter is named
            copy_index(git_dir, index)
        env = {"GIT_INDEX_FILE": str(index)}
        await git.run("add", "-A", env=env)
        return await git.run(
            "diff",
            "--cached",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            oid,
            env=env,
            strip=False,
        )


async def release(
    run: RunMetadata | Mapping[str, Any],
    *,
    succeeded: bool,
    policy: RetentionPolicy | None = None,
) -> list[Released]:
    """Release the worktrees :func:`provision` made for ``run``, at its end: after a run that
    ``succeeded`` they are removed, after a failed one kept (``policy`` may say otherwise).

    A worktree is never removed when an agent holds its lock, it has uncommitted changes, or a
    branch in it has commits its repository does not hold: it is kept, and its
    :class:`Released` says why and how to fix it (``jigs runs prune`` applies the same rule
    later). A removed worktree's record goes; a kept one's stays. Raises
    :class:`~jigs.errors.InvalidInputError` for a ``run`` of the wrong shape."""
    meta = _run_of(run)
    rules = policy if policy is not None else RetentionPolicy()
    if not isinstance(rules, RetentionPolicy):
        raise InvalidInputError(
            "policy must be a jigs.worktrees.RetentionPolicy", argument="policy"
        )
    action = rules.on_success if succeeded else rules.on_failure
    outcome = "succeeded" if succeeded else "failed"
    released: list[Released] = []
    for worktree in recorded(meta.workflow_run_id):
        if action == "keep":
            reason = f"the run {outcome} and the policy keeps its worktrees"
            released.append(Released(worktree=worktree, removed=False, reason=reason))
            continue
        problem = await removal_problem(worktree)
        if problem is not None:
            logger.warning("worktree.kept", run_id=meta.workflow_run_id, reason=problem)
            released.append(Released(worktree=worktree, removed=False, reason=problem))
            continue
        remove(worktree)
        forget(worktree)
        released.append(Released(worktree=worktree, removed=True))
    return released
