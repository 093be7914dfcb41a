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

            # 6. resuming forks: a retried step sees exactly the history its ref names
            await _check_fork_on_resume(kind, descriptor, plan, server, run=run, tmp_path=tmp_path)

            # 7. the core's turn policy holds for this kind
            await _check_turn_policy(
                kind, harness, descriptor, plan, server, run=run, tmp_path=tmp_path
            )

            # 8. config files planted in the worktree and HOME change nothing
            await _check_planted_config(
                kind, harness, descriptor, plan, server, run=run, tmp_path=tmp_path, home=home
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

    # usage on success
    tree = _fresh_worktree(tmp_path, "usage")
    done = await run_agent(
        harness=descriptor,
        cwd=tree,
        prompt=plan.write_file(server, "usage.txt", "usage"),
        run=run,
        agents_env=plan.agents_env,
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


#: The variable a planted config file tries to inject into the agent's commands.
PLANTED_ENV = "JIGS_PLANTED_CANARY"


async def _check_planted_config(
    kind: str,
    harness: Any,
    descriptor: HarnessDescriptor,
    plan: Any,
    server: Any,
    *,
    run: Any,
    tmp_path: Path,
    home: Path,
) -> None:
    """A hostile version of every config file the kind declares (:meth:`Harness.config_files`),
    planted in the worktree and in HOME, changes nothing: no hook, helper, notifier, MCP server
    or extension runs (no marker file), no request reaches the planted endpoint, and the
    planted variable is absent from the agent's shell (a scripted tool call dumps its env, so
    a planted permission or sandbox rule that stops the command fails too). A step may instead
    be refused with :class:`~jigs.errors.JitCheckError` naming the file: that file is removed
    and the turn runs again with the rest, until one runs. A path declared more than once is
    planted in rounds (the n-th declaration of each path in round n), so a guard that refuses
    one version does not hide what the CLI would do with another. A kind that declares no file
    passes trivially; one that does not declare (None) fails."""
    from jigs.plugin import ConfigFile
    from jigs.testing import ModelServer

    files: Any = harness.config_files()
    assert files is not None, (
        f"{kind}: Harness.config_files() is not declared; return the config files the CLI reads "
        f"from the worktree and HOME, or () when it reads none"
    )
    if not files:
        return  # the kind declares no config files: nothing can be planted
    assert all(isinstance(f, ConfigFile) for f in files), f"{kind}: config_files() -> ConfigFile"
    assert plan.run_command is not None, (
        f"{kind}: DemoPlan.run_command is needed to prove no planted variable reaches the shell"
    )
    rounds: list[list[Any]] = []
    seen: dict[tuple[str, str], int] = {}
    for config in files:
        key = (config.root, config.path)
        index = seen[key] = seen.get(key, -1) + 1
        if index == len(rounds):
            rounds.append([])
        rounds[index].append(config)
    async with ModelServer() as evil:
        for number, configs in enumerate(rounds):
            await _planted_round(
                kind,
                descriptor,
                plan,
                server,
                evil=evil,
                configs=configs,
                run=run,
                root=tmp_path / f"planted-{number}",
                home=home,
            )


async def _planted_round(
    kind: str,
    descriptor: HarnessDescriptor,
    plan: Any,
    server: Any,
    *,
    evil: Any,
    configs: list[Any],
    run: Any,
    root: Path,
    home: Path,
) -> None:
    """One round of :func:`_check_planted_config`: plant ``configs``, run turns until one runs
    (each refusal removes the files it names), then judge."""
    import shlex

    from jigs.errors import JitCheckError
    from jigs.plugin import Planted
    from jigs.steps import run_agent

    markers = root / "markers"
    markers.mkdir(parents=True)
    tree = _fresh_worktree(root, "worktree")
    planted = Planted(
        markers=markers,
        anthropic_base_url=evil.anthropic_base_url,
        openai_base_url=evil.openai_base_url,
        env_name=PLANTED_ENV,
        env_value=f"planted-{uuid.uuid4().hex[:12]}",
    )
    where: dict[Path, Any] = {}
    for config in configs:
        path = (tree if config.root == "worktree" else home) / config.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(config.hostile(planted), encoding="utf-8")
        where[path] = config
    refused: list[str] = []
    try:
        for attempt in range(len(where) + 1):
            dump = f"planted-env-{attempt}.txt"
            prompt = plan.run_command(server, f"env > {shlex.quote(dump)}")
            try:
                await run_agent(
                    harness=descriptor, cwd=tree, prompt=prompt, run=run, agents_env=plan.agents_env
                )
            except JitCheckError as exc:
                named = [p for p in where if str(p) in str(exc)]
                if not named:
                    raise AssertionError(
                        f"{kind}: a JitCheckError names none of the planted files: {exc}"
                    ) from exc
                for path in named:
                    refused.append(f"{where.pop(path).path}")
                    path.unlink()
                _assert_nothing_planted_ran(kind, markers, evil, f"refused {refused}")
                server.script.skip_remaining()
                continue
            except Exception as exc:
                _assert_nothing_planted_ran(kind, markers, evil, f"failed turn: {exc!r}")
                raise AssertionError(
                    f"{kind}: a turn with planted config files failed: {exc!r}"
                ) from exc
            server.script.skip_remaining()
            _assert_nothing_planted_ran(kind, markers, evil, "a turn that ran")
            shown = tree / dump
            assert shown.exists(), (
                f"{kind}: the scripted shell command did not run with planted config files "
                f"{sorted(c.path for c in where.values())}"
            )
            env = shown.read_text(errors="replace")
            injected = planted.env_name in env or planted.env_value in env
            assert not injected, (
                f"{kind}: a planted config file injected {planted.env_name} into the agent's shell"
            )
            return
    finally:
        for path in where:
            path.unlink(missing_ok=True)
    raise AssertionError(f"{kind}: every attempt was refused ({refused}); no turn ran")


def _assert_nothing_planted_ran(kind: str, markers: Path, evil: Any, when: str) -> None:
    ran = sorted(p.name for p in markers.iterdir())
    assert not ran, f"{kind}: planted config ran ({when}): markers {ran}"
    reached = [r.path for r in evil.requests] + list(evil.proxy_requests)
    assert not reached, f"{kind}: requests reached the planted endpoint ({when}): {reached}"
