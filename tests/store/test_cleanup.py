"""Private homes and temporary files are removed at close on every path: a finished, a
crashed and a cancelled echo step leave no private dir, no temporary file, no live lock --
and the session a crashed step had is still stored."""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio
import pytest
from jigs import RunMetadata
from jigs.errors import AgentCrashedError
from jigs.policy._lock import worktree_locked
from jigs.steps import run_agent
from jigs_harness_echo import EchoDescriptor


@pytest.fixture
def scratch_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where ``tempfile`` (and so ``HarnessContext.private_dir``) creates directories."""
    path = tmp_path / "tmp"
    path.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    return path


def _leftovers(scratch: Path, data: Path, store: Path) -> list[str]:
    found = [p.name for p in scratch.iterdir()]
    for root in (data, store):
        found += [
            str(p)
            for p in root.rglob("*")
            if p.name.endswith(".tmp") or ".jigs-tmp-" in p.name or ".jigs-" in p.name
        ]
    return found


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["finished", "crashed", "cancelled"])
async def test_nothing_private_survives_close(
    path: str,
    scratch_tmp: Path,
    worktree: Path,
    jigs_data_dir: Path,
    tmp_path: Path,
    run_meta: RunMetadata,
) -> None:
    store = tmp_path / "store"
    seen_private: list[str] = []

    async def watch(_event: object) -> None:
        seen_private.extend(p.name for p in scratch_tmp.iterdir())

    async def step(prompt: str) -> object:
        return await run_agent(
            harness=EchoDescriptor(),
            cwd=worktree,
            prompt=prompt,
            run=run_meta,
            on_event=watch,
            session_store=f"local:{store}",
        )

    if path == "finished":
        await step("hello")
    elif path == "crashed":
        with pytest.raises(AgentCrashedError) as info:
            await step("crash")
        assert info.value.session_id
    else:
        with anyio.move_on_after(1.5) as scope:
            await step("sleep:30")
        assert scope.cancelled_caught
    assert any(name.startswith("jigs-echo-") for name in seen_private), (
        "the echo step made no private dir: the test would prove nothing"
    )
    assert _leftovers(scratch_tmp, jigs_data_dir, store) == []
    assert not worktree_locked(worktree)
