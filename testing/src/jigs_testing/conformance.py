"""A conformance kit any harness distribution runs against itself, one named check at a time.

With pytest (enable the opt-in plugin in ``conftest.py``), one test per check, named by it::

    # conftest.py
    pytest_plugins = ["jigs_testing.pytest_plugin"]

    # test_conformance.py
    from jigs_testing.pytest_plugin import conformance_tests

    test_mykind = conformance_tests("mykind")  # test_mykind[stale_resume], ...

Without pytest (or for a chosen subset)::

    from jigs_testing.conformance import check_harness

    report = await check_harness("mykind", tmp_path=tmp, only=["stale_resume", "event_stream"])

It uses plain ``assert`` (no pytest import) and drives the real pipeline with the kind's real CLI
against :class:`~jigs_testing.ModelServer`. :data:`CHECKS` holds every check, in the order a full
run takes them (name -> an async function of one :class:`KitContext`):

- ``descriptor_json``: the descriptor round-trips through JSON into the kind's own class;
- ``stale_resume``: a stale ``resume`` raises :class:`~jigs.errors.AgentSessionError` before any
  process starts, and leaves the worktree unlocked;
- ``no_model_refusal``: a kind without a model refuses ``create_agent_runner`` with
  :class:`~jigs.errors.ModelNotAvailableError`, leaving nothing behind (a kind with a model:
  skipped by design);
- ``lock_and_close``: the worktree lock is taken before the agent runs and released after;
  ``close()`` is idempotent; the agent's own tool wrote the file (a read-only kind: the answer
  holds the content);
- ``fork_on_resume``: two steps resumed from one ref see the same history, each under a new id;
- ``hung_endpoint`` / ``hung_cli``: a turn whose model endpoint or CLI hangs ends in
  :class:`~jigs.errors.AgentTimeoutError` (``limit`` ``"idle_timeout"``, retryable) in time,
  unlocked, nothing left running; the error keeps the session the CLI reported before it hung;
- ``turn_deadline``: a turn that runs past ``turn_timeout`` while never idle for
  ``idle_timeout`` (the agent's shell runs a command that does not end; a kind without a shell:
  its model endpoint hangs) ends in :class:`~jigs.errors.AgentTimeoutError` with ``limit``
  ``"turn_timeout"`` in time, the command's processes gone and the worktree unlocked;
- ``cancelled_turn``: a step cancelled mid-turn (``anyio`` cancellation of the caller) stops
  every process of its step within :data:`DEATH_BOUND` seconds and frees the worktree;
- ``interrupt``: ``interrupt()`` while the agent's shell runs ``sleep 30`` ends the step within
  two seconds with :class:`~jigs.errors.AgentInterrupted` and a session ref, nothing left
  running, the worktree free; resuming the ref shows the interrupted turn to the model;
- ``steer``: ``steer(text)`` during a turn reaches the model with its next request of the same
  turn, or is refused with the kind's reason (:class:`~jigs.errors.SteerRefusedError`);
- ``bad_output``: the kind pointed at fake CLIs, one per round (``crash``: half a line, then
  exit 3; ``garbage``: lines that are not JSON; ``oversized``: a line over
  :data:`jigs.processes.MAX_LINE_BYTES`), each printing a secret from its environment: the step
  raises :class:`~jigs.errors.AgentCrashedError` (its ``returncode``, a redacted
  ``stderr_tail``) or :class:`~jigs.errors.AgentOutputError`, no error text holds the secret,
  the worktree is unlocked, nothing is left running, and a real step on the same worktree then
  works (a kind with an app-server transport meets the faults while its transport reads the
  server's first answer, through the same line reader its turns use);
- ``usage``: a successful turn reports usage and, when the descriptor names a model key
  (:meth:`~jigs.plugin.Harness.model_route`), no process the worker can see holds the key in
  ``/proc/<pid>/environ`` or ``cmdline`` while the agent's tool runs;
- ``model_only``: while a step of the kind runs, requests for what is not one of its route's
  model calls (``ModelRoute.model_calls``: files, batches, admin keys, other methods, below a
  model path) sent to its credential proxy with the step's token are refused with 403 and none
  reaches the model server (a descriptor without a model key: skipped by design);
- ``key_not_relayed``: the model server answers the CLI with an error that quotes the real key:
  the step fails, and neither the raised error (its message, ``stderr_tail``) nor any file the
  CLI or jigs wrote (HOME, the temporary dirs, the worktree, the jigs data dir) holds the key
  (a descriptor without a model key: skipped by design);
- ``max_turns``: a turn past ``max_turns=1`` raises :class:`~jigs.errors.AgentLimitError` with a
  session that ``agent_session`` resumes (a kind without the limit: skipped by design);
- ``worker_death``: a worker SIGKILLed, SIGTERMed or SIGINTed mid-turn takes every process of its
  step along (detached ones included) and frees the worktree;
- ``process_view``: the agent's own shell sees no process outside its step and no host canary;
- ``containment``: the agent's own shell cannot read canaries in ``~/.ssh``, ``~/.aws``, the jigs
  data dir or another step's private dir, write outside its worktree (the worker's venv
  included), reach a loopback port of the worker, or unmount its ``/proc``;
- ``home_per_step``: what one sandboxed step's agent writes in its ``HOME`` and ``/tmp`` (its
  CLI's config files included, through symlinks too) is in no later step's;
- ``tools_of_another_step``: while a sandboxed step serves its Python tools (``tools=``), the
  agent of another sandboxed step of the same run, through its own shell, cannot reach them: not
  on their port, not with a token (the other step's is in nothing it can read: ``/proc``, the
  other step's dirs, the files of its own view), not through its own relay or proxy; the tool
  never runs, and its relay's answers (401 without its own token, 200 with it) show the attempts
  were real;
- ``planted_config``: hostile config files planted in the worktree and HOME change nothing;
- ``stray_mcp_configs``: the MCP configs of every well-known agent (``.mcp.json``,
  ``.cursor/mcp.json``, ``.vscode/mcp.json``, ``.gemini/settings.json``, ``.codex/config.toml``,
  ``~/.claude.json``, ``~/.codex/config.toml``, ...: ``STRAY_MCP_CONFIGS``), declared by the
  kind or not, planted in the worktree and HOME: no server of theirs starts and the step does
  its work (or fails closed with :class:`~jigs.errors.JitCheckError` naming the file, which is
  then removed until a step runs);
- ``step_tools``: the step's Python tools (``tools=``) through the kind's real CLI: a tool's
  result reaches the next model request, a tool that raises is an error the agent reads (a
  worker secret in it masked) and the step goes on, :func:`~jigs.steps.ask_human` ends the turn
  with :class:`~jigs.errors.ApprovalPending` holding the question, the answer reaches the
  resumed turn, and the tool server's port is closed after the step
  (``DemoPlan.step_tool`` names the tools as the CLI does; a plan without it: skipped by
  design);
- ``tool_free``: :func:`jigs.steps.ask_agent` on a kind that says it runs without tools
  (:meth:`~jigs.plugin.Harness.tool_free_problem` is None) offers the model no tool, runs no
  command (the scripted shell call to print a planted file), sends no file planted above its
  scratch directory, takes no lock, keeps no session and leaves no directory; a kind that
  cannot is refused with its reason;
- ``tool_gate``: with a kind that declares a gate (``Harness.tool_gate``), a shell command and a
  file edit the step's ``approve_tool`` declines never happen (no marker, no file), allowed ones
  do, and the gate saw their arguments (``DemoPlan.edit_file`` scripts the CLI's own edit tool,
  seen as ``"file_edit"``); a kind without one refuses ``approve_tool`` before any process
  starts, saying why (``Harness.tool_gate_refusal``);
- ``approval_pending``: a shell command the gate defers does not run and the step raises
  :class:`~jigs.errors.ApprovalPending` (not retryable) with the call and the session; resumed
  with ``approvals`` allowing it, the identical command runs once without asking the gate and the
  agent reads the decision (a kind without a gate: skipped by design);
- ``event_stream``: one typed event stream, the same in the step log;
- ``env_canaries``: every launched environment is built from empty (only allowlisted names, plus
  the ``agents_env`` name ``bad_output`` gives its fake CLIs), no canary planted in the host
  arrives, and a named model key reaches no launched process (environment or argv): the kind
  must give its CLI ``ctx.model_endpoint``, never the key;
- ``no_leftovers``: nothing any check launched is left running.

The last two judge every launch of the run so far (run alone, they first run a turn of their own).
The shell checks (``worker_death``, ``process_view``, ``containment``, ``home_per_step``,
``tools_of_another_step``, ``planted_config`` when the kind declares config files) need
``DemoPlan.run_command``; a kind without it fails them, unless it is read-only
(``DemoPlan(writes=False)``), where they are skipped by design and reported by name.

``make_descriptor(server)`` overrides the descriptor of the kind's ``demo_plan`` (see
:mod:`jigs_testing.plan`); the plan's host variables and ``agents_env`` still apply.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import anyio
from jigs import harnesses
from jigs.descriptors import HarnessDescriptor
from jigs.engine._logging import logger
from jigs.engine._steplog import read_events, step_logs
from jigs.engine._tools import TOKEN_ENV
from jigs.engine._types import AgentSessionRef, RunMetadata
from jigs.env import BASE_ENV, LOCALE_ENV
from jigs.errors import (
    AgentLimitError,
    AgentSessionError,
    AgentTimeoutError,
    JigsError,
    JitCheckError,
    ModelNotAvailableError,
)
from jigs.events import (
    SessionStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnCompleted,
    UsageUpdated,
)
from jigs.executables import Resolved, installed_dir
from jigs.models import generate_text
from jigs.policy._lock import worktree_locked
from jigs.policy._paths import data_dir, run_state_dir
from jigs.processes import group_alive, live_groups, observe_launches, value_digest
from jigs.proxy import _endpoint
from jigs.proxy._endpoint import model_calls_of
from jigs.registry._registry import default_registry
from jigs.sandbox import sandbox_problem
from jigs.sandbox._isolation import isolation
from jigs.sandbox._proctree import (
    kill_procs,
    live,
    namespace_members,
    pid_namespace,
    processes_under,
)
from jigs.steps import agent_session, create_agent_runner, run_agent
from structlog.testing import capture_logs

from jigs_testing import ModelServer, error
from jigs_testing._bad_output import SECRET_ENV, bad_output
from jigs_testing._containment import containment, home_per_step
from jigs_testing._cross_step_tools import tools_of_another_step
from jigs_testing._environ import patched_environ
from jigs_testing._interrupt import interrupt, steer
from jigs_testing._isolation_probe import (
    DESCENDANTS,
    SLEEPERS,
    WORKER_SCRIPT,
    boot_ticks,
    parse_view,
    sleepers,
    view_command,
)
from jigs_testing._step_tools import step_tools
from jigs_testing._stray_mcp import STRAY_MCP_CONFIGS, stray_mcp_configs
from jigs_testing._tool_free import tool_free
from jigs_testing._tool_gate import approval_pending, tool_gate
from jigs_testing.config_files import ConfigFile, Planted, config_files_of
from jigs_testing.plan import demo_plan_of, has_demo_plan, how_to_write_demo_plan

if TYPE_CHECKING:
    from jigs.processes import Launch
    from jigs.steps import AgentResult

    from jigs_testing._server.server import ModelServer
    from jigs_testing.plan import DemoPlan

__all__ = [
    "CANARIES",
    "CHECKS",
    "NOT_MODEL_CALLS",
    "STRAY_MCP_CONFIGS",
    "CheckOutcome",
    "CheckSkipped",
    "KitContext",
    "KitReport",
    "check_harness",
    "kit_context",
]

#: Planted in the host environment; none may reach a launched process.
CANARIES = {
    "ANTHROPIC_API_KEY": "sk-ant-conformance-canary",
    "OPENAI_API_KEY": "sk-conformance-canary",
    "AWS_SECRET_ACCESS_KEY": "conformance-canary",
    "JIGS_CONFORMANCE_CANARY": "conformance-canary",
}


class CheckSkipped(Exception):
    """Raised by a check that does not apply to the kind by design (a read-only kind, a kind
    without a model or without a limit); the reason is reported under the check's name."""


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """One check's verdict: ``passed``, or ``skipped`` by design with the reason."""

    name: str
    status: Literal["passed", "skipped"]
    reason: str = ""
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class KitReport:
    """What :func:`check_harness` ran: one outcome per check, in order."""

    kind: str
    outcomes: tuple[CheckOutcome, ...]

    @property
    def skipped(self) -> dict[str, str]:
        """Check name -> why it was skipped by design."""
        return {o.name: o.reason for o in self.outcomes if o.status == "skipped"}

    @property
    def passed(self) -> list[str]:
        return [o.name for o in self.outcomes if o.status == "passed"]


@dataclass(frozen=True, slots=True)
class KitContext:
    """Everything a check works with. Built once by :func:`check_harness` for a run; the host
    environment (scratch ``HOME``, :data:`CANARIES`, the plan's ``host_env`` and the run's model
    key) is set while the checks run, and ``launches`` records every process jigs launches."""

    kind: str
    #: The kind's harness object (from the registry).
    harness: Any
    descriptor: HarnessDescriptor
    plan: DemoPlan
    server: ModelServer
    run: RunMetadata
    tmp_path: Path
    #: The scratch HOME the agents run with.
    home: Path
    #: Every launch observed so far in this run (:func:`jigs.processes.observe_launches`).
    launches: list[Launch] = field(default_factory=list)
    #: The model key's variable and this run's unique value, when the descriptor names one.
    key_env: str = ""
    key: str | None = None

    @property
    def writes(self) -> bool:
        return self.plan.writes

    def worktree(self, name: str) -> Path:
        """A fresh directory (with a README) under ``tmp_path`` for one check's step."""
        path = self.tmp_path / f"{name}-{uuid.uuid4().hex[:6]}"
        path.mkdir(parents=True)
        (path / "README.md").write_text("conformance worktree\n")
        return path

    async def turn(self, cwd: Path, prompt: str, **kwargs: Any) -> AgentResult[Any]:
        """One :func:`jigs.steps.run_agent` step of this run with the plan's ``agents_env`` (unless
        ``kwargs`` name others)."""
        kwargs.setdefault("harness", self.descriptor)
        kwargs.setdefault("agents_env", self.plan.agents_env)
        result: AgentResult[Any] = await run_agent(cwd=cwd, prompt=prompt, run=self.run, **kwargs)
        return result

    def write_prompt(self, name: str, content: str) -> str:
        """The plan's first turn: write ``name`` with ``content`` (a read-only kind: answer it)."""
        return self.plan.write_file(self.server, name, content)

    def assert_wrote(self, tree: Path, name: str, content: str, answer: str, what: str) -> None:
        """The effect of :meth:`write_prompt`: the file on disk, or for a read-only kind the
        content in the answer (and no file)."""
        if self.writes:
            path = tree / name
            wrote = path.read_text() if path.exists() else None
            assert wrote == content, (
                f"{self.kind}: {what}: the agent's own tool did not write {name} (found {wrote!r})"
            )
        else:
            assert content in answer, (
                f"{self.kind}: {what}: the read-only turn's answer does not hold {content!r}: "
                f"{answer[:200]!r}"
            )
            assert not (tree / name).exists(), (
                f"{self.kind}: {what}: a kind declared read-only (writes=False) wrote {name}"
            )

    def require_shell(self, check: str) -> None:
        """Fails ``check`` when the plan has no ``run_command`` (skips it for a read-only kind)."""
        if self.plan.run_command is None:
            if not self.writes:
                raise CheckSkipped(
                    f"the read-only {self.kind} kind has no shell tool (DemoPlan.run_command is "
                    f"None): {check} needs the agent to run a command"
                )
            raise AssertionError(
                f"{self.kind}: DemoPlan.run_command is not set; {check} needs the agent to run a "
                f"command with its own shell tool (see jigs_testing.plan.scripted_command)"
            )

    def shell_prompt(self, command: str, check: str) -> str:
        """The plan's ``run_command`` prompt for ``command`` (see :meth:`require_shell`)."""
        self.require_shell(check)
        assert self.plan.run_command is not None
        prompt: str = self.plan.run_command(self.server, command)
        return prompt


Check = Callable[[KitContext], Awaitable[None]]


async def check_harness(
    kind: str,
    make_descriptor: Callable[[Any], HarnessDescriptor] | None = None,
    *,
    tmp_path: Path,
    only: Collection[str] | None = None,
) -> KitReport:
    """Run the conformance checks for ``kind`` (all of :data:`CHECKS`, or those named in
    ``only``, in :data:`CHECKS` order) and return what ran. Raises ``AssertionError`` naming the
    first check that fails (``"<kind>: check <name> failed: ..."``); a kind without a
    ``demo_plan`` method fails with how to write one; an unknown name in ``only`` is a
    ``ValueError`` listing the known ones."""
    unknown = sorted(set(only or ()) - set(CHECKS))
    if unknown:
        raise ValueError(f"unknown conformance checks {unknown}; the checks are {list(CHECKS)}")
    chosen = list(CHECKS) if only is None else [n for n in CHECKS if n in set(only)]
    outcomes: list[CheckOutcome] = []
    async with kit_context(kind, make_descriptor, tmp_path=tmp_path) as ctx:
        for name in chosen:
            started = time.monotonic()
            status: Literal["passed", "skipped"] = "passed"
            reason = ""
            try:
                await CHECKS[name](ctx)
            except CheckSkipped as skip:
                status, reason = "skipped", str(skip)
            except AssertionError as exc:
                raise AssertionError(f"{kind}: check {name} failed: {exc}") from exc
            finally:
                ctx.server.script.skip_remaining()
            took = round(time.monotonic() - started, 3)
            outcomes.append(CheckOutcome(name, status, reason, seconds=took))
    return KitReport(kind, tuple(outcomes))


@asynccontextmanager
async def kit_context(
    kind: str,
    make_descriptor: Callable[[Any], HarnessDescriptor] | None = None,
    *,
    tmp_path: Path,
) -> AsyncIterator[KitContext]:
    """The :class:`KitContext` :func:`check_harness` runs its checks with: a running
    :class:`~jigs_testing.ModelServer`, the kind's plan, and the host environment set for the
    block (scratch ``HOME``, :data:`CANARIES`, the plan's ``host_env``, a model key unique to
    this run when the descriptor names one). For running one check yourself, e.g. against a
    modified plan: ``await CHECKS["worker_death"](dataclasses.replace(ctx, plan=...))``."""
    harness = default_registry().get(kind)
    assert has_demo_plan(harness), f"{kind}: {how_to_write_demo_plan(kind)}"
    async with ModelServer() as server:
        plan = demo_plan_of(harness, server)
        assert plan is not None, f"{kind}: demo_plan(server) returned None; return a DemoPlan"
        descriptor = make_descriptor(server) if make_descriptor else plan.descriptor
        # a named model key gets a value unique to this run, so a process holding it can only
        # have got it from this run (never a dummy another test or service also uses)
        route = harness.model_route(descriptor)
        key_env = route.key_env if route is not None else ""
        key = f"sk-jigs-conformance-{uuid.uuid4().hex}" if route is not None else None
        home = tmp_path / "home"
        home.mkdir(parents=True, exist_ok=True)
        scratch = {
            # the agents' own files (transcripts, shell start-up) stay out of the operator's HOME;
            # jigs' data and installed CLIs stay where they are
            "HOME": str(home),
            "JIGS_DATA_DIR": str(data_dir()),
            "JIGS_CLI_DIR": str(installed_dir(kind).parent),
        }
        model_key = {key_env: key} if key is not None else {}
        with (
            patched_environ({**scratch, **CANARIES, **plan.host_env, **model_key}),
            observe_launches() as launches,
        ):
            yield KitContext(
                kind=kind,
                harness=harness,
                descriptor=descriptor,
                plan=plan,
                server=server,
                run=RunMetadata(workflow_run_id=f"conformance-{uuid.uuid4().hex[:8]}"),
                tmp_path=tmp_path,
                home=home,
                launches=launches,
                key_env=key_env,
                key=key,
            )


# ---------------------------------------------------------------- the checks


async def _descriptor_json(ctx: KitContext) -> None:
    descriptor = ctx.descriptor
    stored = json.dumps(descriptor.to_data())
    back = harnesses.loads(stored)
    assert type(back) is type(descriptor), f"{ctx.kind}: JSON came back as {type(back)}"
    assert back == descriptor, f"{ctx.kind}: descriptor changed through JSON: {stored}"
    assert back.describe() == descriptor.describe()


async def _stale_resume(ctx: KitContext) -> None:
    kind = ctx.kind
    tree = ctx.worktree("stale")
    stale = AgentSessionRef(
        harness=kind, id=str(uuid.uuid4()), descriptor=ctx.descriptor.describe()
    )
    before = len(ctx.launches)
    try:
        await ctx.turn(tree, "x", resume=stale)
    except AgentSessionError as exc:
        refused = exc.session_id
    else:
        raise AssertionError(f"{kind}: a stale resume did not raise AgentSessionError")
    assert refused == stale.id, f"{kind}: AgentSessionError names {refused}"
    started = ctx.launches[before:]
    assert not started, f"{kind}: a stale resume launched {started[0].argv[0]}"
    assert not worktree_locked(tree), f"{kind}: a stale resume left the worktree locked"


async def _no_model_refusal(ctx: KitContext) -> None:
    kind = ctx.kind
    if ctx.harness.has_model:
        raise CheckSkipped(f"the {kind} kind has a model: create_agent_runner serves it")
    tree = ctx.worktree("no-model")
    before = len(ctx.launches)
    try:
        await create_agent_runner(ctx.descriptor, cwd=tree, run=ctx.run)
    except ModelNotAvailableError:
        pass
    else:
        raise AssertionError(f"{kind}: create_agent_runner did not refuse")
    assert len(ctx.launches) == before, f"{kind}: a refused runner launched a process"
    assert not worktree_locked(tree), f"{kind}: a refused runner left the worktree locked"


async def _lock_and_close(ctx: KitContext) -> None:
    kind = ctx.kind
    tree = ctx.worktree("turn")
    if not ctx.harness.has_model:
        # the step's lock, seen in the pipeline's own events
        with capture_logs() as logs:
            turn = await ctx.turn(tree, ctx.write_prompt("conformance.txt", "conformance"))
        assert turn.text, f"{kind}: run_agent returned no text"
        answer = turn.text
        events = [e["event"] for e in logs]
        assert "runner.lock.acquired" in events, f"{kind}: run_agent took no lock"
        assert events.index("runner.lock.acquired") < events.index("turn.started"), (
            f"{kind}: the agent ran before the worktree was locked"
        )
        assert "runner.lock.released" in events, f"{kind}: the lock was not released"
    else:
        # a model: the lock is held while the runner is open, close is idempotent
        runner = await create_agent_runner(
            ctx.descriptor, cwd=tree, run=ctx.run, agents_env=ctx.plan.agents_env
        )
        try:
            assert worktree_locked(tree), f"{kind}: the worktree is not locked while open"
            prompt = ctx.write_prompt("conformance.txt", "conformance")
            result = await generate_text(runner.model, prompt=prompt)
            assert result.text, f"{kind}: generate_text returned no text"
            assert runner.session_from(result) is not None, f"{kind}: no session"
            answer = result.text
        finally:
            await runner.close()
        await runner.close()
        assert not worktree_locked(tree), f"{kind}: close() did not release the lock"
    ctx.assert_wrote(tree, "conformance.txt", "conformance", answer, "the first turn")


async def _env_canaries(ctx: KitContext) -> None:
    """Judges every launch of the run so far; run alone, it runs a turn of its own first."""
    kind, harness = ctx.kind, ctx.harness
    if not ctx.launches:
        tree = ctx.worktree("env")
        await ctx.turn(tree, ctx.write_prompt("env.txt", "env"))
    assert ctx.launches, f"{kind}: no process was launched through jigs.processes"
    allowed = (
        set(BASE_ENV)
        | set(harness.env_allowlist(ctx.descriptor))
        | set(harness.sets_env)
        | set(ctx.plan.agents_env)
        | {"TRACEPARENT"}  # set by the core when the step is traced
        | {TOKEN_ENV}  # set by the core for a step with tools= (tools_of_another_step)
        | {SECRET_ENV}  # given to bad_output's fake CLIs with agents_env
        | LOCALE_ENV
    )
    key, key_env = ctx.key, ctx.key_env
    for launch in ctx.launches:
        if key is not None:
            assert value_digest(key) not in launch.value_digests, (
                f"{kind}: the model key (${key_env}) is in the environment of "
                f"{launch.argv[0]}; give the CLI ctx.model_endpoint instead"
            )
            assert not any(key in arg for arg in launch.argv), (
                f"{kind}: the model key (${key_env}) is on the command line of {launch.argv[0]}"
            )
        leaked = {n for n in launch.env_names if n not in allowed}
        assert not leaked, f"{kind}: {launch.argv[0]} got names outside the allowlist: {leaked}"
        arrived = [n for n, v in CANARIES.items() if value_digest(v) in launch.value_digests]
        assert not arrived, f"{kind}: canary values arrived in {launch.argv[0]}: {arrived}"


async def _no_leftovers(ctx: KitContext) -> None:
    """Nothing the kind started is left running: the launched group (the isolation's outer
    process) and every process of the step, found by its working directory (the step's
    processes live in a namespace of their own). Run alone, it runs a turn of its own first."""
    kind = ctx.kind
    if not ctx.launches:
        tree = ctx.worktree("leftovers")
        await ctx.turn(tree, ctx.write_prompt("leftovers.txt", "leftovers"))
    assert ctx.launches, f"{kind}: no process was launched through jigs.processes"
    for launch in ctx.launches:
        assert not group_alive(launch.pgid), f"{kind}: {launch.argv[0]} outlived close()"
        left = processes_under(launch.cwd)
        assert not left, f"{kind}: {launch.argv[0]}'s step left processes: {_describe(left)}"


def _processes_holding(value: str) -> list[str]:
    """``/proc/<pid>/environ`` and ``cmdline`` files (other than the worker's own) that hold
    ``value``: what any process of the worker's user could read. Empty where there is no
    ``/proc``."""
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


async def _expect_timeout(
    kind: str,
    what: str,
    call: Callable[[], Awaitable[object]],
    limit: str = "idle_timeout",
    deadline: float = HANG_IDLE,
) -> AgentTimeoutError:
    """Runs ``call``, which must end in the timeout error of ``limit`` within its bound
    (``deadline`` + :data:`SLACK`), retryable, with nothing left running."""
    started = time.monotonic()
    error: AgentTimeoutError | None = None
    # the kit's own bound: a kind that ignores the deadline fails here instead of hanging the run
    with anyio.move_on_after(deadline + 2 * SLACK):
        try:
            await call()
        except AgentTimeoutError as exc:
            error = exc
        else:
            raise AssertionError(f"{kind}: {what} did not end in AgentTimeoutError")
    took = time.monotonic() - started
    if error is None:
        raise AssertionError(
            f"{kind}: {what} was still running after {took:.1f}s; jigs must stop it at "
            f"{limit} (the kit cancelled it)"
        )
    assert took < deadline + SLACK, f"{kind}: {what} took {took:.1f}s to end"
    assert error.limit == limit, f"{kind}: {what} ended at {error.limit}, not {limit}"
    assert error.retryable, f"{kind}: the AgentTimeoutError of {what} is not retryable"
    assert not live_groups(), f"{kind}: {what} left processes: {live_groups()}"
    return error


def _quick(ctx: KitContext) -> HarnessDescriptor:
    return ctx.descriptor.replace(idle_timeout=HANG_IDLE, turn_timeout=60.0)


async def _hung_endpoint(ctx: KitContext) -> None:
    """A turn whose model endpoint hangs ends in the one timeout error in time, with the lock
    released and nothing left running."""
    kind = ctx.kind
    tree = ctx.worktree("hung-endpoint")
    prompt = ctx.plan.hang(ctx.server)
    seen: list[object] = []
    error = await _expect_timeout(
        kind,
        "a turn whose model endpoint hangs",
        lambda: ctx.turn(tree, prompt, harness=_quick(ctx), on_event=seen.append),
    )
    assert not worktree_locked(tree), f"{kind}: a timed-out turn left the worktree locked"
    reported = [e.session_id for e in seen if isinstance(e, SessionStarted)]
    if reported:
        assert error.session_id == reported[-1], (
            f"{kind}: the AgentTimeoutError names session {error.session_id!r}, the CLI reported "
            f"{reported[-1]!r} before it hung: the step could not be continued"
        )


async def _turn_deadline(ctx: KitContext) -> None:
    """A turn that outlasts ``turn_timeout`` without ever being idle for ``idle_timeout`` ends at
    ``turn_timeout`` in time; the agent's command is stopped with the step."""
    kind = ctx.kind
    tree = ctx.worktree("turn-deadline")
    started = tree / "deadline.started"
    if ctx.plan.run_command is not None:
        # not a bare sleep: Claude Code refuses a long one
        prompt = ctx.plan.run_command(ctx.server, f"touch {started.name} && tail -f /dev/null")
        what = "a turn whose agent runs a command past turn_timeout"
    else:
        prompt = ctx.plan.hang(ctx.server)
        what = "a turn whose model endpoint hangs past turn_timeout"
    # a CLI slow to start (DemoPlan.start_seconds) gets that long on top, so that the deadline
    # still falls while its command runs
    seconds = HANG_IDLE + ctx.plan.start_seconds
    deadline = ctx.descriptor.replace(idle_timeout=600.0, turn_timeout=seconds)
    before = len(ctx.server.model_requests)
    seen: list[object] = []
    await _expect_timeout(
        kind,
        what,
        lambda: ctx.turn(tree, prompt, harness=deadline, on_event=seen.append),
        limit="turn_timeout",
        deadline=seconds,
    )
    # the deadline fell mid-turn: the agent's command ran, or (no shell) the turn was under way
    if ctx.plan.run_command is not None:
        assert started.exists(), f"{kind}: {what}: the agent's command never ran"
    else:
        under_way = bool(seen) or len(ctx.server.model_requests) > before
        assert under_way, f"{kind}: {what}: the turn never got under way (no event, no call)"
    assert not worktree_locked(tree), f"{kind}: {what} left the worktree locked"
    left = processes_under(tree)
    assert not left, f"{kind}: {what} left processes in the worktree: {_describe(left)}"


async def _cancelled_turn(ctx: KitContext) -> None:
    """A step cancelled by its caller once its turn is under way (the CLI reported an event or
    called its model) stops every process of the step within :data:`DEATH_BOUND` seconds and
    leaves the worktree free."""
    kind, server = ctx.kind, ctx.server
    tree = ctx.worktree("cancelled")
    prompt = ctx.plan.hang(server)
    seen: list[object] = []
    before = len(server.model_requests)

    async def turn() -> None:
        await ctx.turn(tree, prompt, on_event=seen.append)

    async with anyio.create_task_group() as tg:
        tg.start_soon(turn)
        with anyio.fail_after(START_BOUND):
            while not seen and len(server.model_requests) == before:
                await anyio.sleep(0.02)
        await anyio.sleep(0.2)
        groups = set(live_groups())
        assert groups, f"{kind}: no process group of the step was live mid-turn"
        cancelled_at = time.monotonic()
        tg.cancel_scope.cancel()
    while time.monotonic() - cancelled_at < DEATH_BOUND and (
        any(group_alive(g) for g in groups) or processes_under(tree)
    ):
        await anyio.sleep(0.02)
    took = time.monotonic() - cancelled_at
    assert not any(group_alive(g) for g in groups), (
        f"{kind}: a process group of the cancelled step outlived it by {took:.1f}s"
    )
    left = processes_under(tree)
    assert not left, f"{kind}: the cancelled step left processes: {_describe(left)}"
    assert not worktree_locked(tree), f"{kind}: the cancelled step left the worktree locked"


async def _hung_cli(ctx: KitContext) -> None:
    """A CLI that hangs (the kind must launch what ``resolve_executable`` returns) ends in the
    timeout error in time, with the lock released and nothing left running."""
    kind, harness = ctx.kind, ctx.harness
    hang = ctx.tmp_path / "hung-cli"
    hang.write_text("#!/bin/sh\nexec sleep 600\n")
    os.chmod(hang, 0o755)
    tree = ctx.worktree("hung-cli")
    harness.resolve_executable = lambda env: Resolved(hang, "conformance: a CLI that hangs")
    try:
        await _expect_timeout(
            kind, "a turn whose CLI hangs", lambda: ctx.turn(tree, "hello", harness=_quick(ctx))
        )
    finally:
        del harness.resolve_executable
    assert not worktree_locked(tree), f"{kind}: a hung CLI left the worktree locked"


async def _usage(ctx: KitContext) -> None:
    """A successful turn reports usage; while the agent's tool runs, no process the worker can
    see holds the model key (when the descriptor names one)."""
    kind, key, key_env = ctx.kind, ctx.key, ctx.key_env
    holders: list[str] = []
    scanned: list[int] = []

    def scan(event: object) -> None:
        if key and isinstance(event, ToolCallStarted | ToolCallFinished):
            scanned.append(1)
            holders.extend(_processes_holding(key))

    tree = ctx.worktree("usage")
    done = await ctx.turn(tree, ctx.write_prompt("usage.txt", "usage"), on_event=scan)
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


async def _max_turns(ctx: KitContext) -> None:
    """``max_turns`` stops a turn with an error carrying a session that ``agent_session``
    resumes (a kind whose descriptor does not support the limit: skipped by design)."""
    kind, descriptor, server = ctx.kind, ctx.descriptor, ctx.server
    if "max_turns" not in type(descriptor).limits:
        raise CheckSkipped(f"the {kind} descriptor does not support the max_turns limit")
    limited = type(descriptor).from_data({**descriptor.to_data(), "max_turns": 1})
    tree = ctx.worktree("max-turns")
    try:
        await ctx.turn(tree, ctx.write_prompt("limited.txt", "limited"), harness=limited)
    except AgentLimitError as exc:
        stopped = exc
    else:
        raise AssertionError(
            f"{kind}: a turn past max_turns=1 did not raise AgentLimitError. Unless the CLI "
            f"enforces the limit itself, the core counts the ModelCallStarted events your "
            f"decoder yields (one per model request): emit one for each request, or drop "
            f"max_turns from the descriptor's limits"
        )
    assert stopped.limit == "max_turns", f"{kind}: AgentLimitError.limit is {stopped.limit}"
    assert stopped.session is not None, f"{kind}: AgentLimitError carries no session"
    assert stopped.usage is not None, f"{kind}: AgentLimitError carries no usage"
    assert not worktree_locked(tree), f"{kind}: a stopped turn left the worktree locked"
    server.script.skip_remaining()
    before = len(server.model_requests)
    resumed = await agent_session(
        harness=limited,
        cwd=tree,
        run=ctx.run,
        session=stopped.session,
        resume_prompt=ctx.plan.recall(server),
        fresh_prompt="(a fresh start is a failure of this check)",
        agents_env=ctx.plan.agents_env,
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


async def _fork_on_resume(ctx: KitContext) -> None:
    """Two steps resumed from the same ref (a retry after a killed attempt, say) start from the
    same state: the second does not see what the first added, and each returns a new ref."""
    kind, server = ctx.kind, ctx.server
    tree = ctx.worktree("fork")
    first = await ctx.turn(tree, ctx.write_prompt("fork.txt", "fork"))
    assert first.session is not None, f"{kind}: the first step returned no session"
    server.script.skip_remaining()
    answers: list[tuple[str, int | None]] = []
    for _ in range(2):
        before = len(server.model_requests)
        again = await ctx.turn(tree, ctx.plan.recall(server), resume=first.session)
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


async def _worker_death(ctx: KitContext) -> None:
    """A worker process running one step of the kind is SIGKILLed, SIGTERMed and SIGINTed
    mid-turn while the agent, through its own shell tool, runs ``sleep``, ``setsid sleep``,
    ``nohup sleep &`` and a double-forked ``sleep``: within :data:`DEATH_BOUND` seconds no
    process of the step is left, and the next step on the same worktree starts (the next
    worker's step, and finally one in this process that must write a file, or for a read-only
    kind answer its content).

    Under the ``tree`` fallback a SIGKILLed worker leaves its step's descendants running (the
    documented limit); the kit then asserts the worktree stays locked while they live, and
    kills them itself."""
    kind, server = ctx.kind, ctx.server
    mode = _isolation_mode(ctx)
    tree = ctx.worktree("worker-death")
    # a script file, not an inline command: CLIs refuse some inline forms (Claude Code blocks a
    # command that starts with a long sleep)
    script = tree / "descendants.sh"  # in the worktree: the sandbox shows the agent nothing else
    script.write_text(DESCENDANTS + "\n")
    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
        await _signal_worker(ctx, tree, script, sig, mode)

    # the next step on the worktree starts and does its work
    done = await ctx.turn(tree, ctx.write_prompt("after-death.txt", "after"))
    server.script.skip_remaining()
    assert done.text, f"{kind}: the step after the signalled workers returned no text"
    ctx.assert_wrote(tree, "after-death.txt", "after", done.text, "the step after the workers")


async def _signal_worker(
    ctx: KitContext, tree: Path, script: Path, sig: signal.Signals, mode: str
) -> None:
    """One worker whose step's agent runs ``script``, sent ``sig`` once every descendant is up;
    judged by what is left of the step :data:`DEATH_BOUND` seconds later."""
    kind = ctx.kind
    log = ctx.tmp_path / f"worker-{sig.name}.log"
    worker = await _start_worker(ctx, tree, script, log)
    try:
        await _wait_for_sleepers(kind, worker, tree, sig, log)
        step, namespace = _step_processes(kind, tree, mode)
        worker.send_signal(sig)
        left = await _left_after_signal(
            kind, sig, mode=mode, step=step, tree=tree, namespace=namespace
        )
        if mode == "tree" and sig is signal.SIGKILL:
            # the fallback's documented limit: the lock lives as long as they do
            assert left, f"{kind}: tree mode unexpectedly reaped a SIGKILLed worker's step"
            assert worktree_locked(tree), (
                f"{kind}: a worker {sig.name}ed mid-turn left {len(left)} processes and the "
                f"worktree unlocked"
            )
            kill_procs(left)
        else:
            assert not left, (
                f"{kind}: a worker {sig.name}ed mid-turn left {len(left)} processes of its step "
                f"running {DEATH_BOUND:.0f}s after the signal: {_describe(left)}"
            )
        with anyio.move_on_after(5.0):
            await worker.wait()
        assert worker.returncode is not None, f"{kind}: the worker outlived {sig.name} by 5s"
    finally:
        if worker.returncode is None:
            worker.kill()
            await worker.wait()
        ctx.server.script.skip_remaining()


async def _start_worker(ctx: KitContext, tree: Path, script: Path, log: Path) -> anyio.abc.Process:
    """A worker process (:data:`WORKER_SCRIPT`) running one step whose agent runs ``script``,
    in a session of its own, its output to ``log``."""
    args = {
        "descriptor": json.dumps(ctx.descriptor.to_data()),
        "cwd": str(tree),
        "prompt": ctx.shell_prompt(f"sh {shlex.quote(str(script))}", "worker_death"),
        "run": ctx.run.workflow_run_id,
        "agents_env": list(ctx.plan.agents_env),
    }
    with log.open("wb") as err:
        return await anyio.open_process(
            [sys.executable, "-c", WORKER_SCRIPT, json.dumps(args)],
            cwd=ctx.tmp_path,  # outside the worktree: only the step's processes work in it
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
            start_new_session=True,
        )


async def _wait_for_sleepers(
    kind: str, worker: anyio.abc.Process, tree: Path, sig: signal.Signals, log: Path
) -> None:
    """Wait (at most :data:`START_BOUND` seconds) for the agent's shell to have started every
    descendant; a worker whose step ended first fails."""
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


def _step_processes(kind: str, tree: Path, mode: str) -> tuple[list[tuple[int, str]], str | None]:
    """The step's processes (those working in ``tree``) and, in a namespace, its PID namespace
    (whose every member counts, wherever it works), which must not be the worker's."""
    step = processes_under(tree)
    namespace = pid_namespace(sleepers(step)[0][0]) if mode == "namespace" else None
    if namespace is not None:
        assert namespace != pid_namespace(os.getpid()), (
            f"{kind}: the agent's commands run in the worker's PID namespace"
        )
        step = sorted(set(step) | set(namespace_members(namespace)))
    return step, namespace


async def _left_after_signal(
    kind: str,
    sig: signal.Signals,
    *,
    mode: str,
    step: list[tuple[int, str]],
    tree: Path,
    namespace: str | None,
) -> list[tuple[int, str]]:
    """What is left of the step once it is gone or :data:`DEATH_BOUND` seconds have passed."""
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
    return left


def _isolation_mode(ctx: KitContext) -> str:
    """The isolation the check's steps get: a sandboxed step's is always ``namespace`` (bwrap's
    own, whatever ``JIGS_ISOLATION`` says); an unsandboxed one's is the host's."""
    return "namespace" if ctx.descriptor.sandbox == "on" else isolation().mode


def _remaining(
    step: list[tuple[int, str]], tree: Path, namespace: str | None
) -> list[tuple[int, str]]:
    """What is left of a step: its recorded processes, anything working in its worktree, and
    (when it had one) any member of its PID namespace."""
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


async def _process_view(ctx: KitContext) -> None:
    """The agent's shell lists every process in ``/proc`` and reads each one's environment;
    the listing reaches the model in the next request (for a kind without a model, the turn's
    answer). Under the ``namespace`` isolation it shows only processes started after the step
    began (none of the worker's, none of the host's), its own environment readable, and no
    canary of :data:`CANARIES` by name or value anywhere. Under the ``tree`` fallback the agent
    does see the host's processes (the documented limit), which the kit asserts instead."""
    kind, server = ctx.kind, ctx.server
    mode = _isolation_mode(ctx)
    tree = ctx.worktree("process-view")
    command = view_command(value_digest(v) for v in CANARIES.values())
    prompt = ctx.shell_prompt(command, "process_view")
    before = len(server.model_requests)
    began = boot_ticks() - 1  # start times are whole ticks
    turn = await ctx.turn(tree, prompt)
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


async def _planted_config(ctx: KitContext) -> None:
    """A hostile version of every config file the kind declares (``config_files()``),
    planted in the worktree and in HOME, changes nothing: no hook, helper, notifier, MCP server
    or extension runs (no marker file), no request reaches the planted endpoint, and the
    planted variable is absent from the agent's shell (a scripted tool call dumps its env, so
    a planted permission or sandbox rule that stops the command fails too; a read-only kind's
    shell prints it to the model instead of a file). A step may instead be refused with
    :class:`~jigs.errors.JitCheckError` naming the file: that file is removed and the turn runs
    again with the rest, until one runs. A path declared more than once is planted in rounds
    (the n-th declaration of each path in round n), so a guard that refuses one version does not
    hide what the CLI would do with another. A kind that declares no file passes trivially; one
    that does not declare (None) fails."""
    kind = ctx.kind
    files: Any = config_files_of(ctx.harness)
    assert files is not None, (
        f"{kind}: config_files() is not declared; return the config files the CLI reads "
        f"from the worktree and HOME (jigs_testing.ConfigFile), or () when it reads none"
    )
    if not files:
        return  # the kind declares no config files: nothing can be planted
    assert all(isinstance(f, ConfigFile) for f in files), f"{kind}: config_files() -> ConfigFile"
    ctx.require_shell("planted_config")
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
                ctx, evil=evil, configs=configs, root=ctx.tmp_path / f"planted-{number}"
            )


async def _planted_round(
    ctx: KitContext, *, evil: ModelServer, configs: Sequence[Any], root: Path
) -> None:
    """One round of :func:`_planted_config`: plant ``configs``, run turns until one runs (each
    refusal removes the files it names), then judge."""
    kind, server = ctx.kind, ctx.server
    tree = _tree_under(root)
    # in the worktree: a sandboxed step can write nowhere else, so a marker outside it could
    # never prove that a planted hook ran
    markers = tree / ".planted-markers"
    markers.mkdir()
    planted = Planted(
        markers=markers,
        anthropic_base_url=evil.anthropic_base_url,
        openai_base_url=evil.openai_base_url,
        env_name=PLANTED_ENV,
        env_value=f"planted-{uuid.uuid4().hex[:12]}",
    )
    where = _plant(configs, tree, ctx.home, planted)
    refused: list[str] = []
    try:
        for attempt in range(len(where) + 1):
            dump = f"planted-env-{attempt}.txt"
            command = f"env > {shlex.quote(dump)}" if ctx.writes else "env"
            prompt = ctx.shell_prompt(command, "planted_config")
            before = len(server.model_requests)
            turn = await _planted_turn(
                ctx, tree, prompt, evil=evil, markers=markers, where=where, refused=refused
            )
            if turn is None:
                continue
            env = _agent_env_shown(ctx, tree, dump=dump, before=before, turn=turn, where=where)
            injected = planted.env_name in env or planted.env_value in env
            assert not injected, (
                f"{kind}: a planted config file injected {planted.env_name} into the agent's shell"
            )
            return
    finally:
        for path in where:
            path.unlink(missing_ok=True)
    raise AssertionError(f"{kind}: every attempt was refused ({refused}); no turn ran")


def _plant(configs: Sequence[Any], tree: Path, home: Path, planted: Planted) -> dict[Path, Any]:
    """Write each config's hostile version in the worktree or HOME: where each one went."""
    where: dict[Path, Any] = {}
    for config in configs:
        path = (tree if config.root == "worktree" else home) / config.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(config.hostile(planted), encoding="utf-8")
        where[path] = config
    return where


async def _planted_turn(
    ctx: KitContext,
    tree: Path,
    prompt: str,
    *,
    evil: ModelServer,
    markers: Path,
    where: dict[Path, Any],
    refused: list[str],
) -> AgentResult[Any] | None:
    """One turn among the planted files, after which nothing planted may have run. None when a
    :class:`~jigs.errors.JitCheckError` refused it: the files it names are removed (from the
    disk and ``where``) and added to ``refused``."""
    kind, server = ctx.kind, ctx.server
    try:
        turn = await ctx.turn(tree, prompt)
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
        return None
    except Exception as exc:
        _assert_nothing_planted_ran(kind, markers, evil, f"failed turn: {exc!r}")
        raise AssertionError(f"{kind}: a turn with planted config files failed: {exc!r}") from exc
    server.script.skip_remaining()
    _assert_nothing_planted_ran(kind, markers, evil, "a turn that ran")
    return turn


def _agent_env_shown(
    ctx: KitContext,
    tree: Path,
    *,
    dump: str,
    before: int,
    turn: AgentResult[Any],
    where: dict[Path, Any],
) -> str:
    """The environment the agent's shell printed: the ``dump`` file it wrote, or for a read-only
    kind what reached the model (or the answer) since request ``before``."""
    kind = ctx.kind
    if ctx.writes:
        shown = tree / dump
        assert shown.exists(), (
            f"{kind}: the scripted shell command did not run with planted config files "
            f"{sorted(c.path for c in where.values())}"
        )
        return shown.read_text(errors="replace")
    # a read-only kind: the command's output reaches the model (or the answer)
    texts = [r.text() for r in ctx.server.model_requests[before:]] + [turn.text]
    env = "\n".join(texts)
    assert "PATH=" in env, (
        f"{kind}: the scripted env command's output never reached the model with "
        f"planted config files {sorted(c.path for c in where.values())}"
    )
    return env


def _tree_under(root: Path) -> Path:
    path = root / f"worktree-{uuid.uuid4().hex[:6]}"
    path.mkdir(parents=True)
    (path / "README.md").write_text("conformance worktree\n")
    return path


def _assert_nothing_planted_ran(kind: str, markers: Path, evil: Any, when: str) -> None:
    ran = sorted(p.name for p in markers.iterdir())
    assert not ran, f"{kind}: planted config ran ({when}): markers {ran}"
    reached = [r.path for r in evil.requests] + list(evil.proxy_requests)
    assert not reached, f"{kind}: requests reached the planted endpoint ({when}): {reached}"


async def _event_stream(ctx: KitContext) -> None:
    """A turn with one tool call yields, in order: the session, a tool call started then
    finished (with its name), text deltas whose concatenation is the final text, usage, and
    exactly one ``turn-completed`` last; the same events land in the step log."""
    kind, run = ctx.kind, ctx.run
    tree = ctx.worktree("events")
    seen: list[Any] = []
    before = {p.name for p in step_logs(run_state_dir(run.workflow_run_id, kind).parent)}
    result = await ctx.turn(tree, ctx.write_prompt("events.txt", "events"), on_event=seen.append)
    ctx.server.script.skip_remaining()
    types = [type(e) for e in seen]
    assert SessionStarted in types, f"{kind}: no session event"
    assert ToolCallStarted in types, (
        f"{kind}: no tool-call-started event for the tool call of the demo plan's write_file "
        f"turn (the scripted model calls your CLI's tool: your decoder must yield "
        f"ToolCallStarted and ToolCallFinished for it, and a read-only kind's write_file "
        f"still scripts one tool call; see jigs_testing.plan.scripted_write)"
    )
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


#: Every check, by name, in the order a full run takes them (see the module docstring).
#: What an attacker asks a step's proxy for with the key; none of it is a model call.
NOT_MODEL_CALLS = (
    ("GET", "/v1/files"),
    ("DELETE", "/v1/files/file-1"),
    ("POST", "/v1/organizations/api_keys"),
    ("GET", "/v1/organizations/api_keys"),
    ("POST", "/v1/messages/batches"),
    ("GET", "/admin"),
    ("GET", "/files"),
    ("POST", "/batches"),
    ("OPTIONS", "/v1/messages"),
)


@asynccontextmanager
async def _step_endpoints() -> AsyncIterator[list[Any]]:
    """Every :class:`~jigs.plugin.ModelEndpoint` the pipeline opens in the block."""
    opened: list[Any] = []
    original = _endpoint.prepare_model_endpoint

    def spy(*args: Any, **kwargs: Any) -> Any:
        found = original(*args, **kwargs)
        opened.append(found[0])
        return found

    _endpoint.prepare_model_endpoint = spy
    try:
        yield opened
    finally:
        _endpoint.prepare_model_endpoint = original


async def _status_of(base_url: str, method: str, path: str) -> int:
    """The status a plain HTTP/1.1 request to ``base_url + path`` gets (0: no answer)."""
    parts = urlsplit(base_url)
    head = (
        f"{method} {parts.path}{path} HTTP/1.1\r\nhost: {parts.netloc}\r\n"
        "content-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}"
    )
    answer = b""
    with anyio.fail_after(15):
        async with await anyio.connect_tcp(parts.hostname or "", parts.port or 80) as stream:
            await stream.send(head.encode("latin-1"))
            with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                while b"\r\n" not in answer:
                    answer += await stream.receive()
    status = answer.split(b" ", 2)[1:2]
    return int(status[0]) if status and status[0].isdigit() else 0


def _needs_proxy(ctx: KitContext) -> Any:
    """The kind's model route for the descriptor; skips the check when it names no key."""
    route = ctx.harness.model_route(ctx.descriptor)
    if route is None or ctx.key is None:
        raise CheckSkipped(
            f"the {ctx.kind} descriptor names no model key: its steps run no credential proxy"
        )
    return route


async def _model_only(ctx: KitContext) -> None:
    """While a step runs, what is not a model call of its route is refused by its proxy (403)
    and never reaches the model server."""
    route = _needs_proxy(ctx)
    kind, server = ctx.kind, ctx.server
    declared = {tuple(call.split(" ", 1)) for call in model_calls_of(route)}
    probes = [p for p in NOT_MODEL_CALLS if p not in declared]
    for method, path in sorted(declared):  # beside each model call: other methods, below it
        probes += [("GET" if method != "GET" else "DELETE", path), (method, path + "/x")]
    answers: dict[tuple[str, str], int] = {}
    async with _step_endpoints() as endpoints:

        async def probe(event: object) -> None:
            if not answers and endpoints:  # the step's proxy is up: its first event
                for method, path in probes:
                    answers[method, path] = await _status_of(endpoints[-1].base_url, method, path)

        tree = ctx.worktree("model-only")
        await ctx.turn(tree, ctx.write_prompt("model-only.txt", "model only"), on_event=probe)
    assert answers, f"{kind}: the turn gave no event while its proxy ran; nothing was probed"
    let_through = {f"{m} {p}": s for (m, p), s in answers.items() if s != 403}
    assert not let_through, (
        f"{kind}: the step's credential proxy did not refuse requests that are no model call of "
        f"its route ({model_calls_of(route)}): {let_through}"
    )
    reached = [r.target for r in server.requests if not r.is_model_request]
    assert not reached, f"{kind}: requests that are no model call reached the upstream: {reached}"


async def _key_not_relayed(ctx: KitContext) -> None:
    """An upstream error quoting the real key: the step fails, and the key is in no error
    text and in no file the CLI or jigs wrote."""
    _needs_proxy(ctx)
    kind, key, server = ctx.kind, ctx.key, ctx.server
    assert key is not None
    server.script.skip_remaining()
    quoting = f"invalid request for the key {key}: {key} may not call this model"
    for _ in range(4):  # a CLI that retries meets the same answer
        server.add(error(400, quoting))
    tree = ctx.worktree("key-not-relayed")
    failed: JigsError | None = None
    try:
        await ctx.turn(tree, "say hello")
    except JigsError as exc:
        failed = exc
    assert failed is not None, f"{kind}: a turn whose model answered 400 did not fail"
    shown = f"{failed}\n{getattr(failed, 'stderr_tail', '')}\n{failed!r}"
    assert key not in shown, f"{kind}: the step's error quotes the real key: {type(failed)}"
    assert server.model_requests, f"{kind}: the CLI never called its model"
    roots = [ctx.home, ctx.tmp_path, data_dir()]
    holders = sorted({str(p) for p in _files_holding(roots, key.encode())})
    assert not holders, (
        f"{kind}: the key an upstream error quoted was written to {holders[:5]}: the proxy must "
        f"mask it in what it relays"
    )


def _files_holding(roots: Sequence[Path], needle: bytes) -> list[Path]:
    found: list[Path] = []
    for root in roots:
        for path in root.rglob("*") if root.is_dir() else ():
            with contextlib.suppress(OSError):
                if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
                    found.append(path)
    return found


async def _tools_of_another_step(ctx: KitContext) -> None:
    problem = sandbox_problem()
    if problem is not None:
        raise CheckSkipped(f"this host cannot sandbox a step: {problem}")
    await tools_of_another_step(ctx)


async def _step_tools(ctx: KitContext) -> None:
    if ctx.plan.step_tool is None:
        raise CheckSkipped(
            f"the {ctx.kind} kind's plan names no step_tool: its CLI calls no MCP tools"
        )
    await step_tools(ctx)


async def _approval_pending(ctx: KitContext) -> None:
    if not ctx.harness.tool_gate:
        reason = ctx.harness.tool_gate_refusal
        raise CheckSkipped(f"the {ctx.kind} kind has no tool gate: {reason}")
    await approval_pending(ctx)


CHECKS: dict[str, Check] = {
    "descriptor_json": _descriptor_json,
    "stale_resume": _stale_resume,
    "no_model_refusal": _no_model_refusal,
    "lock_and_close": _lock_and_close,
    "fork_on_resume": _fork_on_resume,
    "hung_endpoint": _hung_endpoint,
    "hung_cli": _hung_cli,
    "turn_deadline": _turn_deadline,
    "cancelled_turn": _cancelled_turn,
    "interrupt": interrupt,
    "steer": steer,
    "bad_output": bad_output,
    "usage": _usage,
    "model_only": _model_only,
    "key_not_relayed": _key_not_relayed,
    "max_turns": _max_turns,
    "worker_death": _worker_death,
    "process_view": _process_view,
    "containment": containment,
    "home_per_step": home_per_step,
    "tools_of_another_step": _tools_of_another_step,
    "planted_config": _planted_config,
    "stray_mcp_configs": stray_mcp_configs,
    "step_tools": _step_tools,
    "tool_free": tool_free,
    "tool_gate": tool_gate,
    "approval_pending": _approval_pending,
    "event_stream": _event_stream,
    "env_canaries": _env_canaries,
    "no_leftovers": _no_leftovers,
}
