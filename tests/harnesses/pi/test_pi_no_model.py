"""Pi has no model object: create_agent_runner refuses at once and acquires nothing."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from jigs import RunMetadata
from jigs.errors import ModelNotAvailableError
from jigs.policy._lock import lock_path_for
from jigs.processes import live_groups, observe_launches
from jigs.steps import create_agent_runner

pytestmark = pytest.mark.anyio


def _agent_dirs() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("jigs-pi-agent-*")}


async def test_create_agent_runner_refuses_pi_and_leaves_nothing(
    worktree: Path, run_meta: RunMetadata, jigs_data_dir: Path, fake_pi: Path
) -> None:
    descriptor = {
        "kind": "pi",
        "model": {
            "type": "openai-compatible",
            "base_url": "http://127.0.0.1:9/v1",
            "model": "m",
            "api_key_env": "JIGS_TEST_UNSET_KEY",  # unset: a check that ran would fail first
        },
    }
    homes = _agent_dirs()
    with observe_launches() as launched:
        with pytest.raises(ModelNotAvailableError, match="run_agent"):
            await create_agent_runner(descriptor, cwd=worktree, run=run_meta)
        with pytest.raises(ModelNotAvailableError, match="run_agent"):
            async with create_agent_runner(descriptor, cwd=worktree, run=run_meta):
                pass  # pragma: no cover
    assert launched == []
    assert not live_groups()
    assert not lock_path_for(worktree.resolve()).exists()
    assert not (jigs_data_dir / "runs").exists()  # no state dir, no session store
    assert _agent_dirs() == homes  # no private agent dir
