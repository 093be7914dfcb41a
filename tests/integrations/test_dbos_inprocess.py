"""jigs_dbos inside a real DBOS process (SQLite): what a step sees of its run."""

from __future__ import annotations

from pathlib import Path

import jigs_dbos
import pytest
from dbos import DBOS
from jigs import RunMetadata
from jigs.errors import AgentCrashedError

_failures: list[int] = []


@jigs_dbos.step(name="flaky_step", max_attempts=3, interval_seconds=0.05)
async def flaky_step() -> RunMetadata:
    meta = jigs_dbos.run_metadata(workflow_name="meta_workflow")
    if not _failures:
        _failures.append(1)
        raise AgentCrashedError("simulated", kind="echo", returncode=1, stderr_tail="")
    return meta


@DBOS.workflow()
async def meta_workflow() -> RunMetadata:
    return await flaky_step()


_seen: list[bool] = []


async def _agent_writes_then_fails(worktree: str) -> bool:
    """Attempt 1 leaves a file and fails (retryable); attempt 2 reports whether it is there."""
    stray = Path(worktree) / "stray.txt"
    _seen.append(stray.exists())
    if len(_seen) % 2 == 1:
        stray.write_text("left by the failed attempt")
        raise AgentCrashedError("simulated", kind="echo", returncode=1, stderr_tail="")
    return stray.exists()


@jigs_dbos.step(max_attempts=2, interval_seconds=0.05, checkpoint="worktree")
async def checkpointed(worktree: str) -> bool:
    return await _agent_writes_then_fails(worktree)


@jigs_dbos.step(max_attempts=2, interval_seconds=0.05)
async def plain(worktree: str) -> bool:
    return await _agent_writes_then_fails(worktree)


@DBOS.workflow()
async def checkpoint_workflow(worktree: str) -> list[bool]:
    return [await checkpointed(worktree), await plain(worktree)]


@pytest.fixture
def dbos_app(tmp_path: Path):
    DBOS(
        config={
            "name": "jigs-test",
            "system_database_url": f"sqlite:///{tmp_path / 'dbos.sqlite'}",
            "serializer": jigs_dbos.JigsSerializer(),
            "log_level": "WARNING",
        }
    )
    DBOS.launch()
    yield
    DBOS.destroy(destroy_registry=False)


@pytest.mark.anyio
async def test_run_metadata_comes_from_the_running_step(dbos_app: None) -> None:
    """workflow_run_id is the DBOS workflow id, step_name the registered name, attempt counts
    DBOS' retries (a retryable error on attempt 1, success on attempt 2), and the RunMetadata
    comes back through the workflow's JSON serializer as a RunMetadata."""
    from dbos import SetWorkflowID

    with SetWorkflowID("wf/meta 1"):
        handle = await DBOS.start_workflow_async(meta_workflow)
    meta = await handle.get_result()
    assert meta == RunMetadata(
        workflow_run_id="wf/meta 1",
        workflow_name="meta_workflow",
        step_name="flaky_step",
        attempt=2,
    )


@pytest.mark.anyio
async def test_checkpoint_restores_the_worktree_for_the_retry(
    dbos_app: None, tmp_path: Path
) -> None:
    """With checkpoint= the retry starts without the failed attempt's file; without it (the
    default) the file is still there."""
    import subprocess

    tree = tmp_path / "wt"
    tree.mkdir()
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    handle = await DBOS.start_workflow_async(checkpoint_workflow, str(tree))
    assert await handle.get_result() == [False, True]
    assert _seen == [False, False, False, True]


def test_checkpoint_must_name_a_parameter() -> None:
    from jigs.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="names no parameter"):
        jigs_dbos.step(checkpoint="tree")(plain)
