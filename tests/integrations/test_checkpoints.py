"""Worktree checkpoints: a retried step starts from the worktree its first attempt saw."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from jigs.errors import CheckpointError
from jigs.worktrees import checkpoints

pytestmark = pytest.mark.anyio


def git(tree: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=tree, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    tree = tmp_path / "repo"
    tree.mkdir()
    git(tree, "init", "-q", "-b", "main")
    (tree / ".gitignore").write_text("build/\n")
    (tree / "a.txt").write_text("a0\n")
    (tree / "gone.txt").write_text("tracked\n")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "base")
    # the state at step start: an unstaged edit, a staged file, an untracked file
    (tree / "a.txt").write_text("a1 unstaged\n")
    (tree / "b.txt").write_text("b staged\n")
    git(tree, "add", "b.txt")
    (tree / "c.txt").write_text("c untracked\n")
    return tree


def state(tree: Path) -> tuple[str, ...]:
    files = sorted(
        f"{p.relative_to(tree)}={p.read_text()}"
        for p in tree.rglob("*")
        if p.is_file() and ".git" not in p.parts
    )
    return (
        git(tree, "rev-parse", "HEAD"),
        git(tree, "symbolic-ref", "HEAD"),
        git(tree, "status", "--porcelain"),
        *files,
    )


async def failed_attempt(repo: Path) -> None:
    async with checkpoints.step_checkpoint(repo, "wf/1#2") as restored:
        assert restored is False
        # the failed attempt: edits, deletes, creates, stages and commits
        (repo / "a.txt").write_text("a2 by the agent\n")
        (repo / "c.txt").unlink()
        (repo / "gone.txt").unlink()
        (repo / "d.txt").write_text("new\n")
        (repo / "sub").mkdir()
        (repo / "sub" / "e.txt").write_text("e\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "agent commit")
        (repo / "f.txt").write_text("after the commit\n")
        raise RuntimeError("killed")


async def test_a_retry_restores_files_index_and_head(repo: Path) -> None:
    before = state(repo)
    with pytest.raises(RuntimeError, match="killed"):
        await failed_attempt(repo)
    (repo / "build").mkdir()
    (repo / "build" / "out.o").write_text("ignored\n")
    async with checkpoints.step_checkpoint(repo, "wf/1#2") as restored:
        assert restored is True
        after = state(repo)
    assert after[:3] == before[:3]  # HEAD, branch, staged/unstaged/untracked status
    assert [f for f in after[3:] if not f.startswith("build/")] == list(before[3:])
    assert (repo / "build" / "out.o").exists()  # ignored files are left alone
    # success dropped the checkpoint: the next step with that key saves a new one
    assert git(repo, "for-each-ref", "refs/jigs/") == ""


async def test_keys_are_separate_and_outside_a_repo_is_refused(repo: Path, tmp_path: Path) -> None:
    await checkpoints.save(repo, "one")
    (repo / "x.txt").write_text("x\n")
    assert await checkpoints.restore(repo, "two") is False
    assert (repo / "x.txt").exists()
    assert await checkpoints.restore(repo, "one") is True
    assert not (repo / "x.txt").exists()
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(CheckpointError, match="git repository") as error:
        await checkpoints.save(plain, "k")
    assert error.value.retryable is False
