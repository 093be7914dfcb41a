"""The session store cannot be dodged.

- A save that fails at close (the agent plants a file where the run's store directory belongs)
  fails the step with :class:`SessionSaveError`; the ref handed out while the step was open
  names a manifest that is not in the store, and a ref without a digest is refused: neither
  resumes the local copy.
- Codex and Pi keep their session files per run, not per worktree: a resume in a sibling
  worktree (same run, the first worktree still there) with an edited local copy is refused,
  nothing is launched; the unedited copy resumes.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from jigs import AgentSessionRef, RunMetadata
from jigs.errors import AgentSessionError, SessionSaveError
from jigs.policy._paths import _safe
from jigs.processes import observe_launches
from jigs.registry._registry import default_registry
from jigs.steps import create_agent_runner, run_agent
from jigs_testing import ModelServer
from jigs_testing._environ import patched_environ

pytestmark = pytest.mark.anyio


@contextmanager
def _no_launch() -> Iterator[None]:
    with observe_launches() as launches:
        yield
    assert not launches, f"something was launched: {launches[0].argv[:2]}"


@pytest.fixture
def scratch_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("IS_SANDBOX", "1")
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    return home


def _sibling(tmp_path: Path, name: str) -> Path:
    import subprocess

    path = tmp_path / name
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


@pytest.mark.parametrize(
    "kind", ["echo", pytest.param("codex", marks=pytest.mark.real_cli("codex"))]
)
async def test_a_store_save_the_agent_breaks_fails_the_step(
    kind: str,
    tmp_path: Path,
    worktree: Path,
    jigs_data_dir: Path,
    scratch_home: Path,
    require_cli: Callable[[str], Path],
) -> None:
    if kind != "echo":
        require_cli(kind)
    run = RunMetadata(workflow_run_id=f"dodge-{kind}-{uuid.uuid4().hex[:8]}")
    store_dir = jigs_data_dir / "store"
    planted = store_dir / _safe(run.workflow_run_id)
    # the agent plants a file where the run's store directory will be
    command = f"mkdir -p {store_dir} && echo dodge > {planted} && echo PLANTED"
    async with ModelServer() as server:
        plan = default_registry().get(kind).demo_plan(server)  # type: ignore[attr-defined]
        assert plan.run_command is not None
        # the sandbox hides the data dir from the agent (the containment check proves it):
        # only an unsandboxed step's agent can break the store's save, which must then fail it
        plan = dataclasses.replace(plan, descriptor=plan.descriptor.replace(sandbox="off"))
        with patched_environ(dict(plan.host_env)):
            # through run_agent: the step fails, no result (so no ref) comes out
            with pytest.raises(SessionSaveError) as info:
                await run_agent(
                    harness=plan.descriptor,
                    cwd=worktree,
                    prompt=plan.run_command(server, command),
                    run=run,
                    agents_env=list(plan.agents_env),
                )
            assert planted.is_file()
            assert info.value.session_id
            assert "could not be saved to the session store" in str(info.value)
            assert str(jigs_data_dir) in str(info.value)  # says which store

            # through a runner: leaving the block raises; the ref it handed out is unresumable
            from jigs.models import generate_text

            ref: AgentSessionRef | None = None
            runner = await create_agent_runner(
                plan.descriptor, cwd=worktree, run=run, agents_env=list(plan.agents_env)
            )
            result = await generate_text(
                runner.model, prompt=plan.run_command(server, "echo again")
            )
            ref = runner.session_from(result)
            with pytest.raises(SessionSaveError):
                await runner.close()
            assert ref is not None
            assert ref.digest is not None
            after_close = runner.session_from(result)
            assert after_close is not None
            assert after_close.digest is None  # nothing was stored

            planted.unlink()  # the store works again: still, neither ref resumes
            for bad in (ref, after_close):
                with _no_launch(), pytest.raises(AgentSessionError, match="cannot be resumed"):
                    await run_agent(
                        harness=plan.descriptor,
                        cwd=worktree,
                        prompt="continue",
                        run=run,
                        resume=bad,
                        agents_env=list(plan.agents_env),
                    )


def _local_copy(data_dir: Path, session_id: str) -> Path:
    (found,) = [p for p in (data_dir / "runs").rglob(f"*{session_id}.jsonl") if p.is_file()]
    return found


@pytest.mark.parametrize(
    "kind", [pytest.param(k, marks=pytest.mark.real_cli(k)) for k in ("codex", "pi")]
)
async def test_a_sibling_worktree_resume_with_an_edited_local_copy_is_refused(
    kind: str,
    tmp_path: Path,
    worktree: Path,
    jigs_data_dir: Path,
    scratch_home: Path,
    require_cli: Callable[[str], Path],
) -> None:
    require_cli(kind)
    run = RunMetadata(workflow_run_id=f"sibling-{kind}-{uuid.uuid4().hex[:8]}")
    sibling = _sibling(tmp_path, "sibling")
    async with ModelServer() as server:
        plan: Any = default_registry().get(kind).demo_plan(server)  # type: ignore[attr-defined]
        common: dict[str, Any] = {"run": run, "agents_env": list(plan.agents_env)}
        with patched_environ(dict(plan.host_env)):
            first = await run_agent(
                harness=plan.descriptor,
                cwd=worktree,
                prompt=plan.write_file(server, "notes.txt", "written in the first worktree"),
                **common,
            )
            ref = first.session
            assert ref is not None
            assert ref.digest is not None
            local = _local_copy(jigs_data_dir, ref.id)
            original = local.read_bytes()

            # the edited local copy, resumed in the sibling worktree: refused, nothing starts
            local.write_bytes(original.replace(b"written in the first worktree", b"EDITED"))
            assert local.read_bytes() != original
            before = len(server.model_requests)
            with _no_launch(), pytest.raises(AgentSessionError) as info:
                await run_agent(
                    harness=plan.descriptor, cwd=sibling, prompt="continue", resume=ref, **common
                )
            assert "not the snapshot the ref names" in str(info.value)
            assert len(server.model_requests) == before

            # a copy appended to (not the same bytes either) is refused the same way
            local.write_bytes(original + b'{"type":"planted"}\n')
            with _no_launch(), pytest.raises(AgentSessionError):
                await run_agent(
                    harness=plan.descriptor, cwd=sibling, prompt="continue", resume=ref, **common
                )

            # the copy the step left resumes in the sibling worktree
            local.write_bytes(original)
            second = await run_agent(
                harness=plan.descriptor,
                cwd=sibling,
                prompt=plan.recall(server),
                resume=ref,
                **common,
            )
    assert "I remember" in second.text, second.text
