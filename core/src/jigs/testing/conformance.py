"""A conformance kit any harness distribution runs against itself.

::

    from jigs.testing.conformance import check_harness

    async def test_my_kind_conforms(tmp_path):
        await check_harness("mykind", tmp_path=tmp_path)

It uses plain ``assert`` (no pytest import) and drives the real pipeline with the kind's real CLI
against :class:`~jigs.testing.ModelServer`. It checks that: the descriptor round-trips through
JSON; every process the kind launches (in a scratch ``HOME``) gets nothing outside the allowlist
(canaries planted in the host environment never arrive); the worktree lock is taken while the agent
runs and released after; ``close()`` is idempotent and leaves no process; a stale ``resume`` raises
:class:`~jigs.errors.AgentSessionError` before any process starts; kinds without a model refuse
``create_agent_runner`` with :class:`~jigs.errors.ModelNotAvailableError`, leaving nothing behind.

``make_descriptor(server)`` overrides the descriptor of the kind's
:meth:`~jigs.plugin.Harness.demo_plan`; the plan's host variables and ``agents_env`` still apply.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

from jigs._lock import worktree_locked
from jigs.descriptors import HarnessDescriptor
from jigs.testing._environ import patched_environ

__all__ = ["CANARIES", "check_harness"]

#: Planted in the host environment; none may reach a launched process.
CANARIES = {
    "ANTHROPIC_API_KEY": "sk-ant-conformance-canary",
    "OPENAI_API_KEY": "sk-conformance-canary",
    "AWS_SECRET_ACCESS_KEY": "conformance-canary",
    "JIGS_CONFORMANCE_CANARY": "conformance-canary",
}


def _fresh_worktree(root: Path, name: str) -> Path:
    path = root / f"{name}-{uuid.uuid4().hex[:6]}"
    path.mkdir(parents=True)
    (path / "README.md").write_text("conformance worktree\n")
    return path


async def check_harness(
    kind: str,
    make_descriptor: Callable[[object], HarnessDescriptor] | None = None,
    *,
    tmp_path: Path,
) -> None:
    """Run every conformance check for ``kind``; raises ``AssertionError`` naming the first
    that fails."""
    from structlog.testing import capture_logs

    from jigs import harnesses
    from jigs._paths import data_dir
    from jigs._registry import default_registry
    from jigs._types import AgentSessionRef, RunMetadata
    from jigs.env import BASE_ENV, LOCALE_ENV
    from jigs.errors import AgentSessionError, ModelNotAvailableError
    from jigs.executables import installed_dir
    from jigs.models import generate_text
    from jigs.processes import group_alive, observe_launches, value_digest
    from jigs.steps import create_agent_runner, run_agent
    from jigs.testing import ModelServer

    harness = default_registry().get(kind)
    async with ModelServer() as server:
        plan = harness.demo_plan(server)
        assert plan is not None, f"{kind}: Harness.demo_plan(server) must return a DemoPlan"
        descriptor = make_descriptor(server) if make_descriptor else plan.descriptor

        # 1. the descriptor round-trips through JSON into the kind's own class
        stored = json.dumps(descriptor.to_data())
        back = harnesses.loads(stored)
        assert type(back) is type(descriptor), f"{kind}: JSON came back as {type(back)}"
        assert back == descriptor, f"{kind}: descriptor changed through JSON: {stored}"
        assert back.describe() == descriptor.describe()

        run = RunMetadata(workflow_run_id=f"conformance-{uuid.uuid4().hex[:8]}")
        allowed = (
            set(BASE_ENV)
            | set(harness.env_allowlist(descriptor))
            | set(harness.sets_env)
            | set(plan.agents_env)
        )

        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        scratch = {
            # the agents' own files (transcripts, shell start-up) stay out of the operator's HOME;
            # jigs' data and installed CLIs stay where they are
            "HOME": str(home),
            "JIGS_DATA_DIR": str(data_dir()),
            "JIGS_CLI_DIR": str(installed_dir(kind).parent),
        }
        with (
            patched_environ({**scratch, **CANARIES, **plan.host_env}),
            observe_launches() as launches,
        ):
            # 2. a stale resume fails before any process starts
            tree = _fresh_worktree(tmp_path, "stale")
            stale = AgentSessionRef(
                harness=kind, id=str(uuid.uuid4()), descriptor=descriptor.describe()
            )
            try:
                await run_agent(
                    harness=descriptor,
                    cwd=tree,
                    prompt="x",
                    run=run,
                    resume=stale,
                    agents_env=plan.agents_env,
                )
            except AgentSessionError as exc:
                refused = exc.session_id
            else:
                raise AssertionError(f"{kind}: a stale resume did not raise AgentSessionError")
            assert refused == stale.id, f"{kind}: AgentSessionError names {refused}"
            assert not launches, f"{kind}: a stale resume launched {launches[0].argv[0]}"
            assert not worktree_locked(tree), f"{kind}: a stale resume left the worktree locked"

            tree = _fresh_worktree(tmp_path, "turn")
            if not harness.has_model:
                # 3a. no model: refused before anything is acquired
                try:
                    await create_agent_runner(descriptor, cwd=tree, run=run)
                except ModelNotAvailableError:
                    pass
                else:
                    raise AssertionError(f"{kind}: create_agent_runner did not refuse")
                assert not launches, f"{kind}: a refused runner launched a process"
                assert not worktree_locked(tree)
                with capture_logs() as logs:
                    turn = await run_agent(
                        harness=descriptor,
                        cwd=tree,
                        prompt=plan.write_file(server, "conformance.txt", "conformance"),
                        run=run,
                        agents_env=plan.agents_env,
                    )
                assert turn.text, f"{kind}: run_agent returned no text"
                events = [e["event"] for e in logs]
                assert "runner.lock.acquired" in events, f"{kind}: run_agent took no lock"
                assert events.index("runner.lock.acquired") < events.index("turn.started"), (
                    f"{kind}: the agent ran before the worktree was locked"
                )
                assert "runner.lock.released" in events, f"{kind}: the lock was not released"
            else:
                # 3b. a model: the lock is held while the runner is open, close is idempotent
                runner = await create_agent_runner(
                    descriptor, cwd=tree, run=run, agents_env=plan.agents_env
                )
                try:
                    assert worktree_locked(tree), f"{kind}: the worktree is not locked while open"
                    prompt = plan.write_file(server, "conformance.txt", "conformance")
                    result = await generate_text(runner.model, prompt=prompt)
                    assert result.text, f"{kind}: generate_text returned no text"
                    assert runner.session_from(result) is not None, f"{kind}: no session"
                finally:
                    await runner.close()
                await runner.close()
                assert not worktree_locked(tree), f"{kind}: close() did not release the lock"
            assert (tree / "conformance.txt").read_text() == "conformance", (
                f"{kind}: the agent's own tool did not write the file"
            )

        # 4. environments: built from empty; no canary arrives
        assert launches, f"{kind}: no process was launched through jigs.processes"
        for launch in launches:
            leaked = {n for n in launch.env_names if n not in allowed | LOCALE_ENV}
            assert not leaked, f"{kind}: {launch.argv[0]} got names outside the allowlist: {leaked}"
            arrived = [n for n, v in CANARIES.items() if value_digest(v) in launch.value_digests]
            assert not arrived, f"{kind}: canary values arrived in {launch.argv[0]}: {arrived}"
            # 5. nothing the kind started is left running
            assert not group_alive(launch.pgid), f"{kind}: {launch.argv[0]} outlived close()"
