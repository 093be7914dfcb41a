"""Codex's session transport: a private home, one ``codex app-server`` per step, one thread.

:func:`open_transport` builds the home (from the per-binary seed), launches the app server with
exactly the step's environment plus ``CODEX_HOME`` (in the step's process namespace, stdin a
pipe),
initializes it and starts or resumes the thread. Each turn is ``turn/start`` then the turn's
notifications, read by the core's engine through :class:`CodexTurn` (which answers the server's
requests on the way); the engine's deadlines and limits stop a turn with :meth:`CodexTurn.abort`
(``turn/interrupt``, bounded). Closing an idle step does not wait on Codex's own shutdown when
the thread's rollout already ends with the last turn's ``task_complete`` (the session is whole:
the app server is stopped at once); otherwise it ends the app server's input, so Codex shuts down
on its own, its rollout flushed. The core then stops the whole namespace as for every kind (the
commands Codex started in sessions of their own included, and a Codex that did not exit in
time) before the home is removed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from jigs.errors import AgentOutputError, AgentTurnError, CliNotFoundError, DescriptorError
from jigs.executables import Resolved
from jigs.plugin import HarnessContext, HarnessTarget, SessionTransport, TurnDecoder, TurnSpec
from jigs.plugin.tools import timed
from jigs.processes import ManagedProcess

from jigs_harness_codex._approvals import Approver, turn_options
from jigs_harness_codex._descriptor import CodexDescriptor
from jigs_harness_codex._executable import fix_hint
from jigs_harness_codex._home import (
    CodexHome,
    build_home,
    link_rollout,
    mcp_startup_timeout,
    rollout_for,
    save_rollouts,
    sessions_dir,
)
from jigs_harness_codex._rpc import AppServer, AppServerRpcError
from jigs_harness_codex._seed import ensure_seed, prepare_spare, system_skills
from jigs_harness_codex._turn import CodexDecoder, strict_schema
from jigs_harness_codex._version import __version__

__all__ = [
    "GATED_APPROVAL",
    "POLICY_APPROVAL",
    "POLICY_SANDBOX",
    "CodexTransport",
    "CodexTurn",
    "open_transport",
]

#: Unattended: Codex never asks.
POLICY_APPROVAL = "never"
#: With a step's tool gate: Codex asks before every command it does not know to be read-only and
#: before every file change (the sandbox stays jigs', so it never asks to escape its own).
GATED_APPROVAL = "untrusted"
#: jigs' isolation is the worktree, the environment built from empty and the private home; the
#: agent runs like Claude under bypassPermissions (Codex's own sandbox needs user namespaces that
#: many CI containers lack, and would silently deny network to build tools).
POLICY_SANDBOX = "danger-full-access"
#: Seconds an abort waits for Codex to confirm the interrupted turn (so its rollout records it).
_ABORT_GRACE = 2.0
#: Seconds a closing step waits for an idle app server to exit at the end of its input before
#: the core's stop (TERM, grace, KILL of the namespace) takes over.
_EXIT_GRACE = 1.0
#: Bytes read from the end of a rollout to find its last record.
_TAIL_BYTES = 256 * 1024
#: What Codex says when a ``required`` MCP server does not start (``thread/start`` fails).
_MCP_STARTUP_FAILED = "required MCP servers failed to initialize"


class CodexTurn:
    """One running turn: the engine reads :meth:`receive` under its deadlines."""

    def __init__(
        self, server: AppServer, decoder: CodexDecoder, log: Any, approver: Approver | None = None
    ) -> None:
        self.decoder: TurnDecoder = decoder
        self._turn = decoder
        self._server = server
        self._log = log
        self._approver = approver
        self._interrupted = False
        self._requests = 0

    async def receive(self) -> dict[str, Any] | None:
        if self._approver is not None and self._approver.deferred and not self._interrupted:
            # the gate deferred a call (declined): end the turn; Codex reports it interrupted
            self._interrupted = True
            await self._server.send(
                {
                    "id": f"interrupt-{self._turn.turn_id}",
                    "method": "turn/interrupt",
                    "params": {"threadId": self._turn.thread_id, "turnId": self._turn.turn_id},
                }
            )
        return await self._server.next_message(f"the end of turn {self._turn.turn_id}")

    async def interrupt(self) -> bool:
        """The step's ``interrupt()``: ``turn/interrupt``, the turn's end (``interrupted``) read
        by the engine. Its answer is read (and dropped) by the engine's reads too."""
        return await self._tell("turn/interrupt", {})

    async def steer(self, text: str) -> bool:
        """The step's ``steer(text)``: ``turn/steer`` for this turn (Codex refuses it once the
        turn has ended; the refusal is read and dropped by the engine's reads)."""
        params = {"input": [{"type": "text", "text": text, "text_elements": []}]}
        return await self._tell("turn/steer", params, expected=True)

    async def _tell(self, method: str, params: dict[str, Any], *, expected: bool = False) -> bool:
        """Send a request about this turn without waiting for its answer (the engine is the
        one reader of the app server's output); False when the turn has ended."""
        thread_id, turn_id = self._turn.thread_id, self._turn.turn_id
        if self._turn.ended:
            return False
        self._requests += 1
        key = "expectedTurnId" if expected else "turnId"
        try:
            await self._server.send(
                {
                    "id": f"{method}-{turn_id}-{self._requests}",
                    "method": method,
                    "params": {"threadId": thread_id, key: turn_id, **params},
                }
            )
        except AgentTurnError:  # the app server is gone: the engine's read says so
            return False
        self._log.info("codex.turn.told", method=method, turn_id=turn_id)
        return True

    async def abort(self) -> None:
        """``turn/interrupt``, then wait briefly for the turn's end; bounded, never raises."""
        thread_id, turn_id = self._turn.thread_id, self._turn.turn_id
        if self._turn.ended:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(_ABORT_GRACE):
            try:
                await self._server.send(
                    {
                        "id": f"interrupt-{turn_id}",
                        "method": "turn/interrupt",
                        "params": {"threadId": thread_id, "turnId": turn_id},
                    }
                )
                while True:
                    message = await self._server.next_message(f"the interrupt of {turn_id}")
                    if self._turn.ends(message):
                        break
                self._log.info("codex.turn.interrupted", turn_id=turn_id)
            except Exception as exc:  # the server may be gone already; the core stops it
                self._log.info("codex.turn.interrupt_failed", error=type(exc).__name__)

    async def finish(self) -> None:
        """Nothing to do: the app server carries on with the next turn."""

    def stderr_tail(self) -> str:
        return self._server.process.stderr_tail()


class CodexTransport(SessionTransport):
    """The app server of one step; ``session_id`` is its thread."""

    def __init__(
        self,
        server: AppServer,
        thread_id: str,
        descriptor: CodexDescriptor,
        log: Any,
        *,
        store: Path | None = None,
        on_killed: Callable[[], Awaitable[None]] | None = None,
        rollout: object = None,
    ) -> None:
        self.session_id = thread_id
        self._server = server
        self._descriptor = descriptor
        self._log = log
        self._store = store
        self._on_killed = on_killed
        self._rollout = _rollout_hint(rollout, store, thread_id)
        self._turn: CodexDecoder | None = None
        self._turn_open = False

    async def end_input(self) -> None:
        """At close, when no turn is in flight: end the app server at once if the thread's
        rollout already ends with the last turn's ``task_complete`` (the session the core syncs
        is whole; nothing Codex still does at shutdown lands anywhere but the home, which is
        removed): SIGKILL, then the home's cleanup and the session's storing (``on_killed``)
        while the kernel tears the app server down, then wait for it to be gone. Otherwise
        close its stdin and wait (at most :data:`_EXIT_GRACE`) for it, and so its namespace, to
        exit, like at the end of a ``codex exec``. Never raises; whatever is left the core's
        stop ends (it runs next either way), and the home's cleanup runs again after it (for
        what a dying process still wrote)."""
        process = self._server.process
        turn = self._turn
        if self._turn_open and (turn is None or not turn.ended):
            return  # a turn in flight or interrupted: the core's TERM, grace and KILL
        started = time.perf_counter()
        how = "end of input"
        code: int | None = None
        with anyio.CancelScope(shield=True), anyio.move_on_after(_EXIT_GRACE) as scope:
            try:
                if turn is not None and self._rollout_settled(turn):
                    how = "killed, rollout complete"
                    process.kill()
                    if self._on_killed is not None:
                        await self._on_killed()
                    await process.stop(grace=0)
                    code = process.returncode
                else:
                    if process.stdin is not None:
                        await process.stdin.aclose()
                    code = await process.wait()
            except Exception as exc:  # the core's stop still runs
                self._log.info("codex.app_server.end_failed", error=type(exc).__name__)
                return
        if scope.cancelled_caught:
            code = None
        self._log.info(
            "codex.app_server.stopped",
            pid=process.pid,
            how=how,
            returncode=code,
            seconds=round(time.perf_counter() - started, 4),
        )

    def _rollout_settled(self, turn: CodexDecoder) -> bool:
        """Whether the thread's rollout in the run's store ends with ``turn``'s
        ``task_complete`` record (Codex writes it before it reports the turn completed)."""
        if self._store is None or not turn.turn_id:
            return False
        path = self._rollout
        if path is None or not path.is_file():
            path = rollout_for(self._store, str(self.session_id))
        if path is None:
            return False
        try:
            with path.open("rb") as fh:
                fh.seek(0, 2)
                size = fh.tell()
                fh.seek(max(0, size - _TAIL_BYTES))
                lines = fh.read().splitlines()
            record = json.loads(lines[-1]) if lines else None
        except (OSError, ValueError):
            return False
        payload = record.get("payload") if isinstance(record, dict) else None
        return (
            isinstance(record, dict)
            and record.get("type") == "event_msg"
            and isinstance(payload, dict)
            and payload.get("type") == "task_complete"
            and payload.get("turn_id") == turn.turn_id
        )

    async def start_turn(self, turn: TurnSpec[Any]) -> CodexTurn:
        effort = turn_options(turn.options)
        thread_id = str(self.session_id)
        params: dict[str, Any] = {
            "threadId": thread_id,
            "input": [
                {"type": "text", "text": turn.prompt, "text_elements": []},
                # the core's private copy: the app server (in the sandbox) reads it
                *({"type": "localImage", "path": str(image.path)} for image in turn.images),
            ],
            # per turn: a step's gate makes Codex ask (the thread starts with "never")
            "approvalPolicy": GATED_APPROVAL if turn.gate is not None else POLICY_APPROVAL,
        }
        effort = effort or self._descriptor.effort
        if effort:
            params["effort"] = effort
        if self._descriptor.reasoning_summary:
            params["summary"] = self._descriptor.reasoning_summary
        if turn.output_schema is not None:
            params["outputSchema"] = strict_schema(turn.output_schema)
        self._turn, self._turn_open = None, True
        # the engine bounds this request by idle_timeout
        result = await self._server.request("turn/start", params)
        turn_id = str(((result or {}).get("turn") or {}).get("id") or "")
        decoder = CodexDecoder(thread_id, turn_id)
        self._turn = decoder
        approver = Approver(turn.gate, decoder.paths, self._log)
        self._server.on_request = approver
        self._log.info("codex.turn.started", thread_id=thread_id, turn_id=turn_id)
        return CodexTurn(self._server, decoder, self._log, approver)


def _rollout_hint(path: object, store: Path | None, thread_id: str) -> Path | None:
    """The rollout path the app server reported for the thread (``thread.path``, marked
    unstable in its protocol), when it is a ``rollout-*-<thread id>.jsonl`` file name inside the
    home's ``sessions`` (as reported, no ``..``); None otherwise, and the rollout is then
    looked up by name (:func:`rollout_for`)."""
    if store is None or not isinstance(path, str) or not thread_id:
        return None
    candidate = Path(path)
    name = candidate.name
    if not (name.startswith("rollout-") and name.endswith(f"-{thread_id}.jsonl")):
        return None
    if ".." in candidate.parts or store not in candidate.parents:
        return None
    return candidate


def _mcp_startup_error(exc: AppServerRpcError, descriptor: CodexDescriptor) -> AgentTurnError:
    """A step server Codex could not start (every one is ``required``), in plain words; the
    error itself for any other refusal."""
    detail = exc.detail or ""
    if _MCP_STARTUP_FAILED not in detail:
        return exc
    reason = detail.split(_MCP_STARTUP_FAILED, 1)[1].lstrip(": ").strip() or detail
    return AgentTurnError(
        f"Codex could not start the step's MCP server(s) within "
        f"{mcp_startup_timeout(descriptor):g}s, although the just-in-time probe had started "
        f"them: {reason}. Make the server start faster, or raise the descriptor's "
        f"startup_timeout (Codex gets half of it, at most 20 s, per server)",
        kind="codex",
        detail=detail,
        reason="mcp_startup",
    )


async def open_transport(
    target: HarnessTarget[CodexDescriptor], ctx: HarnessContext, resolved: Resolved
) -> CodexTransport:
    """Build the home, launch and initialize the app server, start or resume the thread.

    ``initialize`` waits at most the smaller of ``startup_timeout`` and ``idle_timeout``, the
    thread ``startup_timeout`` (it starts the step's MCP servers): :class:`AgentTimeoutError`.
    Raises :class:`CliNotFoundError`, :class:`AgentCrashedError`, :class:`AgentOutputError` or
    :class:`AppServerRpcError` otherwise; everything acquired is on ``ctx``.
    """
    descriptor = target.descriptor
    secrets = descriptor.env_names()
    seed = await ensure_seed(
        resolved.path,
        {k: v for k, v in ctx.env.items() if k not in secrets},
        ctx.log,
        timeout=min(5.0, descriptor.startup_timeout / 2, descriptor.idle_timeout / 2),
    )
    _require_endpoint(descriptor, ctx)
    if seed is not None:  # the home's skills/.system links there: shown, read-only
        ctx.expose(system_skills(seed))
    home, cleanup = _open_home(target, ctx, seed)
    process = await _launch_app_server(target, ctx, resolved, _server_env(descriptor, ctx, home))
    if seed is not None:
        prepare_spare(seed, ctx.log)  # the next step's home, copied while this server starts
    server = AppServer(process, on_request=Approver(None, {}, ctx.log), log=ctx.log)
    await _initialize(server, descriptor)
    ctx.log.info("codex.app_server.ready", pid=process.pid, source=resolved.source)
    thread = await _open_thread(server, target)
    thread_id = str(thread.get("id") or "")
    ctx.log.info("codex.thread.opened", thread_id=thread_id, resumed=target.resume is not None)

    async def killed() -> None:  # the rollouts to the run's store, then stored while Codex dies
        # on a thread: unlinking the home's ~25 files takes 5-30 ms on a busy disk, which on
        # the event loop stalled every other step of the worker (issue 35)
        await anyio.to_thread.run_sync(cleanup)
        ctx.sessions_complete()

    transport = CodexTransport(
        server,
        thread_id,
        descriptor,
        ctx.log,
        store=home.path / "sessions",
        on_killed=killed,
        rollout=thread.get("path"),
    )
    # registered last, so it runs first at close: before the core's stop of the namespace
    ctx.async_callback(transport.end_input)
    return transport


def _require_endpoint(descriptor: CodexDescriptor, ctx: HarnessContext) -> None:
    """A descriptor that names a model key needs the credential proxy's endpoint."""
    if descriptor.api_key_env and ctx.model_endpoint is None:
        raise DescriptorError(
            f"the codex descriptor names {descriptor.api_key_env} for its model key, but the "
            f"step has no proxied model endpoint; run the step through jigs (run_agent or "
            f"create_agent_runner), which starts the credential proxy",
            kind="codex",
            key="api_key_env",
        )


def _open_home(
    target: HarnessTarget[CodexDescriptor], ctx: HarnessContext, seed: Path | None
) -> tuple[CodexHome, _HomeCleanup]:
    """The step's private home, its cleanup on ``ctx``, the resumed thread's rollout linked in."""
    endpoint = ctx.model_endpoint
    with timed("codex.home.built", ctx.log):
        home = build_home(
            target.descriptor,
            ctx.env,
            ctx.state_dir,
            seed=seed,
            base_url=endpoint.base_url if endpoint is not None else None,
            gated=target.gated,
        )
    cleanup = _HomeCleanup(home, sessions_dir(ctx.state_dir), ctx.log)
    ctx.callback(cleanup)
    if target.resume is not None:
        link_rollout(sessions_dir(ctx.state_dir), home.path, target.resume.id)
    return home, cleanup


def _server_env(
    descriptor: CodexDescriptor, ctx: HarnessContext, home: CodexHome
) -> dict[str, str]:
    """The step's environment plus the home's, ``CODEX_HOME`` and the proxy's placeholder key."""
    env = {**ctx.env, **home.extra_env, "CODEX_HOME": str(home.path)}
    endpoint = ctx.model_endpoint
    if endpoint is not None and descriptor.api_key_env:
        # the provider's env_key: Codex sends the placeholder, the proxy the real key
        env[descriptor.api_key_env] = endpoint.key
    return env


async def _launch_app_server(
    target: HarnessTarget[CodexDescriptor],
    ctx: HarnessContext,
    resolved: Resolved,
    env: dict[str, str],
) -> ManagedProcess:
    """``codex app-server`` in the step's namespace, stdin a pipe; a binary that cannot run is
    :class:`CliNotFoundError`."""
    try:
        with timed("codex.app_server.launched", ctx.log):
            return await ctx.launch(
                [str(resolved.path), "app-server"], cwd=target.cwd, env=env, stdin="pipe"
            )
    except (FileNotFoundError, PermissionError) as exc:
        raise CliNotFoundError(
            "codex", [f"{resolved.source}: {resolved.path} cannot run ({exc})"], fix_hint()
        ) from None


async def _initialize(server: AppServer, descriptor: CodexDescriptor) -> None:
    """The protocol's handshake, bounded by the smaller of the start-up and idle timeouts."""
    idle_first = descriptor.idle_timeout < descriptor.startup_timeout
    await server.request(
        "initialize",
        {
            "clientInfo": {"name": "jigs", "title": "jigs", "version": __version__},
            "capabilities": {"experimentalApi": False},
        },
        timeout=min(descriptor.startup_timeout, descriptor.idle_timeout),
        limit="idle_timeout" if idle_first else "startup_timeout",
    )
    await server.send({"method": "initialized"})


#: ``thread/start``'s config overrides of a tool-free thread (:attr:`HarnessTarget.tool_free`):
#: with them the model request of Codex 0.163 lists no tool at all (the ask tests check it).
TOOL_FREE_CONFIG: dict[str, Any] = {
    "features.shell_tool": False,
    "features.unified_exec": False,
    "features.view_image": False,
    "features.multi_agent": False,
    "features.goals": False,
    "features.apps": False,
    "features.tool_suggest": False,
    "features.image_generation": False,
    "web_search": "disabled",
    "tools.experimental_request_user_input": {"enabled": False},
    # no AGENTS.md from the scratch directory's parents (an ask has no project)
    "project_doc_max_bytes": 0,
}


def _thread_params(target: HarnessTarget[CodexDescriptor]) -> dict[str, Any]:
    """``thread/start``'s (or ``thread/fork``'s) settings from the descriptor, unset ones out."""
    descriptor = target.descriptor
    params: dict[str, Any] = {
        "cwd": str(target.cwd),
        "approvalPolicy": POLICY_APPROVAL,
        "sandbox": POLICY_SANDBOX,
        "model": descriptor.model,
        "developerInstructions": descriptor.developer_instructions,
        "baseInstructions": descriptor.base_instructions,
        "personality": descriptor.personality,
        "serviceTier": descriptor.service_tier,
    }
    if target.tool_free:
        # an ask: no rollout (nothing resumes it), and every tool Codex would offer turned off
        params.update(ephemeral=True, config=dict(TOOL_FREE_CONFIG))
    return {key: value for key, value in params.items() if value is not None}


async def _open_thread(server: AppServer, target: HarnessTarget[CodexDescriptor]) -> dict[str, Any]:
    """Start the step's thread, or fork the resumed one; the server's ``thread`` record, which
    has an id (:class:`AgentOutputError` otherwise)."""
    descriptor = target.descriptor
    params = _thread_params(target)
    try:
        if target.resume is not None:
            # a fork: the resumed thread stays as its ref names it, whatever this step does
            params.update(threadId=target.resume.id, excludeTurns=True)
            method = "thread/fork"
        else:
            method = "thread/start"
        result = await server.request(
            method, params, timeout=descriptor.startup_timeout, limit="startup_timeout"
        )
    except AppServerRpcError as exc:
        raise _mcp_startup_error(exc, descriptor) from None
    thread = (result or {}).get("thread") or {}
    if not str(thread.get("id") or ""):
        raise AgentOutputError(
            "the Codex app server started a thread without an id; check the CLI version with "
            "`jigs doctor`",
            kind="codex",
        )
    return thread


class _HomeCleanup:
    """The home's rollouts to the run's store, then the home away (whatever the move did: a
    failure is logged, the home still removed). Called once the app server is killed (so it
    overlaps the kernel's teardown of it) and by the close stack once every process of the step
    is gone, which then finds nothing left, or only what a process wrote while it died."""

    def __init__(self, home: CodexHome, store: Path, log: Any) -> None:
        self._home, self._store, self._log = home, store, log

    def __call__(self) -> None:
        if not self._home.path.exists():  # removed by the first call, nothing written since
            return
        started = time.perf_counter()
        try:
            save_rollouts(self._home.path, self._store)
        except OSError as exc:
            self._log.error("codex.rollout.save_failed", error=f"{type(exc).__name__}: {exc}")
        self._home.remove()  # its skills/.system is a link to the seed's: never followed
        self._log.info("codex.home.removed", seconds=round(time.perf_counter() - started, 4))
