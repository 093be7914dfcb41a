"""The policy pipeline every agent step goes through, in order, owned by one :class:`Step`.

1. resolve the kind (and, for a runner, refuse a kind without a model before acquiring anything);
2. validate what the caller gave (``cwd``, ``run``, ``resume``, ``agents_env``; the prompt is
   checked by :func:`validate_prompt`): only :class:`~jigs.errors.JigsError`\\ s come out;
3. build the environment from empty (base list, the kind's names, ``agents.env``);
4. lock the worktree (one attempt, never waits: :class:`WorktreeBusyError`; exactly one winner);
5. the check stage: descriptor checks (:class:`CheckFailedError`), then just-in-time checks and
   MCP probes (:class:`JitCheckError`) -- :func:`check_stage`, shared with ``jigs doctor``;
6. when the kind declares a :class:`~jigs.plugin.ModelRoute` for the descriptor's key: start the
   step's credential proxy (:mod:`jigs.proxy._endpoint`), drop the key variable from the agent's
   environment and hand the kind the proxied endpoint (``ctx.model_endpoint``);
7. prove the session to resume exists (:class:`AgentSessionError`), fetching it from the
   session store first when the ref names a stored copy that is not here (digest-checked);
8. open the turn engine (the kind's transport, or its private files).

When the step closes, after everything is released, the session's artifacts go to the session
store (:mod:`jigs.stores._session_sync`), and their key and digest into the ref.

Each stage logs a structlog event with the run id, the kind and its duration. Whatever was
acquired is released, in reverse order, by :meth:`Step.aclose` (idempotent, shielded, bounded),
when the step ends or any stage fails, cancellation included.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import anyio
import anyio.lowlevel
import anyio.to_thread

from jigs.checks import Check, CheckOutcome, run_checks
from jigs.descriptors import HarnessDescriptor
from jigs.engine import _mcp_probe, _otel
from jigs.engine._engine import TurnEngine
from jigs.engine._logging import logger, timed
from jigs.engine._prompt import validate_text
from jigs.engine._tools import TOKEN_ENV, TOOLS_SERVER, StepTool, step_tools
from jigs.engine._types import AgentSessionRef, RunMetadata
from jigs.env import (
    RESERVED_AGENT_ENV,
    agents_config_for_worktree,
    build_env,
    validate_agents_env,
)
from jigs.errors import (
    AgentSessionError,
    AgentTimeoutError,
    CheckFailedError,
    EnvPolicyError,
    InvalidInputError,
    JigsError,
    JitCheckError,
    ModelNotAvailableError,
    PromptError,
    SandboxUnavailableError,
    SessionSaveError,
    WorktreeBusyError,
)
from jigs.harnesses import load
from jigs.mcp import McpHttpServer, McpProbe, McpStdioServer, looks_like_secret
from jigs.plugin import Harness, HarnessContext, HarnessTarget
from jigs.policy._lock import WorktreeLock
from jigs.policy._paths import data_dir, run_state_dir
from jigs.policy._secrets import remember, secret_scope
from jigs.proxy import _endpoint
from jigs.registry._contract import check_route
from jigs.registry._registry import KIND_NAME, Registry, default_registry
from jigs.sandbox import SandboxView
from jigs.sandbox._egress import EgressProxy
from jigs.sandbox._isolation import isolation, probe_soon
from jigs.sandbox._probe import FIX, sandbox_problem
from jigs.sandbox._probe import probe_soon as sandbox_probe_soon
from jigs.sandbox._proctree import processes_under
from jigs.sandbox._relays import EGRESS_PORT, StepServers, loopback_ports
from jigs.sandbox._runtime import stdio_server_paths
from jigs.stores import resolve_store
from jigs.stores._session_sync import (
    Snapshot,
    describe_store,
    record_run,
    restore_session,
    save_snapshot,
    snapshot,
)

if TYPE_CHECKING:
    import socket

    from jigs.plugin import ModelEndpoint, ModelRoute
    from jigs.processes import ManagedProcess
    from jigs.stores import SessionStore

__all__ = [
    "CLOSE_TIMEOUT",
    "JIT_TIMEOUT",
    "Step",
    "agent_env_for",
    "check_stage",
    "validate_prompt",
]

#: Seconds all just-in-time checks together may take.
JIT_TIMEOUT = 50.0
#: Seconds releasing a step may take in all (stop processes, remove homes, release the lock).
CLOSE_TIMEOUT = 10.0
#: Longest session id jigs accepts in a resume reference.
_MAX_SESSION_ID = 256


def validate_prompt(prompt: object) -> str:
    """The prompt, or :class:`PromptError`: it must be a non-empty string without NUL bytes.
    (A long prompt is fine: kinds pass it through stdin or a file, never one argv element.)"""
    return validate_text(prompt)


def _validate_cwd(cwd: object) -> Path:
    if isinstance(cwd, Path):
        raw = str(cwd)
    elif isinstance(cwd, str):
        raw = cwd
    else:
        raise InvalidInputError(
            f"cwd must be a path (str or pathlib.Path) naming the step's worktree, got "
            f"{type(cwd).__name__}",
            argument="cwd",
        )
    if not raw.strip():
        raise InvalidInputError(
            "cwd is empty; pass the step's worktree explicitly (jigs never falls back to the "
            "process's working directory)",
            argument="cwd",
        )
    if "\x00" in raw:
        raise InvalidInputError("cwd contains a NUL byte", argument="cwd")
    path = Path(raw)
    try:
        is_dir = path.is_dir()
        resolved = path.resolve() if is_dir else path
    except (OSError, RuntimeError, ValueError):
        is_dir = False
        resolved = path
    if not is_dir:
        raise InvalidInputError(
            f"the worktree {_shown(raw)} does not exist or is not a directory; create it (or "
            f"check out the repository) before the step runs",
            argument="cwd",
        )
    if resolved == Path(resolved.anchor):
        raise InvalidInputError(
            "cwd is the filesystem root; give the agent a worktree of its own", argument="cwd"
        )
    data = data_dir().resolve()
    if resolved == data or data in resolved.parents:
        raise InvalidInputError(
            f"cwd {resolved} is inside the jigs data directory {data}, which holds locks, homes "
            f"and sessions; give the agent a worktree outside it",
            argument="cwd",
        )
    return resolved


def _shown(text: str) -> str:
    parts = [p for p in re.split(r"[\s/:@?&=]+", text) if p]
    if len(text) > 200 or any(looks_like_secret(p) for p in [text, *parts]):
        return "<not shown>"
    return repr(text)


def _validate_run(run: object) -> RunMetadata:
    if isinstance(run, RunMetadata):
        return run
    if isinstance(run, Mapping) and all(isinstance(k, str) for k in run):
        return RunMetadata(**run)  # raises InvalidInputError naming the field
    raise InvalidInputError(
        f"run must be a jigs.RunMetadata, got {type(run).__name__}", argument="run"
    )


def _validate_resume(resume: object, harness: Harness[Any]) -> AgentSessionRef | None:
    if resume is None:
        return None
    if isinstance(resume, Mapping) and all(isinstance(k, str) for k in resume):
        resume = AgentSessionRef(**resume)  # raises InvalidInputError naming the field
    if not isinstance(resume, AgentSessionRef):
        raise InvalidInputError(
            f"resume must be an AgentSessionRef or None, got {type(resume).__name__}",
            argument="resume",
        )

    if (
        len(resume.id) > _MAX_SESSION_ID
        or not resume.id.isprintable()
        or "/" in resume.id
        or (looks_like_secret(resume.id) and not _kind_shaped(resume.id, harness))
    ):
        raise AgentSessionError(
            "the session id to resume is not one jigs recorded (too long, shaped like a secret, "
            "or holding '/' or control characters; not shown); start without resume",
            kind=_shown_kind(resume.harness),
            session_id="<not shown>",
        )
    return resume


def _kind_shaped(session_id: str, harness: Harness[Any]) -> bool:
    """Whether ``session_id`` has the shape the kind declares for its CLI's ids."""
    pattern = harness.session_id_pattern
    return pattern is not None and re.fullmatch(pattern, session_id) is not None


def _shown_kind(kind: str) -> str:
    return kind if KIND_NAME.fullmatch(kind) else "<not shown>"


def _validate_agents_env(agents_env: object) -> Sequence[str] | None:
    if agents_env is None:
        return None
    if isinstance(agents_env, str | bytes):
        raise InvalidInputError(
            "agents_env must be a list of variable names, not a single string (write "
            "agents_env=['IS_SANDBOX'], not agents_env='IS_SANDBOX')",
            argument="agents_env",
        )
    if not isinstance(agents_env, Sequence | set | frozenset):
        raise InvalidInputError(
            f"agents_env must be a list of variable names, got {type(agents_env).__name__}",
            argument="agents_env",
        )
    return list(agents_env)


def agent_env_for(
    harness: Harness[Any],
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


def jit_stage_checks(
    harness: Harness[Any],
    target: HarnessTarget[Any],
    env: Mapping[str, str],
    listed_only: frozenset[str] = frozenset(),
) -> list[Check]:
    """The just-in-time checks of a target: the kind's, then one probe per MCP server (those
    ``listed_only`` names, the step's own tools, listed but not called)."""
    checks = list(harness.jit_checks(target, env))
    descriptor = target.descriptor
    if descriptor.mcp_servers:
        private = frozenset(harness.env_allowlist(descriptor))
        checks.extend(
            _mcp_probe.mcp_probe_checks(
                descriptor.mcp_servers,
                cwd=target.cwd,
                env=env,
                private=private,
                listed_only=listed_only,
            )
        )
    return checks


async def check_stage(
    harness: Harness[Any],
    descriptor: HarnessDescriptor,
    env: Mapping[str, str],
    target: HarnessTarget[Any] | None,
    *,
    installation: bool = False,
    log: Any = None,
    span: Any = None,
    listed_only: frozenset[str] = frozenset(),
) -> tuple[list[CheckOutcome], list[CheckOutcome]]:
    """The check stage: ``(descriptor outcomes, jit outcomes)``. With ``installation`` the kind's
    installation checks run first (``jigs doctor``); without ``target`` no JIT check runs.
    Never raises for a failed check (the caller decides); just-in-time checks are bounded by
    :data:`JIT_TIMEOUT` together."""
    checks: list[Check] = list(harness.installation_checks(env)) if installation else []
    with timed("runner.checks.descriptor", log, span=span) as fields:
        checks += harness.descriptor_checks(descriptor, env)
        first = await run_checks(checks)
        fields["checks"] = [o.id for o in first]
    if target is None:
        return first, []
    with timed("runner.checks.jit", log, span=span) as fields:
        try:
            with anyio.fail_after(JIT_TIMEOUT):
                jit = await run_checks(jit_stage_checks(harness, target, env, listed_only))
        except TimeoutError:
            jit = [
                CheckOutcome(
                    "jit",
                    "Just-in-time checks",
                    ok=False,
                    reason=f"they did not finish within {JIT_TIMEOUT:g}s together",
                    repair="run `jigs doctor --cwd DIR` to see which check hangs",
                    unanswered=True,
                )
            ]
        fields["checks"] = [o.id for o in jit]
    return first, jit


class Step:
    """One agent step: its stages and everything it acquired.

    ``await step.open(...)`` runs the stages and leaves :attr:`engine` ready; :meth:`aclose`
    releases everything in reverse order. :meth:`aclose` is idempotent, shielded from
    cancellation and bounded by :data:`CLOSE_TIMEOUT`; when a kind's cleanup overruns, the
    worktree lock is still released.
    """

    def __init__(self, registry: Registry | None = None, session_store: object = None) -> None:
        self.registry = registry
        self._store_spec = session_store
        self.store: SessionStore | None = None
        self.harness: Harness[Any] | None = None
        self.workdir: Path | None = None
        self._snapshots: dict[str, Snapshot] = {}
        #: After close: session id -> (store key, digest) of what was stored.
        self.stored: dict[str, tuple[str, str]] = {}
        #: The first session that could not be stored at close: :meth:`aclose` raises it once.
        self.save_error: SessionSaveError | None = None
        self.stack = AsyncExitStack()
        #: The step's registry of secret values (:func:`~jigs.policy._secrets.secret_scope`),
        #: closed last: a worker's registry then holds the open steps' values, not every value
        #: of every step it ever ran (which each log event's redaction scanned).
        self._secrets = ExitStack()
        self.lock: Any = None
        self.ctx: HarnessContext | None = None
        self.log: Any = logger
        #: The caller's descriptor's ``describe()``: what the step's sessions are recorded under.
        self.describe: str | None = None
        #: The caller's descriptor (its kind sees it with the step's tool server added).
        self.descriptor: HarnessDescriptor | None = None
        #: Where the turns' images are copied (made when the step may get images).
        self._image_dir: Path | None = None
        self.closed = False
        self.started = time.perf_counter()
        self._closing = anyio.Lock()
        self._sessions_saving = False
        self._sessions_saved = anyio.Event()
        self._engine: TurnEngine | None = None
        #: Stops the step's credential proxy (the close stack stops it too; idempotent).
        self._stop_proxy: Callable[[], Coroutine[Any, Any, None]] | None = None
        #: The step's OpenTelemetry span (None without ``opentelemetry-api``).
        self.span: Any = None
        #: Why opening failed (recorded on the span).
        self.error: BaseException | None = None
        #: The questions the step's agent asks (``ask_human``), shared with the tool server.
        self._questions: list[Any] = []

    @property
    def engine(self) -> TurnEngine:
        if self._engine is None:
            raise RuntimeError("the step is not open")
        return self._engine

    async def open(
        self,
        descriptor_or_data: object,
        *,
        cwd: object,
        run: object,
        resume: object,
        agents_env: object,
        need_model: bool,
        gated: bool = False,
        tool_free: bool = False,
        tools: object = None,
        images: bool = False,
    ) -> TurnEngine:
        """Run every stage; raises the first failure (kept in :attr:`error`; the caller then
        calls :meth:`aclose`). ``gated``: the step passes a tool gate, which a kind without
        ``tool_gate`` refuses here, before anything is acquired. ``tool_free`` (an ask): ``cwd``
        is its scratch directory; the kind must say it runs without tools, the descriptor must
        declare no MCP server, and nothing is locked or stored."""
        try:
            self._secrets.enter_context(secret_scope())
            probes_soon(descriptor_or_data)
            run_meta = _validate_run(run)
            harness, descriptor = self._resolve(descriptor_or_data, run_meta)
            session = _kind_refusals(
                harness, descriptor, need=(need_model, images, tool_free, gated), resume=resume
            )
            workdir = _validate_cwd(cwd)
            names = _validate_agents_env(agents_env)
            checked = _validate_tools(tools, descriptor)
            sandboxed = _sandbox_or_refuse(descriptor, self.log)
            # sessions are recorded under the caller's descriptor, not its kind's (+ tools)
            self.describe, self.descriptor = descriptor.describe(), descriptor
            # an ask stores nothing: its session is never resumed
            self.store = None if tool_free else resolve_store(self._store_spec, cwd=workdir)
            self.harness, self.workdir = harness, workdir

            env = self._build_env(harness, descriptor, workdir, names)
            if not tool_free:  # an ask's scratch directory is its own: nothing to share
                self._lock(workdir, run_meta)
            if checked:
                descriptor, env = await self._serve_tools(checked, descriptor, env)

            target: HarnessTarget[Any] = HarnessTarget(
                descriptor=descriptor,
                cwd=workdir,
                resume=session,
                gated=gated,
                tool_free=tool_free,
            )
            await self._checks(harness, descriptor, env, target, listed_only=bool(checked))
            ctx = self._context(harness, target, env, run_meta, sandboxed)
            self.ctx = ctx
            if images or (need_model and harness.takes_images):
                # before the kind launches: a CLI that keeps running (Codex's app server)
                self._image_dir = ctx.private_dir("jigs-images-")
            return await self._resume_and_open(harness, target, ctx, run_meta, session)
        except BaseException as exc:
            self.error = exc
            raise

    def _build_env(
        self,
        harness: Harness[Any],
        descriptor: HarnessDescriptor,
        workdir: Path,
        names: Sequence[str] | None,
    ) -> dict[str, str]:
        with timed("runner.env.built", self.log, span=self.span) as fields:
            env, source = agent_env_for(harness, descriptor, workdir, names)
            fields.update(names=sorted(env), agents_env_source=source)
        return env

    async def _resume_and_open(
        self,
        harness: Harness[Any],
        target: HarnessTarget[Any],
        ctx: HarnessContext,
        run_meta: RunMetadata,
        session: Any,
    ) -> TurnEngine:
        record_run(run_meta)
        if session is not None and self.store is not None:
            await self._verify_resume(self.store, harness, target, ctx, session)
        return await self._open_engine(harness, target, ctx)

    def _resolve(
        self, descriptor_or_data: object, run_meta: RunMetadata
    ) -> tuple[Harness[Any], HarnessDescriptor]:
        """Resolve the kind; the step's log and span carry the run id and the kind from here."""
        registry = self.registry or default_registry()
        with timed("runner.resolve", run_id=run_meta.workflow_run_id) as fields:
            harness, descriptor = _resolve(registry, descriptor_or_data)
            fields["kind"] = harness.kind
        self.log = logger.bind(run_id=run_meta.workflow_run_id, kind=harness.kind)
        self.span = _otel.start(
            "jigs.step",
            **{
                "jigs.kind": harness.kind,
                "jigs.run_id": run_meta.workflow_run_id,
                "jigs.step_name": run_meta.step_name,
            },
        )
        return harness, descriptor

    def _lock(self, workdir: Path, run_meta: RunMetadata) -> None:
        """Take the worktree lock (released when the step closes), then refuse a worktree a
        dead worker's agent still works in."""
        log = self.log
        lock = WorktreeLock(workdir, run_meta.workflow_run_id)
        with timed(
            "runner.lock.acquired", log, span=self.span, worktree=str(workdir), lock=str(lock.path)
        ):
            lock.acquire()
        self.lock = lock

        def release() -> None:
            lock.release()
            log.info("runner.lock.released", worktree=str(workdir))

        self.stack.callback(release)
        _refuse_leftovers(workdir, log)

    async def _checks(
        self,
        harness: Harness[Any],
        descriptor: HarnessDescriptor,
        env: Mapping[str, str],
        target: HarnessTarget[Any],
        *,
        listed_only: bool,
    ) -> None:
        first, jit = await check_stage(
            harness,
            descriptor,
            env,
            target,
            log=self.log,
            span=self.span,
            listed_only=frozenset({TOOLS_SERVER}) if listed_only else frozenset(),
        )
        failed = [o for o in first if not o.ok]
        if failed:
            raise CheckFailedError(failed, what=f"{harness.kind} descriptor checks")
        failed = [o for o in jit if not o.ok]
        if failed:
            raise JitCheckError(failed)

    async def _serve_tools(
        self, tools: list[StepTool], descriptor: HarnessDescriptor, env: dict[str, str]
    ) -> tuple[HarnessDescriptor, dict[str, str]]:
        """Serve the step's Python tools in the worker (:mod:`jigs.engine._tool_server`, loaded
        only here: it brings the ``mcp`` SDK and uvicorn), stopped when the step closes. Returns
        the descriptor the kind sees (one more HTTP MCP server) and the agent's env (its token).
        """
        from jigs.engine import _tool_server

        with timed("runner.tools.started", self.log, span=self.span, tools=len(tools)) as fields:
            try:
                server = _tool_server.ToolServer(
                    tools,
                    log=self.log,
                    caller=anyio.lowlevel.current_token(),
                    kind=getattr(self.harness, "kind", ""),
                )
                self._questions = server.questions
                fields["port"] = server.port
                self.stack.push_async_callback(server.astop)
                remember([server.token])
                await server.astart()
            except OSError as exc:  # no loopback port, no thread: a failed check of the step
                failed = CheckOutcome(
                    f"mcp.{TOOLS_SERVER}",
                    "The step's tools",
                    ok=False,
                    reason=f"their MCP server could not start ({type(exc).__name__}: {exc})",
                    repair="check the worker's loopback interface and its thread limit",
                )
                raise JitCheckError([failed]) from None
        declared = McpHttpServer(
            url=server.url, bearer_token_env=TOKEN_ENV, probe=McpProbe(tool=tools[0].name)
        )
        servers = {**descriptor.mcp_servers, TOOLS_SERVER: declared}
        return descriptor.replace(mcp_servers=servers), {**env, TOKEN_ENV: server.token}

    def _context(
        self,
        harness: Harness[Any],
        target: HarnessTarget[Any],
        env: dict[str, str],
        run_meta: RunMetadata,
        sandboxed: bool,
    ) -> _StepContext:
        """The kind's context: the credential proxy started when the kind routes the key, the
        sandbox's view and what it serves inside."""
        kind = harness.kind
        descriptor = target.descriptor
        endpoint = begin_proxy = None
        route = harness.model_route(descriptor)
        check_route(kind, route, descriptor)
        if route is not None:
            endpoint, begin_proxy, serve_also = self._start_proxy(route, kind)
            # the key never reaches the agent: the kind gives its CLI the endpoint instead
            env = {name: value for name, value in env.items() if name != route.key_env}
            env = _bypass_proxy_for_loopback(env)
        state_dir = run_state_dir(run_meta.workflow_run_id, kind)
        view = None
        if sandboxed:
            view = _sandbox_view(descriptor, env, target.cwd, state_dir)
            if endpoint is not None:
                view.listen[_port_of(endpoint.base_url)] = serve_also
            proxies = _serve_in_sandbox(view, descriptor, self.stack, self.log)
            env = {**env, **proxies}
        return _StepContext(
            begin_proxy=begin_proxy,
            run=run_meta,
            env=env,
            state_dir=state_dir,
            kind=kind,
            stack=self.stack,
            log=self.log,
            inherit_fds=tuple(getattr(self.lock, "fds", ())),
            model_endpoint=endpoint,
            sandbox=view,
        )

    def _start_proxy(
        self, route: ModelRoute, kind: str
    ) -> tuple[ModelEndpoint, Callable[[], None], Callable[[socket.socket], None]]:
        """Start the step's credential proxy: its endpoint, what starts it serving, and what
        serves it inside the sandbox."""
        with timed(
            "runner.proxy.started",
            self.log,
            span=self.span,
            upstream=route.upstream,
            key_env=route.key_env,
            scheme=route.scheme,
        ):
            endpoint, begin_proxy, self._stop_proxy, serve_also = _endpoint.prepare_model_endpoint(
                route, kind=kind, stack=self.stack, log=self.log
            )
        return endpoint, begin_proxy, serve_also

    async def _verify_resume(
        self,
        store: SessionStore,
        harness: Harness[Any],
        target: HarnessTarget[Any],
        ctx: HarnessContext,
        session: AgentSessionRef,
    ) -> None:
        """Prove the session to resume is here (fetched from the store when it is not)."""
        kind = harness.kind
        with timed("runner.resume.verified", self.log, span=self.span, session_id=session.id):
            try:
                await restore_session(
                    store, harness, ref=session, ctx=ctx, cwd=target.cwd, log=self.log
                )
                await harness.verify_resume(target, ctx)
            except JigsError:
                raise
            except (OSError, ValueError) as exc:
                raise AgentSessionError(
                    f"the {kind} session {session.id[:64]} cannot be read "
                    f"({type(exc).__name__}); start without resume",
                    kind=kind,
                    session_id=session.id,
                ) from None

    async def _open_engine(
        self, harness: Harness[Any], target: HarnessTarget[Any], ctx: HarnessContext
    ) -> TurnEngine:
        descriptor = target.descriptor
        limit = float(descriptor.idle_timeout)
        with timed("runner.engine.opened", self.log, span=self.span):
            try:
                # a little past the limit, so a kind's own, more precise timeout wins
                with anyio.fail_after(limit + 2.0):
                    self._engine = await TurnEngine.open(harness, target, ctx)
                    self._engine.span = self.span
                    self._engine.session_descriptor = self.describe
                    self._engine.image_dir = self._image_dir
                    self._engine.questions = self._questions
            except TimeoutError as exc:
                if isinstance(exc, JigsError):
                    raise

                raise AgentTimeoutError(
                    f"the {harness.display_name} CLI did not get ready within {limit:g}s (the "
                    f"descriptor's idle_timeout); jigs stopped it. Run `jigs doctor`, or raise "
                    f"idle_timeout if it starts that slowly",
                    kind=harness.kind,
                    limit="idle_timeout",
                    seconds=limit,
                    descriptor=descriptor.describe(),
                ) from None
        return self._engine

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            async with self._closing:
                if self.closed:
                    return
                self.closed = True
                try:
                    await self._close()
                finally:
                    # last: the step's secret values stay redacted until all it ran is gone
                    self._secrets.close()

    async def _close(self) -> None:
        if self.ctx is not None:
            self.ctx.closed = True
        started = time.perf_counter()
        failure: BaseException | None = None
        with anyio.move_on_after(CLOSE_TIMEOUT) as scope:
            async with anyio.create_task_group() as group:
                # a kind that says its CLI is done (ctx.sessions_complete) has the
                # session stored, and the proxy stopped, while its processes die and
                # the rest of the close runs
                ctx = self.ctx if isinstance(self.ctx, _StepContext) else None

                def store_now() -> None:
                    group.start_soon(self._save_sessions)
                    if self._stop_proxy is not None:
                        group.start_soon(self._stop_proxy)

                if ctx is not None:
                    ctx.on_sessions_complete = store_now
                try:
                    await self.stack.aclose()
                except BaseException as exc:  # raised as itself, not in a group
                    failure = exc
                finally:
                    if ctx is not None:
                        ctx.on_sessions_complete = None
            if failure is not None:
                raise failure
        if scope.cancelled_caught:
            self.log.warning("runner.close.timeout", seconds=CLOSE_TIMEOUT)
            if self.lock is not None:
                self.lock.release()
        await self._save_sessions()  # at once when it ran already
        if self.ctx is not None:
            self.log.info("runner.closed", seconds=round(time.perf_counter() - started, 4))

        _otel.end(self.span, self.error)
        if self.save_error is not None:  # the step fails: see SessionSaveError
            error, self.save_error = self.save_error, None
            raise error

    def snapshot_ref(self, session_id: str) -> tuple[str, str] | None:
        """``(store key, digest)`` the session will have in the store once the step closes
        (the artifacts as they are now), or None when the kind declares none. For
        ``AgentRunner.session_from``, called while the step is open."""
        if self.ctx is None or self.harness is None or self.workdir is None:
            return None
        snap = snapshot(self.harness, self.ctx, self.workdir, session_id)
        if snap is None:
            return None
        self._snapshots[snap.digest] = snap
        return snap.key, snap.digest

    async def _save_sessions(self) -> None:
        """Store the engine's latest session and every snapshot handed out, once (a second
        call, or one while the first runs, returns when it is done); never raises."""
        if self._sessions_saved.is_set():
            return
        if self._sessions_saving:
            await self._sessions_saved.wait()
            return
        self._sessions_saving = True
        try:
            with anyio.CancelScope(shield=True):
                await self._store_sessions()
        finally:
            self._sessions_saved.set()

    async def _store_sessions(self) -> None:
        store, ctx, harness = self.store, self.ctx, self.harness
        try:
            if store is None or ctx is None or harness is None or self.workdir is None:
                return
            session_id = self._engine.session_id if self._engine is not None else None
            final = None
            if session_id:
                final = snapshot(harness, ctx, self.workdir, session_id)
                if final is not None:
                    self._snapshots.setdefault(final.digest, final)
            for snap in self._snapshots.values():
                try:
                    await save_snapshot(store, snap, ctx, self.log)
                except SessionSaveError as exc:
                    self.save_error = self.save_error or exc
                    continue
                if snap is final and session_id:
                    self.stored[session_id] = (snap.key, snap.digest)
        except Exception as exc:  # a kind's session_artifacts that raises: the close goes on
            self.log.error("store.session.save_failed", error=type(exc).__name__)
            self.save_error = self.save_error or SessionSaveError(
                f"the {harness.kind if harness else '?'} kind failed to list its session's files "
                f"({type(exc).__name__}), so the session was not saved and the step fails; "
                f"report it to the kind's authors",
                store=describe_store(store) if store is not None else "-",
                session_id=None,
                retryable=False,
            )
        finally:
            close = getattr(store, "close", None)
            if isinstance(self._store_spec, str | Mapping | None) and callable(close):
                with anyio.move_on_after(5):
                    await anyio.to_thread.run_sync(close, abandon_on_cancel=True)


def _kind_refusals(
    harness: Harness[Any],
    descriptor: HarnessDescriptor,
    *,
    need: tuple[bool, bool, bool, bool],
    resume: object,
) -> AgentSessionRef | None:
    """What the kind alone refuses, before anything is acquired, for what the step needs (a
    model, images, no tools: an ask, a tool gate); the session to resume."""
    kind = harness.kind
    need_model, images, tool_free, gated = need
    if need_model and not harness.has_model:
        raise ModelNotAvailableError(kind)
    if gated and not harness.tool_gate:
        raise InvalidInputError(
            f"the {kind} kind cannot gate tool calls, so it refuses approve_tool: "
            f"{harness.tool_gate_refusal}",
            argument="approve_tool",
        )
    if images and not harness.takes_images:
        raise PromptError(f"the {kind} kind takes no images in a prompt; send text only")
    session = _validate_resume(resume, harness)
    if session is not None and session.harness != kind:
        raise AgentSessionError(
            f"session {session.id} was recorded on the {session.harness} harness and this "
            f"step runs on {kind}; start without resume",
            kind=kind,
            session_id=session.id,
        )
    if tool_free:
        _refuse_tools(harness, descriptor)
    return session


def _validate_tools(tools: object, descriptor: HarnessDescriptor) -> list[StepTool]:
    """The step's checked tools; the name they are served under must be free."""
    checked = step_tools(tools)
    if checked and TOOLS_SERVER in descriptor.mcp_servers:
        raise InvalidInputError(
            f"the descriptor declares an MCP server named {TOOLS_SERVER!r}, the name the step's "
            f"tools= are served under; rename that server",
            argument="tools",
        )
    return checked


def probes_soon(descriptor_or_data: object) -> None:
    """Start the host probes a fresh process's first step waits for (each runs once per
    process), so they run while the step resolves and locks: the namespace chain's (the leftover
    check, unsandboxed launches) and, unless the descriptor says ``sandbox="off"``, bwrap's
    (collected by :func:`_sandbox_or_refuse`). Never raises."""
    probe_soon()
    if isinstance(descriptor_or_data, Mapping):
        sandbox = descriptor_or_data.get("sandbox", "on")
    else:
        sandbox = getattr(descriptor_or_data, "sandbox", "on")
    if sandbox != "off":
        sandbox_probe_soon()


def _sandbox_or_refuse(descriptor: HarnessDescriptor, log: Any) -> bool:
    """Whether the step runs sandboxed (``sandbox="on"``, the default); raises
    :class:`~jigs.errors.SandboxUnavailableError` when it asks for it and the host cannot."""
    if descriptor.sandbox != "on":
        log.warning("runner.sandbox.off", reason="the descriptor says sandbox='off'")
        return False

    problem = sandbox_problem()
    if problem is not None:
        raise SandboxUnavailableError(descriptor.kind, problem, FIX)
    if descriptor.network == "host":
        log.warning("runner.network.host", reason="the descriptor says network='host'")
    return True


def _sandbox_view(
    descriptor: HarnessDescriptor, env: Mapping[str, str], workdir: Path, state_dir: Path
) -> SandboxView:
    """The step's sandbox: its worktree and the run's state dir for the kind writable, an
    empty HOME, the descriptor's network, what its declared stdio MCP servers run from
    read-only (the CLI starts them inside it); the kind exposes what its CLI needs on top."""
    view = SandboxView(
        home=env.get("HOME"), network="host" if descriptor.network == "host" else "deny"
    )
    view.expose(workdir, writable=True)
    view.expose(state_dir, writable=True)
    stdio = [
        (s.command, s.args)
        for s in descriptor.mcp_servers.values()
        if isinstance(s, McpStdioServer)
    ]
    for path in stdio_server_paths(stdio, env):
        # one already writable (a file in the worktree) stays so: a read-only bind on top of
        # it would take that away from the server and the agent
        if not any(Path(path).is_relative_to(w) for w in view.writable):
            view.expose(path)
    return view


def _serve_in_sandbox(
    view: SandboxView, descriptor: HarnessDescriptor, stack: AsyncExitStack, log: Any
) -> dict[str, str]:
    """Serve the step's declared loopback MCP servers (relays) and, with ``network={"allow":
    [...]}``, its egress proxy inside the sandbox (see :mod:`jigs.sandbox._relays`), stopped
    when the step closes. Returns the variables that point the agent at the egress proxy."""
    if view.network == "host":
        return {}
    servers = StepServers(log)
    stack.callback(servers.close)
    urls = [u for s in descriptor.mcp_servers.values() if (u := getattr(s, "url", None))]
    for port, host in loopback_ports(urls).items():
        view.listen.setdefault(port, servers.relay(port, host))
    allow = descriptor.network_allow()
    if not allow:
        return {}

    token = os.urandom(18).hex()
    egress = EgressProxy(allow, token=token, log=log)
    port = next(p for p in range(EGRESS_PORT, EGRESS_PORT + 100) if p not in view.listen)
    view.listen[port] = servers.handler(egress.serve)
    url = f"http://{token}@127.0.0.1:{port}"

    remember([token])  # redacted by value wherever it could be shown
    # every spelling _bypass_proxy_for_loopback knows, and loopback (the credential proxy, the
    # relays) reached directly
    return {n: url for n in _HTTP_PROXY_NAMES} | {
        n: "127.0.0.1,localhost" for n in ("NO_PROXY", "no_proxy")
    }


def _port_of(url: str) -> int:
    port = urlsplit(url).port
    if port is None:  # the proxy's URL always names its port
        raise RuntimeError("the credential proxy's URL has no port")
    return port


_HTTP_PROXY_NAMES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)


def _bypass_proxy_for_loopback(env: dict[str, str]) -> dict[str, str]:
    """With an HTTP proxy in the agent's environment, add ``127.0.0.1`` to its no-proxy list, so
    the CLI reaches the step's loopback credential proxy directly (some CLIs send even loopback
    requests through ``HTTPS_PROXY``). Each no-proxy variable already set is extended; when none
    is, both spellings are set."""
    if not any(env.get(name) for name in _HTTP_PROXY_NAMES):
        return env
    present = [name for name in ("NO_PROXY", "no_proxy") if name in env]
    for name in present or ["NO_PROXY", "no_proxy"]:
        entries = [e for e in env.get(name, "").split(",") if e.strip()]
        if "127.0.0.1" not in (e.strip() for e in entries):
            env[name] = ",".join([*entries, "127.0.0.1"])
    return env


@dataclass
class _StepContext(HarnessContext):
    """The context the pipeline hands a kind: the step's first launch starts its proxy serving
    (its thread then starts while the CLI does, not before the CLI's launch); for a kind that
    launches nothing through :meth:`launch`, the first turn's start does (the engine calls
    ``begin_proxy``, idempotent)."""

    begin_proxy: Callable[[], None] | None = None
    #: Set by the step while it closes: stores the sessions now (see :meth:`sessions_complete`).
    on_sessions_complete: Callable[[], None] | None = None

    def sessions_complete(self) -> None:
        store, self.on_sessions_complete = self.on_sessions_complete, None
        if store is not None:
            store()

    async def launch(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        stdin: Literal["closed", "pipe"] = "closed",
        owner: str | None = None,
    ) -> ManagedProcess:
        process = await super().launch(argv, cwd=cwd, env=env, stdin=stdin, owner=owner)
        begin, self.begin_proxy = self.begin_proxy, None
        if begin is not None:
            begin()
        return process


def _refuse_leftovers(workdir: Path, log: Any) -> None:
    """Without process namespaces (the ``tree`` fallback) a SIGKILLed worker's agent commands can
    outlive it, and the CLI did not hand them the lock's descriptors: refuse the worktree while
    any process still works in it (:class:`~jigs.errors.WorktreeBusyError` naming one), so two
    agents never share it. In namespace mode the namespace holds the lock until its last process
    is gone, so nothing needs checking."""
    if isolation().mode == "namespace":
        return

    leftovers = processes_under(workdir)
    if leftovers:
        pid, name = leftovers[0]
        log.warning("runner.worktree.leftovers", pids=[p for p, _ in leftovers][:10], name=name)
        raise WorktreeBusyError(workdir, None, pid)


def _refuse_tools(harness: Harness[Any], descriptor: HarnessDescriptor) -> None:
    """An ask runs without tools: refuse a descriptor with MCP servers, and a kind that cannot
    turn its CLI's tools off (its reason)."""
    if descriptor.mcp_servers:
        raise InvalidInputError(
            "ask_agent runs without tools, so it has no MCP servers; give it a descriptor "
            "without mcp_servers (or use run_agent with a worktree)",
            argument="harness",
        )
    problem = harness.tool_free_problem(descriptor)
    if problem is not None:
        raise InvalidInputError(f"ask_agent cannot run this harness: {problem}", argument="harness")


def _resolve(registry: Registry, data: object) -> tuple[Harness[Any], HarnessDescriptor]:
    descriptor = load(data, registry=registry)  # type: ignore[arg-type]
    return registry.get(descriptor.kind), descriptor
