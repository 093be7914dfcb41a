"""``runner.model`` for Claude Code: each call is one ``claude -p`` turn in the worktree.

The model is jigs' own small stream-json client: it launches the CLI through ``ctx.launch``
(exactly the core-built environment plus what :mod:`._launch` adds, its own process group, stdin
closed), reads one JSON event per line and turns them into stream parts. The first call starts a
session whose id jigs chooses; every later call on the same model, and a runner opened with
``resume``, continues the latest session with ``--resume=<id>``.

Provider options (``provider_options={"claude": {...}}``), never persisted:

- ``on_event``: called with every stream-json event (a dict) as it arrives; may be async.
- ``approve_tool``: a tool-approval callback, see :mod:`._approval`.

Failures: :class:`CliNotFoundError` (the CLI cannot run), :class:`AgentCrashedError` (it exited
before its result: exit code and stderr tail), :class:`AgentOutputError` (a line that is not a
JSON object, a line over the reader's cap, a stream that ends without a result),
:class:`AgentTurnError` (the result reports a failure, or the descriptor's ``turn_timeout``
passed). The process group is stopped on every path, cancellation included.
"""

from __future__ import annotations

import inspect
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
from jigs.errors import AgentCrashedError, AgentOutputError, AgentTurnError, CliNotFoundError
from jigs.models import (
    CallWarning,
    FinishPart,
    GenerateResult,
    ModelRequest,
    StreamingModel,
    StreamPart,
)
from jigs.plugin import HarnessContext
from jigs.processes import ManagedProcess

from jigs_harness_claude._approval import ApprovalBridge, approval_setup
from jigs_harness_claude._descriptor import ClaudeDescriptor
from jigs_harness_claude._events import PROVIDER, TurnReader
from jigs_harness_claude._executable import FIX
from jigs_harness_claude._launch import build_argv, build_env

__all__ = ["ClaudeModel"]

_UNSUPPORTED = ("temperature", "top_p", "top_k", "stop_sequences", "seed")
_OPTIONS = frozenset({"on_event", "approve_tool"})
#: Seconds the CLI may take to exit after its result, or after closing its stdout.
_EXIT_GRACE = 3.0
_ROOT_HINT = (
    "Claude Code refuses to bypass permissions as root unless IS_SANDBOX=1 reaches it: set "
    "IS_SANDBOX=1 where the service runs and add IS_SANDBOX to agents.env"
)


class ClaudeModel(StreamingModel):
    """One Claude Code agent in one worktree. ``generate`` and ``stream`` each run one turn."""

    provider = PROVIDER

    def __init__(
        self,
        descriptor: ClaudeDescriptor,
        *,
        cwd: Path,
        ctx: HarnessContext,
        executable: Path,
        mcp_config: str,
        resume_id: str | None,
        shell_prefix: Path | None = None,
    ) -> None:
        self.model_id = descriptor.model or "default"
        self._descriptor = descriptor
        self._cwd = cwd
        self._ctx = ctx
        self._executable = executable
        self._mcp_config = mcp_config
        self._session = resume_id
        self._shell_prefix = shell_prefix

    @property
    def session_id(self) -> str | None:
        """The session the next call continues (None: the next call starts one)."""
        return self._session

    async def generate(self, request: ModelRequest) -> GenerateResult:
        result: GenerateResult | None = None
        async for part in self._turn(request, partial=False):
            if isinstance(part, FinishPart):
                result = part.result
        assert result is not None  # _turn ends with a FinishPart or raises
        return result

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        return self._turn(request, partial=True)

    async def _turn(self, request: ModelRequest, *, partial: bool) -> AsyncIterator[StreamPart]:
        warnings = request.unsupported(*_UNSUPPORTED)
        options = request.options_for(PROVIDER)
        warnings += [
            CallWarning(
                type="other", setting=name, message=f"unknown claude provider option {name}"
            )
            for name in sorted(set(options) - _OPTIONS)
        ]
        on_event = _callable(options, "on_event")
        approval = approval_setup(_callable(options, "approve_tool"))
        fresh = self._session is None
        session_id = str(uuid.uuid4()) if fresh else None
        launch = build_argv(
            self._executable,
            self._descriptor,
            prompt=request.prompt,
            mcp_config=self._mcp_config,
            session_id=session_id,
            resume_id=self._session,
            partial=partial,
            output_schema=request.output_schema,
            system=request.system,
            stream_input=approval is not None,
        )
        env = build_env(
            self._descriptor,
            self._ctx.env,
            max_output_tokens=request.max_output_tokens,
            shell_prefix=self._shell_prefix,
        )
        log = self._ctx.log.bind(session_id=session_id or self._session, resumed=not fresh)
        started = time.perf_counter()
        proc = await self._launch(
            launch.argv, env, pipe=launch.stdin_prompt is not None or bool(approval)
        )
        log.info("claude.turn.started", pid=proc.pid, partial=partial)
        reader = TurnReader(partial=partial)
        bridge = ApprovalBridge(proc, approval) if approval is not None else None
        try:
            if bridge is not None:
                await bridge.start(request.prompt)
            elif launch.stdin_prompt is not None:
                await _write_and_close(proc, launch.stdin_prompt)
            deadline = (
                None
                if self._descriptor.turn_timeout is None
                else time.monotonic() + self._descriptor.turn_timeout
            )
            number = 0
            while reader.result is None:
                raw = await self._next_line(proc, deadline)
                if raw is None:
                    break
                number += 1
                event = _decode(raw, number)
                if bridge is not None and await bridge.handle(event):
                    continue
                if on_event is not None:
                    outcome = on_event(event)
                    if inspect.isawaitable(outcome):
                        await outcome
                for part in reader.feed(event):
                    yield part
            if bridge is not None:
                await bridge.close()
            code = await _exit_code(proc)
            if reader.result is None:
                raise self._no_result(proc, code, number)
        finally:
            await proc.stop()
        result = reader.finish(warnings)
        self._session = reader.session_id or session_id or self._session
        log.info(
            "claude.turn.finished",
            seconds=round(time.perf_counter() - started, 4),
            session_id=self._session,
            exit_code=code,
        )
        yield FinishPart(result=result)

    async def _launch(self, argv: list[str], env: dict[str, str], *, pipe: bool) -> ManagedProcess:
        try:
            return await self._ctx.launch(
                argv,
                cwd=self._cwd,
                env=env,
                stdin="pipe" if pipe else "closed",
                owner=_owner(self._ctx),
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            raise CliNotFoundError("claude", [f"{argv[0]}: {exc.strerror or exc}"], FIX) from None

    async def _next_line(self, proc: ManagedProcess, deadline: float | None) -> bytes | None:
        if deadline is None:
            return await proc.read_line()
        with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
            return await proc.read_line()
        limit = self._descriptor.turn_timeout
        raise AgentTurnError(
            f"Claude Code did not finish its turn within the descriptor's turn_timeout of "
            f"{limit:g}s; it was stopped. Raise turn_timeout if the task needs longer",
            kind=PROVIDER,
            detail="timeout",
        )

    def _no_result(self, proc: ManagedProcess, code: int | None, lines: int) -> Exception:
        tail = proc.stderr_tail()
        if code not in (0, None):
            hint = f". {_ROOT_HINT}" if "root" in tail and "permissions" in tail else ""
            return AgentCrashedError(
                f"Claude Code ({self._executable}) exited with code {code} before its result{hint}",
                kind=PROVIDER,
                returncode=code,
                stderr_tail=tail,
            )
        return AgentOutputError(
            f"Claude Code's output ended after {lines} lines without a result event "
            f"(exit code {code}); the CLI may be too old or broken: run `jigs doctor`",
            kind=PROVIDER,
            line=lines,
        )


def _owner(ctx: HarnessContext) -> str:
    return f"Claude Code for run {ctx.run.workflow_run_id}"


def _callable(options: dict[str, Any], name: str) -> Callable[..., Any] | None:
    value = options.get(name)
    if value is None:
        return None
    if not callable(value):
        raise TypeError(f"provider_options['claude'][{name!r}] must be a function")
    fn: Callable[..., Any] = value
    return fn


def _decode(raw: bytes, number: int) -> dict[str, Any]:
    try:
        event = json.loads(raw)
    except ValueError:
        event = None
    if not isinstance(event, dict):
        shown = raw[:120].decode("utf-8", errors="replace")
        raise AgentOutputError(
            f"Claude Code printed a line that is not a JSON object (line {number}): {shown!r}; "
            f"is the resolved executable really Claude Code? (run `jigs doctor`)",
            kind=PROVIDER,
            line=number,
        )
    return event


async def _write_and_close(proc: ManagedProcess, data: bytes) -> None:
    stdin = proc.stdin
    assert stdin is not None
    try:
        await stdin.send(data)
    finally:
        await stdin.aclose()


async def _exit_code(proc: ManagedProcess) -> int | None:
    """The exit code, waiting a short grace for the CLI to exit (None: it did not)."""
    with anyio.move_on_after(_EXIT_GRACE):
        return await proc.wait()
    return None
