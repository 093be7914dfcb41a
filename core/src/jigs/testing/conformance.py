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
When the descriptor names a model key (:meth:`~jigs.plugin.Harness.model_route`), the key's value
reaches no launched process (environment or argv) and, while the agent's tool runs, no other
process the worker can see holds it in ``/proc/<pid>/environ`` or ``cmdline``: the kind must
give its CLI the step's proxied endpoint (``ctx.model_endpoint``), never the key.

``make_descriptor(server)`` overrides the descriptor of the kind's
:meth:`~jigs.plugin.Harness.demo_plan`; the plan's host variables and ``agents_env`` still apply.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

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
            | {"TRACEPARENT"}  # set by the core when the step is traced
        )

        # a named model key gets a value unique to this run, so a process holding it can only
        # have got it from this run (never a dummy another test or service also uses)
        route = harness.model_route(descriptor)
        key_env = route.key_env if route is not None else ""
        key = f"sk-jigs-conformance-{uuid.uuid4().hex}" if route is not None else None
        model_key = {key_env: key} if key is not None else {}

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
            patched_environ({**scratch, **CANARIES, **plan.host_env, **model_key}),
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

            # 6. resuming forks: a retried step sees exactly the history its ref names
            await _check_fork_on_resume(kind, descriptor, plan, server, run=run, tmp_path=tmp_path)

            # 7. the core's turn policy holds for this kind
            await _check_turn_policy(
                kind, harness, descriptor, plan, server, run=run, tmp_path=tmp_path
            )

        # 4. environments: built from empty; no canary arrives; a named model key never does
        assert launches, f"{kind}: no process was launched through jigs.processes"
        for launch in launches:
            if key is not None:
                assert value_digest(key) not in launch.value_digests, (
                    f"{kind}: the model key (${key_env}) is in the environment of "
                    f"{launch.argv[0]}; give the CLI ctx.model_endpoint instead"
                )
                assert not any(key in arg for arg in launch.argv), (
                    f"{kind}: the model key (${key_env}) is on the command line of {launch.argv[0]}"
                )
            leaked = {n for n in launch.env_names if n not in allowed | LOCALE_ENV}
            assert not leaked, f"{kind}: {launch.argv[0]} got names outside the allowlist: {leaked}"
            arrived = [n for n, v in CANARIES.items() if value_digest(v) in launch.value_digests]
            assert not arrived, f"{kind}: canary values arrived in {launch.argv[0]}: {arrived}"
            # 5. nothing the kind started is left running
            assert not group_alive(launch.pgid), f"{kind}: {launch.argv[0]} outlived close()"


def _processes_holding(value: str) -> list[str]:
    """``/proc/<pid>/environ`` and ``cmdline`` files (other than the worker's own) that hold
    ``value``: what any process of the worker's user could read. Empty where there is no
    ``/proc``."""
    import os

    needle = value.encode()
    found: list[str] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        for name in ("environ", "cmdline"):
            try:
                data = (entry / name).read_bytes()
            except OSError:
                continue
            if needle in data:
                try:
                    argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:160]
                except OSError:
                    argv = "?"
                found.append(f"{entry}/{name} ({argv.strip()})")
    return found


#: The idle_timeout the kit gives a hanging turn; it must end within this + :data:`SLACK`.
HANG_IDLE = 3.0
SLACK = 5.0


async def _expect_timeout(kind: str, what: str, call: Callable[[], Awaitable[object]]) -> None:
    import time

    from jigs.errors import AgentTimeoutError
    from jigs.processes import live_groups

    started = time.monotonic()
    try:
        await call()
    except AgentTimeoutError:
        pass
    else:
        raise AssertionError(f"{kind}: {what} did not end in AgentTimeoutError")
    took = time.monotonic() - started
    assert took < HANG_IDLE + SLACK, f"{kind}: {what} took {took:.1f}s to end"
    assert not live_groups(), f"{kind}: {what} left processes: {live_groups()}"


async def _check_turn_policy(
    kind: str,
    harness: Any,
    descriptor: HarnessDescriptor,
    plan: Any,
    server: Any,
    *,
    run: Any,
    tmp_path: Path,
) -> None:
    """A hung endpoint and a hung CLI end in the one timeout error in time with the lock
    released and nothing left running; ``max_turns`` (where the kind supports it) stops a turn
    with an error carrying a session that ``agent_session`` resumes; usage is reported."""
    import os

    from jigs.errors import AgentLimitError
    from jigs.executables import Resolved
    from jigs.steps import agent_session, run_agent

    quick = descriptor.model_copy(update={"idle_timeout": HANG_IDLE, "turn_timeout": 60.0})

    # a hung model endpoint
    tree = _fresh_worktree(tmp_path, "hung-endpoint")
    prompt = plan.hang(server)
    await _expect_timeout(
        kind,
        "a turn whose model endpoint hangs",
        lambda: run_agent(
            harness=quick, cwd=tree, prompt=prompt, run=run, agents_env=plan.agents_env
        ),
    )
    assert not worktree_locked(tree), f"{kind}: a timed-out turn left the worktree locked"
    server.script.skip_remaining()

    # a hung CLI: the kind must launch what resolve_executable returns
    hang = tmp_path / "hung-cli"
    hang.write_text("#!/bin/sh\nexec sleep 600\n")
    os.chmod(hang, 0o755)
    tree = _fresh_worktree(tmp_path, "hung-cli")
    harness.resolve_executable = lambda env: Resolved(hang, "conformance: a CLI that hangs")
    try:
        await _expect_timeout(
            kind,
            "a turn whose CLI hangs",
            lambda: run_agent(
                harness=quick, cwd=tree, prompt="hello", run=run, agents_env=plan.agents_env
            ),
        )
    finally:
        del harness.resolve_executable
    assert not worktree_locked(tree), f"{kind}: a hung CLI left the worktree locked"

    # usage on success; while the agent's tool runs, no process the worker can see holds the key
    route = harness.model_route(descriptor)
    key_env = route.key_env if route is not None else ""
    key = os.environ.get(key_env) if route is not None else None
    holders: list[str] = []
    scanned: list[int] = []

    def scan(event: object) -> None:
        from jigs.events import ToolCallFinished, ToolCallStarted

        if key and isinstance(event, ToolCallStarted | ToolCallFinished):
            scanned.append(1)
            holders.extend(_processes_holding(key))

    tree = _fresh_worktree(tmp_path, "usage")
    done = await run_agent(
        harness=descriptor,
        cwd=tree,
        prompt=plan.write_file(server, "usage.txt", "usage"),
        run=run,
        agents_env=plan.agents_env,
        on_event=scan,
    )
    if key:
        assert scanned, f"{kind}: the write_file turn reported no tool call event"
        assert not holders, (
            f"{kind}: while the agent ran, the model key (${key_env}) was readable in "
            f"{sorted(set(holders))}; give the CLI ctx.model_endpoint instead"
        )
    usage = done.usage
    assert usage.input_tokens is not None or usage.output_tokens is not None, (
        f"{kind}: a successful turn reported no usage"
    )
    server.script.skip_remaining()

    # max_turns: stopped with a session that agent_session continues
    if "max_turns" not in type(descriptor).supported_limits:
        return
    limited = type(descriptor).from_data({**descriptor.to_data(), "max_turns": 1})
    tree = _fresh_worktree(tmp_path, "max-turns")
    try:
        await run_agent(
            harness=limited,
            cwd=tree,
            prompt=plan.write_file(server, "limited.txt", "limited"),
            run=run,
            agents_env=plan.agents_env,
        )
    except AgentLimitError as exc:
        stopped = exc
    else:
        raise AssertionError(f"{kind}: a turn past max_turns=1 did not raise AgentLimitError")
    assert stopped.limit == "max_turns", f"{kind}: AgentLimitError.limit is {stopped.limit}"
    assert stopped.session is not None, f"{kind}: AgentLimitError carries no session"
    assert stopped.usage is not None, f"{kind}: AgentLimitError carries no usage"
    assert not worktree_locked(tree), f"{kind}: a stopped turn left the worktree locked"
    server.script.skip_remaining()
    before = len(server.model_requests)
    resumed = await agent_session(
        harness=limited,
        cwd=tree,
        run=run,
        session=stopped.session,
        resume_prompt=plan.recall(server),
        fresh_prompt="(a fresh start is a failure of this check)",
        agents_env=plan.agents_env,
    )
    assert "I remember" in resumed.text or kind == "echo", (
        f"{kind}: the resumed turn did not answer from the scripted recall: {resumed.text!r}"
    )
    if kind != "echo":
        request = server.model_requests[before]
        assert request.message_count > 1, (
            f"{kind}: resuming the stopped session sent no earlier history"
        )
    assert resumed.session is not None, f"{kind}: the resumed turn has no session"


async def _check_fork_on_resume(
    kind: str,
    descriptor: HarnessDescriptor,
    plan: Any,
    server: Any,
    *,
    run: Any,
    tmp_path: Path,
) -> None:
    """Two steps resumed from the same ref (a retry after a killed attempt, say) start from the
    same state: the second does not see what the first added, and each returns a new ref."""
    from jigs.steps import run_agent

    tree = _fresh_worktree(tmp_path, "fork")
    first = await run_agent(
        harness=descriptor,
        cwd=tree,
        prompt=plan.write_file(server, "fork.txt", "fork"),
        run=run,
        agents_env=plan.agents_env,
    )
    assert first.session is not None, f"{kind}: the first step returned no session"
    server.script.skip_remaining()
    answers: list[tuple[str, int | None]] = []
    for _ in range(2):
        before = len(server.model_requests)
        again = await run_agent(
            harness=descriptor,
            cwd=tree,
            prompt=plan.recall(server),
            run=run,
            resume=first.session,
            agents_env=plan.agents_env,
        )
        requests = server.model_requests[before:]
        count = requests[0].message_count if requests else None
        answers.append((again.text, count))
        assert again.session is not None, f"{kind}: a resumed step returned no session"
        assert again.session.id != first.session.id, (
            f"{kind}: a resumed step returned the ref it resumed; it must fork (a new id)"
        )
        server.script.skip_remaining()
    assert answers[0] == answers[1], (
        f"{kind}: two steps resumed from one ref saw different histories {answers}: the first "
        f"step wrote into the resumed session instead of a fork"
    )
