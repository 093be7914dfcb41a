"""A conformance kit any harness distribution runs against itself.

::

    from jigs_testing.conformance import check_harness

    async def test_my_kind_conforms(tmp_path):
        await check_harness("mykind", tmp_path=tmp_path)

It uses plain ``assert`` (no pytest import) and drives the real pipeline with the kind's real CLI
against :class:`~jigs_testing.ModelServer`. It checks that: the descriptor round-trips through
JSON; every process the kind launches (in a scratch ``HOME``) gets nothing outside the allowlist
(canaries planted in the host environment never arrive); the worktree lock is taken while the agent
runs and released after; ``close()`` is idempotent and leaves no process of the step (found by its
working directory, since the step's processes live in a namespace of their own); a worker process
SIGKILLed, SIGTERMed or SIGINTed mid-turn takes every process of its step along (detached ones
included) and frees the worktree; the agent's own shell sees no process outside its step and no
host canary (``DemoPlan.run_command`` scripts that shell); a stale ``resume`` raises
:class:`~jigs.errors.AgentSessionError` before any process starts; kinds without a model refuse
``create_agent_runner`` with :class:`~jigs.errors.ModelNotAvailableError`, leaving nothing behind.
When the descriptor names a model key (:meth:`~jigs.plugin.Harness.model_route`), the key's value
reaches no launched process (environment or argv) and, while the agent's tool runs, no other
process the worker can see holds it in ``/proc/<pid>/environ`` or ``cmdline``: the kind must
give its CLI the step's proxied endpoint (``ctx.model_endpoint``), never the key.

``make_descriptor(server)`` overrides the descriptor of the kind's ``demo_plan`` (see
:mod:`jigs_testing.plan`); the plan's host variables and ``agents_env`` still apply.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from jigs._lock import worktree_locked
from jigs.descriptors import HarnessDescriptor

from jigs_testing._environ import patched_environ
from jigs_testing.plan import demo_plan_of, has_demo_plan, how_to_write_demo_plan

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
    from jigs import harnesses
    from jigs._paths import data_dir
    from jigs._proctree import processes_under
    from jigs._registry import default_registry
    from jigs._types import AgentSessionRef, RunMetadata
    from jigs.env import BASE_ENV, LOCALE_ENV
    from jigs.errors import AgentSessionError, ModelNotAvailableError
    from jigs.executables import installed_dir
    from jigs.models import generate_text
    from jigs.processes import group_alive, observe_launches, value_digest
    from jigs.steps import create_agent_runner, run_agent
    from structlog.testing import capture_logs

    from jigs_testing import ModelServer

    harness = default_registry().get(kind)
    async with ModelServer() as server:
        assert has_demo_plan(harness), f"{kind}: {how_to_write_demo_plan(kind)}"
        plan = demo_plan_of(harness, server)
        assert plan is not None, f"{kind}: demo_plan(server) returned None; return a DemoPlan"
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

            # 8. a killed, terminated or interrupted worker takes its whole step along
            await _check_worker_death(kind, descriptor, plan, server, run=run, tmp_path=tmp_path)

            # 9. the agent sees only its own step's processes, and no host environment
            await _check_process_view(kind, descriptor, plan, server, run=run, tmp_path=tmp_path)

            # 10. config files planted in the worktree and HOME change nothing
            await _check_planted_config(
                kind, harness, descriptor, plan, server, run=run, tmp_path=tmp_path, home=home
            )

            # 11. one typed event stream: the kind's decoder reports the turn as it happens
            await _check_event_stream(kind, descriptor, plan, server, run=run, tmp_path=tmp_path)

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
            # 5. nothing the kind started is left running: the launched group (the isolation's
            # outer process) and every process of the step, found by its working directory
            assert not group_alive(launch.pgid), f"{kind}: {launch.argv[0]} outlived close()"
            left = processes_under(launch.cwd)
            assert not left, f"{kind}: {launch.argv[0]}'s step left processes: {_describe(left)}"


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


#: Seconds within which a signalled worker's step must have no process left (the issue's bound).
DEATH_BOUND = 2.0
#: Seconds the kit waits for the agent's shell to have started every descendant.
START_BOUND = 60.0


def _shell_prompt(kind: str, plan: Any, server: Any, command: str) -> str:
    assert plan.run_command is not None, (
        f"{kind}: DemoPlan.run_command is not set; the isolation checks need the agent to run "
        f"a command with its own shell tool (see jigs_testing.plan.scripted_command)"
    )
    prompt: str = plan.run_command(server, command)
    return prompt


async def _check_worker_death(
    kind: str,
    descriptor: HarnessDescriptor,
    plan: Any,
    server: Any,
    *,
    run: Any,
    tmp_path: Path,
) -> None:
    """A worker process running one step of the kind is SIGKILLed, SIGTERMed and SIGINTed
    mid-turn while the agent, through its own shell tool, runs ``sleep``, ``setsid sleep``,
    ``nohup sleep &`` and a double-forked ``sleep``: within :data:`DEATH_BOUND` seconds no
    process of the step is left, and the next step on the same worktree starts (the next
    worker's step, and finally one in this process that must write a file).

    Under the ``tree`` fallback a SIGKILLed worker leaves its step's descendants running (the
    documented limit); the kit then asserts the worktree stays locked while they live, and
    kills them itself."""
    import os
    import shlex
    import signal
    import subprocess
    import sys
    import time

    import anyio
    from jigs._isolation import isolation
    from jigs._logging import logger
    from jigs._proctree import (
        kill_procs,
        namespace_members,
        pid_namespace,
        processes_under,
    )
    from jigs.steps import run_agent

    from jigs_testing._isolation_probe import DESCENDANTS, SLEEPERS, WORKER_SCRIPT, sleepers

    mode = isolation().mode
    tree = _fresh_worktree(tmp_path, "worker-death")
    # a script file, not an inline command: CLIs refuse some inline forms (Claude Code blocks a
    # command that starts with a long sleep)
    script = tmp_path / "descendants.sh"
    script.write_text(DESCENDANTS + "\n")
    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
        what = f"a worker {sig.name}ed mid-turn"
        args = {
            "descriptor": json.dumps(descriptor.to_data()),
            "cwd": str(tree),
            "prompt": _shell_prompt(kind, plan, server, f"sh {shlex.quote(str(script))}"),
            "run": run.workflow_run_id,
            "agents_env": list(plan.agents_env),
        }
        log = tmp_path / f"worker-{sig.name}.log"
        with log.open("wb") as err:
            worker = await anyio.open_process(
                [sys.executable, "-c", WORKER_SCRIPT, json.dumps(args)],
                cwd=tmp_path,  # outside the worktree: only the step's processes work in it
                stdin=subprocess.DEVNULL,
                stdout=err,
                stderr=err,
                start_new_session=True,
            )
        try:
            deadline = time.monotonic() + START_BOUND
            while len(sleepers(processes_under(tree))) < SLEEPERS:
                if worker.returncode is not None:
                    raise AssertionError(
                        f"{kind}: the step of the worker to be {sig.name}ed ended (exit "
                        f"{worker.returncode}) before its agent started every descendant; a "
                        f"refusal here means the previous step's lock outlived it: "
                        f"{log.read_text(errors='replace')[-2000:]}"
                    )
                assert time.monotonic() < deadline, (
                    f"{kind}: the agent's shell did not start {SLEEPERS} sleeps in "
                    f"{START_BOUND:.0f}s (saw {sleepers(processes_under(tree))}): "
                    f"{log.read_text(errors='replace')[-2000:]}"
                )
                await anyio.sleep(0.05)
            step = processes_under(tree)
            # in a namespace, also every member of the step's PID namespace (wherever it works)
            namespace = pid_namespace(sleepers(step)[0][0]) if mode == "namespace" else None
            if namespace is not None:
                assert namespace != pid_namespace(os.getpid()), (
                    f"{kind}: the agent's commands run in the worker's PID namespace"
                )
                step = sorted(set(step) | set(namespace_members(namespace)))
            worker.send_signal(sig)
            signalled = time.monotonic()
            while _remaining(step, tree, namespace) and time.monotonic() - signalled < DEATH_BOUND:
                await anyio.sleep(0.02)
            left = _remaining(step, tree, namespace)
            logger.info(
                "conformance.worker_signalled",
                kind=kind,
                signal=sig.name,
                isolation=mode,
                step_processes=len(step),
                left=len(left),
                seconds=round(time.monotonic() - signalled, 3),
            )
            if mode == "tree" and sig is signal.SIGKILL:
                # the fallback's documented limit: the lock lives as long as they do
                assert left, f"{kind}: tree mode unexpectedly reaped a SIGKILLed worker's step"
                assert worktree_locked(tree), (
                    f"{kind}: {what} left {len(left)} processes and the worktree unlocked"
                )
                kill_procs(left)
            else:
                assert not left, (
                    f"{kind}: {what} left {len(left)} processes of its step running "
                    f"{DEATH_BOUND:.0f}s after the signal: {_describe(left)}"
                )
            with anyio.move_on_after(5.0):
                await worker.wait()
            assert worker.returncode is not None, f"{kind}: the worker outlived {sig.name} by 5s"
        finally:
            if worker.returncode is None:
                worker.kill()
                await worker.wait()
            server.script.skip_remaining()

    # the next step on the worktree starts and does its work
    done = await run_agent(
        harness=descriptor,
        cwd=tree,
        prompt=plan.write_file(server, "after-death.txt", "after"),
        run=run,
        agents_env=plan.agents_env,
    )
    server.script.skip_remaining()
    assert done.text, f"{kind}: the step after the signalled workers returned no text"
    assert (tree / "after-death.txt").read_text() == "after", (
        f"{kind}: the step after the signalled workers did not write its file"
    )


def _remaining(
    step: list[tuple[int, str]], tree: Path, namespace: str | None
) -> list[tuple[int, str]]:
    """What is left of a step: its recorded processes, anything working in its worktree, and
    (when it had one) any member of its PID namespace."""
    from jigs._proctree import live, namespace_members, processes_under

    found = set(live(step)) | set(processes_under(tree))
    if namespace is not None:
        found |= set(namespace_members(namespace))
    return sorted(found)


def _describe(procs: list[tuple[int, str]]) -> str:
    names = []
    for pid, _ in procs:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            argv = "?"
        names.append(f"{pid}: {argv[:80]}")
    return "; ".join(names)


async def _check_process_view(
    kind: str,
    descriptor: HarnessDescriptor,
    plan: Any,
    server: Any,
    *,
    run: Any,
    tmp_path: Path,
) -> None:
    """The agent's shell lists every process in ``/proc`` and reads each one's environment;
    the listing reaches the model in the next request (for a kind without a model, the turn's
    answer). Under the ``namespace`` isolation it shows only processes started after the step
    began (none of the worker's, none of the host's), its own environment readable, and no
    canary of :data:`CANARIES` by name or value anywhere. Under the ``tree`` fallback the agent
    does see the host's processes (the documented limit), which the kit asserts instead."""
    from jigs._isolation import isolation
    from jigs.processes import value_digest
    from jigs.steps import run_agent

    from jigs_testing._isolation_probe import boot_ticks, parse_view, view_command

    mode = isolation().mode
    tree = _fresh_worktree(tmp_path, "process-view")
    before = len(server.model_requests)
    began = boot_ticks() - 1  # start times are whole ticks
    command = view_command(value_digest(v) for v in CANARIES.values())
    turn = await run_agent(
        harness=descriptor,
        cwd=tree,
        prompt=_shell_prompt(kind, plan, server, command),
        run=run,
        agents_env=plan.agents_env,
    )
    server.script.skip_remaining()
    requests = server.model_requests[before:]
    texts = [r.text() for r in requests]
    where = "the model's requests" if requests else "the turn's answer"
    listing = next((v for v in map(parse_view, texts) if v is not None), None)
    if listing is None and not requests:
        listing = parse_view(turn.text)
    assert listing is not None, f"{kind}: the agent's process listing never reached {where}"
    assert listing, f"{kind}: the agent's shell saw no process at all in /proc"
    everything = "\n".join([*texts, turn.text])
    for name, value in CANARIES.items():
        assert value not in everything, f"{kind}: the canary {name}'s value reached {where}"
    found = {p.canaries for p in listing} - {"none", "-"}
    readable = [p for p in listing if p.environ.isdigit() and int(p.environ) > 0]
    older = [p for p in listing if p.start < began]
    if mode == "namespace":
        assert not found, f"{kind}: the agent read host canaries in /proc/*/environ: {found}"
        assert readable, f"{kind}: the agent could not read even its own shell's environ"
        assert any(p.pid == 1 for p in listing), (
            f"{kind}: the agent's /proc has no pid 1: it is not a PID namespace of the step"
        )
        assert not older, (
            f"{kind}: the agent sees {len(older)} processes older than its step: "
            f"{[(p.pid, p.name) for p in older][:10]}"
        )
    else:
        assert older, f"{kind}: under the {mode} fallback the agent should see the host"


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

    from jigs_testing import ModelServer

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


async def _check_event_stream(
    kind: str,
    descriptor: HarnessDescriptor,
    plan: Any,
    server: Any,
    *,
    run: Any,
    tmp_path: Path,
) -> None:
    """A turn with one tool call yields, in order: the session, a tool call started then
    finished (with its name), text deltas whose concatenation is the final text, usage, and
    exactly one ``turn-completed`` last; the same events land in the step log."""
    from jigs._paths import run_state_dir
    from jigs._steplog import read_events, step_logs
    from jigs.events import (
        SessionStarted,
        TextDelta,
        ToolCallFinished,
        ToolCallStarted,
        TurnCompleted,
        UsageUpdated,
    )
    from jigs.steps import run_agent

    tree = _fresh_worktree(tmp_path, "events")
    seen: list[Any] = []
    before = {p.name for p in step_logs(run_state_dir(run.workflow_run_id, kind).parent)}
    result = await run_agent(
        harness=descriptor,
        cwd=tree,
        prompt=plan.write_file(server, "events.txt", "events"),
        run=run,
        agents_env=plan.agents_env,
        on_event=seen.append,
    )
    server.script.skip_remaining()
    types = [type(e) for e in seen]
    assert SessionStarted in types, f"{kind}: no session event"
    assert ToolCallStarted in types, f"{kind}: no tool-call-started event for the tool call"
    assert ToolCallFinished in types, f"{kind}: no tool-call-finished event for the tool call"
    assert types.index(ToolCallStarted) < types.index(ToolCallFinished), (
        f"{kind}: the tool call finished before it started: {[t.__name__ for t in types]}"
    )
    started = next(e for e in seen if isinstance(e, ToolCallStarted))
    assert started.name, f"{kind}: a tool call without a name"
    assert UsageUpdated in types, f"{kind}: no usage event"
    order = [t.__name__ for t in types]
    assert types[-1] is TurnCompleted, f"{kind}: the stream must end with turn-completed: {order}"
    assert types.count(TurnCompleted) == 1, f"{kind}: more than one turn-completed: {order}"
    streamed = "".join(e.text for e in seen if isinstance(e, TextDelta))
    assert streamed.strip() == result.text.strip(), (
        f"{kind}: the text deltas ({streamed!r}) do not add up to the final text ({result.text!r})"
    )
    session = next(e for e in seen if isinstance(e, SessionStarted)).session_id
    assert result.session is not None, f"{kind}: no session returned"
    assert session == result.session.id, f"{kind}: the session event names {session}"
    logs = [
        path
        for path in step_logs(run_state_dir(run.workflow_run_id, kind).parent)
        if path.name not in before
    ]
    assert len(logs) == 1, f"{kind}: expected one new step log, found {len(logs)}"
    logged = [e["type"] for e in read_events(logs[0])]
    assert logged == [e.type for e in seen], (
        f"{kind}: the step log holds {logged}, the callback saw {[e.type for e in seen]}"
    )
