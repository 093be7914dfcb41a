"""The codex model: a private home, one ``codex app-server`` per runner, one thread.

:func:`open_model` builds the home (from the per-binary seed), launches the app server with
exactly the step's environment plus ``CODEX_HOME`` (in its own process group, stdin a pipe),
initializes it and starts or resumes the thread. Each ``generate``/``stream`` call is one turn:
``turn/start``, then notifications until ``turn/completed``. Cancelling a turn sends
``turn/interrupt`` (bounded, shielded); closing the runner stops the process group, kills the
commands Codex started in sessions of their own, and removes the home.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
from jigs.errors import AgentTurnError, CliNotFoundError
from jigs.models import (
    CallWarning,
    FinishPart,
    GenerateResult,
    ModelRequest,
    StreamingModel,
    StreamPart,
)
from jigs.plugin import HarnessContext, HarnessTarget

from jigs_harness_codex._approvals import ApprovalHook, answer_by_policy
from jigs_harness_codex._descriptor import CodexDescriptor
from jigs_harness_codex._executable import fix_hint, resolve_executable
from jigs_harness_codex._home import build_home, mcp_startup_timeout
from jigs_harness_codex._reap import stop_tree
from jigs_harness_codex._rpc import AppServer, AppServerRpcError, AppServerTimeoutError
from jigs_harness_codex._seed import ensure_seed
from jigs_harness_codex._turn import TurnState, strict_schema
from jigs_harness_codex._version import __version__

__all__ = ["POLICY_APPROVAL", "POLICY_SANDBOX", "CodexModel", "open_model"]

#: Unattended: Codex never asks.
POLICY_APPROVAL = "never"
#: jigs' isolation is the worktree, the environment built from empty and the private home; the
#: agent runs like Claude under bypassPermissions (Codex's own sandbox needs user namespaces that
#: many CI containers lack, and would silently deny network to build tools).
POLICY_SANDBOX = "danger-full-access"
_INTERRUPT_GRACE = 0.5
#: What Codex says when a ``required`` MCP server does not start (``thread/start`` fails).
_MCP_STARTUP_FAILED = "required MCP servers failed to initialize"
_UNSUPPORTED = ("temperature", "top_p", "top_k", "max_output_tokens", "stop_sequences", "seed")


class CodexModel(StreamingModel):
    """``runner.model`` for the codex kind. One turn at a time (calls queue on a lock)."""

    provider = "codex"

    def __init__(
        self,
        descriptor: CodexDescriptor,
        server: AppServer,
        thread_id: str,
        ctx: HarnessContext,
    ) -> None:
        self.model_id = descriptor.model or "codex-default"
        self._descriptor = descriptor
        self._server = server
        self._thread_id = thread_id
        self._ctx = ctx
        self._turn_lock = anyio.Lock()
        self._hook: ApprovalHook | None = None

    @property
    def thread_id(self) -> str:
        """The thread every turn of this runner continues."""
        return self._thread_id

    @property
    def app_server_pid(self) -> int:
        return self._server.process.pid

    async def on_request(self, method: str, params: Any) -> Any:
        return await answer_by_policy(method, params, self._hook)

    def _turn_params(self, request: ModelRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "threadId": self._thread_id,
            "input": [{"type": "text", "text": request.prompt, "text_elements": []}],
        }
        effort = request.options_for("codex").get("effort") or self._descriptor.effort
        if effort:
            params["effort"] = effort
        if request.output_schema is not None:
            params["outputSchema"] = strict_schema(request.output_schema)
        return params

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        warnings = request.unsupported(*_UNSUPPORTED)
        if request.system is not None:
            warnings.append(
                CallWarning(
                    setting="system",
                    message="system is not supported per call by Codex; set "
                    "developer_instructions on the descriptor instead. Ignored",
                )
            )
        hook = request.options_for("codex").get("approve")
        if self._turn_lock.locked():
            raise AgentTurnError(
                "a Codex turn is already running on this runner: run one turn at a time, and "
                "consume a stream to its end (or close it with `await stream.aclose()`) before "
                "starting the next",
                kind="codex",
            )
        async with self._turn_lock:
            self._hook = hook if callable(hook) else None
            started = time.perf_counter()
            result = await self._server.request(
                "turn/start", self._turn_params(request), timeout=self._descriptor.idle_timeout
            )
            turn_id = str(((result or {}).get("turn") or {}).get("id") or "")
            state = TurnState(thread_id=self._thread_id, turn_id=turn_id)
            self._ctx.log.info("codex.turn.started", thread_id=self._thread_id, turn_id=turn_id)
            limit = self._descriptor.turn_timeout
            ends = math.inf if limit is None else time.monotonic() + limit
            try:
                while not state.done:
                    # never yield inside a cancel scope: each read gets its own deadline
                    left = ends - time.monotonic()
                    if left <= 0:
                        raise AppServerTimeoutError(
                            f"the end of turn {turn_id} (turn_timeout)",
                            float(limit or 0),
                            self._server.process.stderr_tail(),
                        )
                    try:
                        message = await self._server.next_notification(
                            timeout=min(self._descriptor.idle_timeout, left),
                            waiting_for=f"the end of turn {turn_id}",
                        )
                    except AppServerTimeoutError as exc:
                        if time.monotonic() < ends:
                            raise
                        raise AppServerTimeoutError(
                            f"the end of turn {turn_id} (turn_timeout)",
                            float(limit or 0),
                            exc.stderr_tail,
                        ) from None
                    if message.get("method") in ("configWarning", "deprecationNotice"):
                        params = message.get("params") or {}
                        self._ctx.log.info(
                            "codex.notice", method=message["method"], summary=params.get("summary")
                        )
                    for part in state.feed(message):
                        yield part
            except BaseException:
                if not state.done:
                    await self._interrupt(turn_id)
                raise
            self._ctx.log.info(
                "codex.turn.completed",
                thread_id=self._thread_id,
                turn_id=turn_id,
                seconds=round(time.perf_counter() - started, 4),
            )
        yield FinishPart(
            result=GenerateResult(
                text=state.final_text,
                usage=state.usage(),
                warnings=(*warnings, *state.warnings),
                tool_calls=tuple(state.tool_calls),
                tool_results=tuple(state.tool_results),
                output=state.output(request.output_schema is not None),
                provider_metadata={
                    "codex": {
                        "session_id": self._thread_id,
                        "thread_id": self._thread_id,
                        "turn_id": turn_id,
                    }
                },
                model_id=self.model_id,
            )
        )

    async def _interrupt(self, turn_id: str) -> None:
        """Ask the app server to stop the turn; bounded and shielded, never raises."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(_INTERRUPT_GRACE):
            try:
                await self._server.send(
                    {
                        "id": f"interrupt-{turn_id}",
                        "method": "turn/interrupt",
                        "params": {"threadId": self._thread_id, "turnId": turn_id},
                    }
                )
                self._ctx.log.info("codex.turn.interrupted", turn_id=turn_id)
            except Exception as exc:  # the server may be gone already; the core stops it
                self._ctx.log.info("codex.turn.interrupt_failed", error=type(exc).__name__)


def _mcp_startup_error(
    exc: AppServerRpcError, descriptor: CodexDescriptor
) -> AgentTurnError | None:
    """A step server Codex could not start (every one is ``required``), named in plain words;
    None for any other refusal."""
    detail = exc.detail or ""
    if _MCP_STARTUP_FAILED not in detail:
        return None
    reason = detail.split(_MCP_STARTUP_FAILED, 1)[1].lstrip(": ").strip() or detail
    return AgentTurnError(
        f"Codex could not start the step's MCP server(s) within "
        f"{mcp_startup_timeout(descriptor):g}s, although the just-in-time probe had started "
        f"them: {reason}. Make the server start faster, or raise the descriptor's "
        f"startup_timeout (Codex gets half of it, at most 20 s, per server)",
        kind="codex",
        detail=detail,
    )


async def open_model(target: HarnessTarget, ctx: HarnessContext) -> CodexModel:
    """Build the home, launch and initialize the app server, start or resume the thread.

    Raises :class:`CliNotFoundError`, or what :class:`AppServer` raises; everything acquired is
    on ``ctx`` and released by the core.
    """
    descriptor = target.descriptor
    assert isinstance(descriptor, CodexDescriptor)
    resolved = resolve_executable(ctx.env)
    secrets = descriptor.env_names()
    seed = await ensure_seed(
        resolved.path,
        {k: v for k, v in ctx.env.items() if k not in secrets},
        ctx.log,
        timeout=min(5.0, descriptor.startup_timeout / 2),
    )
    home = build_home(descriptor, ctx.env, ctx.state_dir, seed=seed)
    ctx.callback(home.remove)
    env = {**ctx.env, **home.extra_env, "CODEX_HOME": str(home.path)}
    started = time.perf_counter()
    try:
        process = await ctx.launch(
            [str(resolved.path), "app-server"], cwd=target.cwd, env=env, stdin="pipe"
        )
    except (FileNotFoundError, PermissionError) as exc:
        raise CliNotFoundError(
            "codex", [f"{resolved.source}: {resolved.path} cannot run ({exc})"], fix_hint()
        ) from None

    # runs before the core's own stop: also reaps the commands Codex ran in their own sessions
    ctx.async_callback(stop_tree, process, ctx.log)
    model: CodexModel | None = None

    async def on_request(method: str, params: Any) -> Any:
        if model is None:
            return await answer_by_policy(method, params, None)
        return await model.on_request(method, params)

    server = AppServer(process, on_request=on_request, log=ctx.log)
    timeout = descriptor.startup_timeout
    # each request below has its own deadline
    await server.request(
        "initialize",
        {
            "clientInfo": {"name": "jigs", "title": "jigs", "version": __version__},
            "capabilities": {"experimentalApi": False},
        },
        timeout=timeout,
    )
    await server.notify("initialized")
    ctx.log.info(
        "codex.app_server.ready",
        pid=process.pid,
        executable=str(resolved.path),
        source=resolved.source,
        seconds=round(time.perf_counter() - started, 4),
    )
    common: dict[str, Any] = {
        "cwd": str(target.cwd),
        "approvalPolicy": POLICY_APPROVAL,
        "sandbox": POLICY_SANDBOX,
    }
    if descriptor.model is not None:
        common["model"] = descriptor.model
    if descriptor.developer_instructions is not None:
        common["developerInstructions"] = descriptor.developer_instructions
    try:
        if target.resume is not None:
            result = await server.request(
                "thread/resume",
                {"threadId": target.resume.id, "excludeTurns": True, **common},
                timeout=timeout,
            )
        else:
            result = await server.request("thread/start", common, timeout=timeout)
    except AppServerRpcError as exc:
        mcp_error = _mcp_startup_error(exc, descriptor)
        if mcp_error is None:
            raise
        raise mcp_error from None
    thread = (result or {}).get("thread") or {}
    thread_id = str(thread.get("id") or "")
    if not thread_id:
        from jigs.errors import AgentOutputError

        raise AgentOutputError(
            "the Codex app server started a thread without an id; check the CLI version with "
            "`jigs doctor`",
            kind="codex",
        )
    ctx.log.info(
        "codex.thread.opened",
        thread_id=thread_id,
        resumed=target.resume is not None,
        seconds=round(time.perf_counter() - started, 4),
    )
    model = CodexModel(descriptor, server, thread_id, ctx)
    return model
