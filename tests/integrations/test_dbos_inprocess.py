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
