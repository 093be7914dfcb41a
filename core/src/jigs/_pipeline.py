"""The policy pipeline every agent step goes through, in order.

1. resolve the kind (and, for a runner, refuse a kind without a model before acquiring anything);
2. refuse a ``resume`` recorded on another kind;
3. build the environment from empty (base list, the kind's names, ``agents.env``);
4. descriptor checks (:class:`CheckFailedError`), then just-in-time checks (:class:`JitCheckError`);
5. prove the session to resume exists (:class:`AgentSessionError`);
6. lock the worktree (never waits: :class:`WorktreeBusyError`);
7. hand over to the kind (``open`` or ``run``).

Each stage logs a structlog event with the run id, the kind and its duration. Whatever was
acquired is released, in reverse order, when the step ends or any stage fails (cancellation
included).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from jigs._lock import WorktreeLock
from jigs._logging import logger, timed
from jigs._paths import run_state_dir
from jigs._registry import Registry, default_registry
from jigs._types import AgentSessionRef, RunMetadata
from jigs.checks import CheckOutcome, run_checks
from jigs.descriptors import HarnessDescriptor
from jigs.env import (
    RESERVED_AGENT_ENV,
    agents_config_for_worktree,
    build_env,
    validate_agents_env,
)
from jigs.errors import (
    AgentSessionError,
    CheckFailedError,
    EnvPolicyError,
    JitCheckError,
    ModelNotAvailableError,
)
from jigs.plugin import Harness, HarnessContext, HarnessTarget

__all__ = ["CLOSE_TIMEOUT", "Prepared", "StepScope", "agent_env_for", "prepare"]

#: Seconds all just-in-time checks together may take.
JIT_TIMEOUT = 50.0
#: Seconds releasing a step may take in all (stop processes, remove homes, release the lock).
CLOSE_TIMEOUT = 10.0


class StepScope:
    """Everything one step acquired, released in reverse order by :meth:`aclose`.

    :meth:`aclose` is idempotent, shielded from cancellation and bounded by
    :data:`CLOSE_TIMEOUT`; when a kind's cleanup overruns, the worktree lock is still released.
    """

    def __init__(self) -> None:
        self.stack = AsyncExitStack()
        self.lock: WorktreeLock | None = None
        self.ctx: HarnessContext | None = None
        self.log: Any = logger
        self.closed = False
        self._closing = anyio.Lock()

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            async with self._closing:
                if self.closed:
                    return
                self.closed = True
                if self.ctx is not None:
                    self.ctx.closed = True
                started = time.perf_counter()
                with anyio.move_on_after(CLOSE_TIMEOUT) as scope:
                    await self.stack.aclose()
                if scope.cancelled_caught:
                    self.log.warning("runner.close.timeout", seconds=CLOSE_TIMEOUT)
                    if self.lock is not None:
                        self.lock.release()
                if self.ctx is not None:
                    self.log.info("runner.closed", seconds=round(time.perf_counter() - started, 4))


@dataclass(slots=True)
class Prepared:
    """A step that passed every stage: the kind, its context and the target."""

    harness: Harness
    target: HarnessTarget
    ctx: HarnessContext
    lock: WorktreeLock
    started: float


def agent_env_for(
    harness: Harness,
    descriptor: HarnessDescriptor,
    cwd: Path,
    agents_env: Sequence[str] | None,
) -> tuple[dict[str, str], str]:
    """The environment an agent of this kind gets, and where ``agents.env`` came from."""
    reserved = dict(RESERVED_AGENT_ENV)
    reserved.update({name: "is set by jigs for this harness kind" for name in harness.sets_env})
    if agents_env is not None:
        names = validate_agents_env(agents_env, source="agents_env=", reserved=reserved)
        source = "agents_env="
    else:
        config = agents_config_for_worktree(cwd)
        names = validate_agents_env(config.env, source=config.source, reserved=reserved)
        source = config.source
    for server_name, server in descriptor.mcp_servers.items():
        clash = sorted(server.env_names() & reserved.keys())
        if clash:
            raise EnvPolicyError(
                f"MCP server {server_name!r} reads {clash[0]}, which {reserved[clash[0]]}; give "
                f"the server a credential variable of its own",
                name=clash[0],
                source=f"mcp_servers.{server_name}",
            )
    kind_names = [n for n in harness.env_allowlist(descriptor) if n not in harness.sets_env]
    return build_env([*kind_names, *names]), source


def _coerce_descriptor(registry: Registry, harness: object) -> tuple[Harness, HarnessDescriptor]:
    from jigs.harnesses import load

    descriptor = load(harness)  # type: ignore[arg-type]
    return registry.get(descriptor.kind), descriptor


async def prepare(
    descriptor_or_data: object,
    *,
    cwd: str | Path,
    run: RunMetadata,
    resume: AgentSessionRef | None,
    agents_env: Sequence[str] | None,
    need_model: bool,
    scope: StepScope,
    registry: Registry | None = None,
) -> Prepared:
    """Run stages 1-6, registering every release on ``scope``. Raises on the first failure;
    the caller closes ``scope`` (which releases what was acquired)."""
    stack = scope.stack
    started = time.perf_counter()
    reg = registry or default_registry()
    with timed("runner.resolve", run_id=run.workflow_run_id) as fields:
        harness, descriptor = _coerce_descriptor(reg, descriptor_or_data)
        fields["kind"] = harness.kind
    kind = harness.kind
    log = logger.bind(run_id=run.workflow_run_id, kind=kind)
    scope.log = log
    if need_model and not harness.has_model:
        raise ModelNotAvailableError(kind)

    if resume is not None and resume.harness != kind:
        raise AgentSessionError(
            f"session {resume.id} was recorded on the {resume.harness} harness and this step "
            f"runs on {kind}; start without resume",
            kind=kind,
            session_id=resume.id,
        )

    workdir = Path(cwd)
    if not workdir.is_dir():
        raise EnvPolicyError(f"the worktree {workdir} does not exist or is not a directory")
    workdir = workdir.resolve()

    with timed("runner.env.built", log) as fields:
        env, source = agent_env_for(harness, descriptor, workdir, agents_env)
        fields.update(names=sorted(env), agents_env_source=source)

    # A worktree another agent holds fails now, not after seconds of checks and probes; the lock
    # itself is still taken only after the checks pass.
    probe = WorktreeLock(workdir, run.workflow_run_id)
    probe.acquire()
    probe.release()

    target = HarnessTarget(descriptor=descriptor, cwd=workdir, resume=resume)
    with timed("runner.checks.descriptor", log) as fields:
        outcomes = await run_checks(harness.descriptor_checks(descriptor, env))
        failed = [o for o in outcomes if not o.ok]
        fields["checks"] = [o.id for o in outcomes]
        if failed:
            raise CheckFailedError(failed, what=f"{kind} descriptor checks")

    with timed("runner.checks.jit", log) as fields:
        checks = list(harness.jit_checks(target, env))
        if descriptor.mcp_servers:
            from jigs._mcp_probe import mcp_probe_checks

            private = frozenset(harness.env_allowlist(descriptor))
            checks.extend(
                mcp_probe_checks(descriptor.mcp_servers, cwd=workdir, env=env, private=private)
            )
        try:
            with anyio.fail_after(JIT_TIMEOUT):
                outcomes = await run_checks(checks)
        except TimeoutError:
            outcomes = [
                CheckOutcome(
                    "jit",
                    "Just-in-time checks",
                    ok=False,
                    reason=f"they did not finish within {JIT_TIMEOUT:g}s together",
                    repair="run `jigs doctor --cwd DIR` to see which check hangs",
                    unanswered=True,
                )
            ]
        failed = [o for o in outcomes if not o.ok]
        fields["checks"] = [o.id for o in outcomes]
        if failed:
            raise JitCheckError(failed)

    ctx = HarnessContext(
        run=run,
        env=env,
        state_dir=run_state_dir(run.workflow_run_id, kind),
        kind=kind,
        stack=stack,
        log=log,
    )
    scope.ctx = ctx
    if resume is not None:
        with timed("runner.resume.verified", log, session_id=resume.id):
            await harness.verify_resume(target, ctx)

    lock = WorktreeLock(workdir, run.workflow_run_id)
    with timed("runner.lock.acquired", log, worktree=str(workdir), lock=str(lock.path)):
        lock.acquire()
    scope.lock = lock

    def release() -> None:
        lock.release()
        log.info("runner.lock.released", worktree=str(workdir))

    stack.callback(release)
    return Prepared(harness, target, ctx, lock, started)
