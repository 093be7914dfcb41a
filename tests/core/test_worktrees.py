"""jigs.worktrees: provision a run's worktree, diff it, release it under the retention policy,
never losing work (uncommitted changes, an unpushed branch, a held lock); `jigs runs prune`
applies the same rule."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio.to_thread
import pytest
from jigs import RunMetadata
from jigs.cli import main
from jigs.errors import InvalidInputError, WorktreeError
from jigs.policy._lock import WorktreeLock
from jigs.worktrees import RetentionPolicy, diff, provision, recorded, release

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # git runs through anyio.run_process: the checkpoint tests cover trio


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.email", "t@example.com")
    _git(path, "config", "user.name", "t")
    (path / "app.py").write_text("print('one')\n")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "first")
    return path


async def _provisioned(repo: Path, tmp_path: Path, run_id: str = "review/PR-12") -> tuple:
    run = RunMetadata(workflow_run_id=run_id)
    tree = await provision(repo, run=run, base="main", root=tmp_path / "trees")
    return run, tree


async def test_provision_records_a_clone_on_the_runs_branch(repo, tmp_path):
    run, tree = await _provisioned(repo, tmp_path)
    path = Path(tree.path)
    assert (path / "app.py").read_text() == "print('one')\n"
    assert (
        _git(path, "branch", "--show-current")
        == tree.branch
        == "jigs/review-PR-12-" + (tree.branch.rsplit("-", 1)[1])
    )
    assert tree.base == _git(repo, "rev-parse", "main")
    assert recorded(run.workflow_run_id) == [tree]
    # not linked to the repository's .git: the agent's sandbox shows it only its worktree
    assert (path / ".git").is_dir()
    # a retried step gets the same worktree, as it is now
    (path / "new.txt").write_text("kept\n")
    again = await provision(repo, run=run, base="main", root=tmp_path / "trees")
    assert again == tree
    assert (path / "new.txt").exists()


async def test_diff_shows_committed_uncommitted_and_new_files(repo, tmp_path):
    _run, tree = await _provisioned(repo, tmp_path)
    path = Path(tree.path)
    (path / "app.py").write_text("print('two')\n")
    _git(path, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qam", "two")
    (path / "app.py").write_text("print('three')\n")
    (path / "notes.md").write_text("new file\n")
    # a diff driver the agent planted never runs
    (path / ".gitattributes").write_text("*.py diff=evil\n")
    _git(path, "config", "diff.evil.textconv", f"touch {tmp_path / 'ran'}; cat")
    text = await diff(path, tree.base)
    assert "-print('one')" in text
    assert "+print('three')" in text
    assert "+new file" in text
    assert "notes.md" in text
    assert not (tmp_path / "ran").exists()
    assert _git(path, "status", "--porcelain")  # the repository's index was not touched
    with pytest.raises(WorktreeError, match="names no commit"):
        await diff(path, "no-such-branch")
    with pytest.raises(InvalidInputError, match="not an option"):
        await diff(path, "--output=/tmp/x")


@pytest.mark.parametrize(
    ("succeeded", "policy", "removed"),
    [
        (True, None, True),
        (False, None, False),
        (True, RetentionPolicy(on_success="keep"), False),
        (False, RetentionPolicy(on_failure="remove"), True),
    ],
    ids=["success-removes", "failure-keeps", "policy-keeps", "policy-removes"],
)
async def test_release_follows_the_retention_policy(repo, tmp_path, succeeded, policy, removed):
    run, tree = await _provisioned(repo, tmp_path)
    [result] = await release(run, succeeded=succeeded, policy=policy)
    assert result.removed is removed
    assert Path(tree.path).exists() is not removed
    assert recorded(run.workflow_run_id) == ([] if removed else [tree])
    if not removed:
        assert "policy keeps" in (result.reason or "")


def _dirty(path: Path) -> None:
    (path / "app.py").write_text("changed\n")


def _unpushed(path: Path) -> None:
    _dirty(path)
    _git(path, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qam", "work")


@pytest.mark.parametrize(
    ("spoil", "reason"),
    [
        (_dirty, "uncommitted changes"),
        (_unpushed, "does not hold; fetch them"),
    ],
    ids=["uncommitted", "unpushed"],
)
async def test_release_never_loses_work(repo, tmp_path, spoil, reason):
    run, tree = await _provisioned(repo, tmp_path)
    spoil(Path(tree.path))
    [result] = await release(run, succeeded=True)
    assert not result.removed
    assert reason in (result.reason or "")
    assert Path(tree.path).is_dir()
    assert recorded(run.workflow_run_id) == [tree]
    if spoil is _unpushed:  # fetched back into the repository, it goes
        _git(repo, "fetch", "-q", tree.path, f"{tree.branch}:{tree.branch}")
        [result] = await release(run, succeeded=True)
        assert result.removed
        assert not Path(tree.path).exists()


async def test_release_never_removes_a_locked_worktree(repo, tmp_path):
    run, tree = await _provisioned(repo, tmp_path)
    lock = WorktreeLock(Path(tree.path), "someone")
    lock.acquire()
    try:
        [result] = await release(run, succeeded=True)
    finally:
        lock.release()
    assert not result.removed
    assert "holds the lock" in (result.reason or "")
    [result] = await release(run, succeeded=True)
    assert result.removed


async def test_provision_refuses_what_it_cannot_use(repo, tmp_path):
    run = RunMetadata(workflow_run_id="r")
    with pytest.raises(WorktreeError, match="names no commit"):
        await provision(repo, run=run, base="nope", root=tmp_path / "trees")
    with pytest.raises(InvalidInputError, match="not an option"):
        await provision(repo, run=run, base="--upload-pack=x", root=tmp_path / "trees")
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(WorktreeError):
        await provision(plain, run=run, root=tmp_path / "trees")
    assert recorded("r") == []


async def test_runs_prune_applies_the_same_rule(repo, tmp_path, capsys):
    _, kept = await _provisioned(repo, tmp_path, "kept")
    _, gone = await _provisioned(repo, tmp_path, "gone")
    _dirty(Path(kept.path))
    # the command runs git through anyio.run: outside this test's event loop
    code = await anyio.to_thread.run_sync(main, ["runs", "prune", "--older-than", "0s", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert [r["run_id"] for r in report["removed"]] == ["gone"]
    [refused] = report["refused"]
    assert refused["run_id"] == "kept"
    assert "uncommitted changes" in refused["reason"]
    assert Path(kept.path).is_dir()
    assert not Path(gone.path).exists()
