"""The turn engine: one implementation of a turn for every kind.

A kind describes its CLI (:mod:`jigs.plugin`); the engine runs it. For every turn it:

- builds the :class:`~jigs.plugin.TurnSpec` (for a *prompted* kind the prompt asks for the JSON
  answer; a *native* kind gets the schema);
- launches the turn's process (:class:`ProcessTransport`) or starts the turn on the kind's
  :class:`~jigs.plugin.SessionTransport`;
- reads messages under two deadlines: ``idle_timeout`` (no message for that long) and
  ``turn_timeout`` (wall clock), both raising :class:`~jigs.errors.AgentTimeoutError`;
- decodes JSON lines (a line that is not a JSON object is :class:`~jigs.errors.AgentOutputError`
  naming the line; the line cap lives in :mod:`jigs.processes`) and feeds them to the kind's
  decoder, whose events it records (:class:`TurnRecord`) and hands to ``on_event``;
- enforces ``max_turns`` / ``max_budget_usd`` where the descriptor's ``limits`` say ``"core"``:
  :class:`~jigs.errors.AgentLimitError`; on a proxied step (a kind's model route) the step's
  :class:`~jigs.proxy._accounting.ModelLedger` is the one count of model calls and tokens
  (every call through the proxy, the agent's own included) and the budget counts the calls the
  CLI did not see too, whatever the CLI enforces itself;
- maps the end: :class:`~jigs.events.TurnFailed` to :class:`~jigs.errors.AgentTurnError` (or the
  limit error), a process that exits before its last event to
  :class:`~jigs.errors.AgentCrashedError`, a stream that just ends to ``AgentOutputError``.

Every error carries the session id, usage and cost, stop reason and the redacted stderr tail.
The turn's process is stopped on every path, cancellation included.
"""

from __future__ import annotations

import errno
import inspect
import math
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from jigs.engine import _otel, _structured
from jigs.engine._gate import GatedCall, PendingApproval, ToolGate
from jigs.engine._prompt import image_record, materialise
from jigs.engine._steplog import StepLog
from jigs.engine._usage import Usage
from jigs.errors import (
    AgentCrashedError,
    AgentInterrupted,
    AgentLimitError,
    AgentOutputError,
    AgentTimeoutError,
    AgentTurnError,
    ApprovalPending,
    CliNotFoundError,
    JigsError,
    PromptError,
    RunnerClosedError,
    SteerRefusedError,
)
from jigs.events import (
    AgentEvent,
    ModelCallStarted,
    Notice,
    SessionStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnCompleted,
    TurnFailed,
    UsageUpdated,
)
from jigs.models._types import CallWarning, Image
from jigs.plugin import (
    Harness,
    HarnessContext,
    HarnessTarget,
    PromptImage,
    SessionTransport,
    TurnDecoder,
    TurnDriver,
    TurnSpec,
    TurnStream,
)
from jigs.plugin.tools import decode_line
from jigs.policy import _secrets
from jigs.policy._redact import secret_values
from jigs.processes import ManagedProcess
from jigs.proxy._endpoint import ledger_for

if TYPE_CHECKING:
    from jigs.proxy._accounting import ModelLedger

__all__ = [
    "EventCallback",
    "ProcessTransport",
    "TurnEngine",
    "TurnRecord",
    "TurnRequest",
    "emit_event",
]

#: ``on_event(event)``; may return an awaitable.
EventCallback = Callable[[AgentEvent], Any]
#: Seconds a turn's abort (interrupt, stop) may take.
_ABORT_GRACE = 2.0
#: Longest single command-line argument Linux accepts (MAX_ARG_STRLEN).
MAX_ARG_BYTES = 128 * 1024


@dataclass(frozen=True)
class TurnRequest:
    """What a step asks of one turn (before the engine shapes it for the kind)."""

    prompt: str
    output_schema: dict[str, Any] | None = None
    system: str | None = None
    max_output_tokens: int | None = None
    partial: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    on_event: EventCallback | None = None
    gate: ToolGate | None = None
    images: tuple[Image, ...] = ()


@dataclass
class TurnRecord:
    """What one turn produced so far (kept on failure too)."""

    session_id: str | None = None
    text: str = ""
    streamed_text: str = ""
    stop_reason: str | None = None
    output: Any = None
    output_problem: str | None = None
    usage: Usage = field(default_factory=Usage)
    #: the usage as the CLI reported it (``usage`` is the proxy's count on a proxied step)
    reported_usage: Usage = field(default_factory=Usage)
    model_calls: int = 0
    tool_calls: list[ToolCallStarted] = field(default_factory=list)
    tool_results: list[ToolCallFinished] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    completed: TurnCompleted | None = None
    failed: TurnFailed | None = None

    @property
    def ended(self) -> bool:
        return self.completed is not None or self.failed is not None

    def provider_metadata(self, kind: str) -> dict[str, dict[str, Any]]:
        """The turn's metadata as results carry it: ``{kind: {..., "session_id",
        "stop_reason", "model_calls"}}``."""
        metadata: dict[str, Any] = {**self.metadata, "session_id": self.session_id}
        metadata.setdefault("stop_reason", self.stop_reason)
        metadata.setdefault("model_calls", self.model_calls)
        return {kind: metadata}


# ------------------------------------------------------------------ one process per turn


class _ProcessTurn:
    """A turn that is one process: lines on stdout, one JSON object each."""

    def __init__(
        self,
        kind: str,
        process: ManagedProcess,
        decoder: TurnDecoder,
        driver: TurnDriver | None,
        exit_grace: float,
    ) -> None:
        self.kind = kind
        self.process = process
        self.decoder = decoder
        self._driver = driver
        self._exit_grace = exit_grace
        self._lines = 0

    async def receive(self) -> dict[str, Any] | None:
        while True:
            raw = await self.process.read_line()
            if raw is None:
                return None
            raw = raw.rstrip(b"\r")
            if not raw.strip():
                continue
            self._lines += 1
            try:
                message = decode_line(raw, kind=self.kind, number=self._lines)
            except AgentOutputError:
                if not self.process.stdout_ended:
                    raise
                # a last line cut short by the end of the stream: a CLI that then exits
                # non-zero (or by a signal) crashed mid-write
                ended = await self.ended_without_result()
                if isinstance(ended, AgentCrashedError):
                    raise ended from None
                raise
            if self._driver is not None and await self._driver.handle(message):
                continue
            return message

    async def finish(self) -> None:
        """After the last event: close the driver and give the CLI a grace to exit, then stop
        its group (nothing a turn started outlives it); a CLI that exits non-zero after a
        completed turn crashed."""
        code: int | None = None
        try:
            if self._driver is not None:
                await self._driver.finish()
            with anyio.move_on_after(self._exit_grace):
                code = await self.process.wait()
        finally:
            await self.process.stop()
        if code not in (0, None):
            raise AgentCrashedError(
                f"the {self.kind} CLI {_how(code)} after its turn ended",
                kind=self.kind,
                returncode=code,
                stderr_tail=self.process.stderr_tail(),
            )

    async def ended_without_result(self) -> AgentTurnError:
        """The error for a stream that ended before the turn did."""
        if self._driver is not None:
            await self._driver.finish()
        code: int | None = None
        with anyio.move_on_after(self._exit_grace):
            code = await self.process.wait()
        if code not in (0, None):
            return AgentCrashedError(
                f"the {self.kind} CLI {_how(code)} after {self._lines} line(s) of output, "
                f"before its turn ended",
                kind=self.kind,
                returncode=code,
                stderr_tail=self.process.stderr_tail(),
            )
        return AgentOutputError(
            f"the {self.kind} CLI's output ended after {self._lines} line(s) without the end of "
            f"its turn (exit code {code}); the CLI may be too old or broken: run `jigs doctor`",
            kind=self.kind,
            line=self._lines,
            stderr_tail=self.process.stderr_tail(),
        )

    async def interrupt(self) -> bool:
        """The driver's interrupt (a control request), when it has one."""
        ask = getattr(self._driver, "interrupt", None)
        return bool(await ask()) if ask is not None else False

    async def steer(self, text: str) -> bool:
        """The driver's steer (user input on stdin), when it has one."""
        send = getattr(self._driver, "steer", None)
        return bool(await send(text)) if send is not None else False

    async def abort(self) -> None:
        if self._driver is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_ABORT_GRACE):
                await self._driver.finish()
        await self.process.stop()

    def stderr_tail(self) -> str:
        return self.process.stderr_tail()


def _how(code: int) -> str:
    return f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"


class ProcessTransport(SessionTransport):
    """The engine's transport for kinds that run one process per turn
    (:meth:`~jigs.plugin.Harness.launch_turn` + :meth:`~jigs.plugin.Harness.decoder`)."""

    def __init__(self, harness: Harness[Any], ctx: HarnessContext, state: Any) -> None:
        self._harness = harness
        self._ctx = ctx
        self._state = state
        #: The W3C trace context of the running turn (set by the engine; None: no tracing).
        self.traceparent: str | None = None

    async def start_turn(self, turn: TurnSpec[Any]) -> _ProcessTurn:
        harness, ctx = self._harness, self._ctx
        spec = harness.launch_turn(turn, ctx, self._state)
        argv = [str(a) for a in spec.argv]
        longest = max((len(a.encode("utf-8", "surrogateescape")) for a in argv), default=0)
        if longest >= MAX_ARG_BYTES:
            raise PromptError(
                f"the {harness.kind} kind put {longest} bytes into one command-line argument; "
                f"Linux accepts at most {MAX_ARG_BYTES - 1}. This is a bug of the kind: it must "
                f"pass long prompts through stdin or a file"
            )
        pipe = spec.stdin is not None or spec.driver is not None
        try:
            process = await ctx.launch(
                argv,
                cwd=turn.cwd,
                env={
                    **ctx.env,
                    **spec.env,
                    **({"TRACEPARENT": self.traceparent} if self.traceparent else {}),
                },
                stdin="pipe" if pipe else "closed",
                owner=f"{harness.display_name} for run {ctx.run.workflow_run_id}",
            )
        except RunnerClosedError:
            raise
        except OSError as exc:
            if exc.errno == errno.E2BIG:
                raise PromptError(
                    f"the {harness.kind} command line is too long for the system ({exc.strerror});"
                    f" shorten the prompt or the descriptor's lists"
                ) from None
            raise CliNotFoundError(
                harness.kind, [f"{argv[0]}: {exc.strerror or exc}"], harness.install_hint
            ) from None
        ctx.log.info("turn.launched", pid=process.pid, executable=argv[0])
        decoder = spec.decoder if spec.decoder is not None else harness.decoder(turn)
        turn_stream = _ProcessTurn(harness.kind, process, decoder, spec.driver, spec.exit_grace)
        try:
            if spec.driver is not None:
                assert process.stdin is not None
                await spec.driver.start(process.stdin)
            elif spec.stdin is not None:
                assert process.stdin is not None
                try:
                    await process.stdin.send(spec.stdin)
                finally:
                    await process.stdin.aclose()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the CLI exited at once; reading its output says why
        except BaseException:
            await process.stop()
            raise
        return turn_stream


# ------------------------------------------------------------------ the engine


class TurnEngine:
    """Runs the turns of one step for one kind (one turn at a time)."""

    def __init__(
        self,
        harness: Harness[Any],
        target: HarnessTarget[Any],
        ctx: HarnessContext,
        transport: SessionTransport,
    ) -> None:
        self.harness = harness
        self.target = target
        self.ctx = ctx
        self.transport = transport
        self.session_id: str | None = transport.session_id or (
            target.resume.id if target.resume else None
        )
        self._busy = False
        self._turns = 0
        #: The running turn's stream (None between turns) and, once ``interrupt()`` was called
        #: during it, the monotonic time by which the turn must have ended.
        self._live: TurnStream | None = None
        self._interrupt_by: float | None = None
        self._read_scope: anyio.CancelScope | None = None
        #: The resumed session is forked by the first turn that reports a session of its own
        #: (a transport forks when it opens).
        self._fork_from: str | None = (
            target.resume.id
            if target.resume is not None and isinstance(transport, ProcessTransport)
            else None
        )
        #: The step's OpenTelemetry span: turns are its children (None: no tracing).
        self.span: Any = None
        #: The step proxy's count of model calls (None: the step is not proxied).
        self._ledger: ModelLedger | None = None
        self.step_log: StepLog | None = None
        #: Set by the step: its caller's descriptor's ``describe()``.
        self.session_descriptor: str | None = None
        #: Where the turns' images are copied (the step makes it before the kind launches;
        #: made at the first image otherwise).
        self.image_dir: Path | None = None
        #: The questions the agent asked in the running turn (``ask_human``; the step's tool
        #: server appends to this list): the turn then ends with them pending.
        self.questions: list[GatedCall] = []

    @classmethod
    async def open(
        cls, harness: Harness[Any], target: HarnessTarget[Any], ctx: HarnessContext
    ) -> TurnEngine:
        """Start what the kind needs for its turns (its transport, or its private files)."""
        transport = await harness.open_transport(target, ctx)
        if transport is None:
            transport = ProcessTransport(harness, ctx, await harness.prepare(target, ctx))
        engine = cls(harness, target, ctx, transport)
        engine.step_log = StepLog(ctx.state_dir, _step_secrets(harness, target, ctx), ctx.log)
        ctx.callback(engine.step_log.close)
        return engine

    @property
    def describe(self) -> str:
        """What the session is recorded under: the caller's descriptor (the step's, not the one
        its kind sees with the step's own tool server)."""
        return self.session_descriptor or str(self.target.descriptor.describe())

    def warnings_for(self, settings: Mapping[str, Any]) -> list[CallWarning]:
        """Warnings for the per-call settings the kind does not honour."""
        return [
            CallWarning(
                setting=name,
                message=f"{name} is not supported by the {self.harness.kind} kind; ignored",
            )
            for name, value in settings.items()
            if value is not None and name not in self.harness.call_settings
        ]

    def _spec(self, request: TurnRequest) -> TurnSpec[Any]:
        prompt = request.prompt
        schema = request.output_schema
        native = self.harness.structured_output == "native"
        if schema is not None and not native:
            prompt += _structured.instruction(schema)
        honours = self.harness.call_settings
        return TurnSpec(
            descriptor=self.target.descriptor,
            cwd=self.target.cwd,
            prompt=prompt,
            session_id=self.session_id,
            fork=self._fork_from is not None and self.session_id == self._fork_from,
            output_schema=schema if native else None,
            system=request.system if "system" in honours else None,
            max_output_tokens=(
                request.max_output_tokens if "max_output_tokens" in honours else None
            ),
            partial=request.partial,
            options=request.options,
            gate=request.gate,
            tool_free=self.target.tool_free,
            images=self._images(request.images),
        )

    def _images(self, images: tuple[Image, ...]) -> tuple[PromptImage, ...]:
        """The turn's images, copied into the step's private dir; their digests logged (the
        step log's ``prompt-images`` line) and never their bytes. :class:`PromptError` for a
        kind that takes none."""
        if not images:
            return ()
        if not self.harness.takes_images:
            raise PromptError(
                f"the {self.harness.kind} kind takes no images in a prompt; send text only"
            )
        if self.image_dir is None:
            self.image_dir = self.ctx.private_dir("jigs-images-")
        copies = materialise(images, self.image_dir)
        record = image_record(copies)
        self.ctx.log.info("turn.images", images=record)
        if self.step_log is not None:
            self.step_log.note(self._turns, {"type": "prompt-images", "images": record})
        return copies

    async def run(self, request: TurnRequest, record: TurnRecord) -> AsyncIterator[AgentEvent]:
        """Run one turn, yielding its events and filling ``record``; raises the turn's error.

        Never yields inside a cancel scope: each read has its own deadline.
        """
        if self._busy:
            raise AgentTurnError(
                f"a {self.harness.kind} turn is already running on this runner: run one turn at a "
                f"time, and consume a stream to its end (or close it) before starting the next",
                kind=self.harness.kind,
                reason="busy",
            )
        self._busy = True
        self._turns += 1
        number = self._turns
        span = self._turn_span()
        tools = _ToolSpans(span)
        error: BaseException | None = None
        try:
            async for event in self._run(request, record):
                if self.step_log is not None:
                    self.step_log.write(number, event)
                tools.see(event)
                yield event
        except BaseException as exc:
            error = exc
            raise
        finally:
            self._busy = False
            self._interrupt_by = None
            tools.end()
            _end_turn_span(span, error, record)

    def _turn_span(self) -> Any:
        """The turn's span (a child of the step's), its trace context handed to the process."""
        span = _otel.start(
            f"invoke_agent {self.harness.kind}",
            self.span,
            **{
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": self.harness.kind,
                "gen_ai.request.model": self.target.descriptor.model_id(),
                "gen_ai.conversation.id": self.session_id,
            },
        )
        if isinstance(self.transport, ProcessTransport):
            self.transport.traceparent = _otel.traceparent(span)
        return span

    async def _run(self, request: TurnRequest, record: TurnRecord) -> AsyncIterator[AgentEvent]:
        spec = self._spec(request)
        if request.gate is not None:
            request.gate.start_turn()
        self.questions.clear()
        record.session_id = self.session_id
        log = self.ctx.log.bind(resumed=self.session_id is not None)
        started = time.monotonic()
        ends = started + float(self.target.descriptor.turn_timeout)
        stream: TurnStream | None = None
        finished = False
        try:
            stream = await self._start(spec)
            self._live = stream
            self._started()
            log.info("turn.started", session_id=self.session_id)
            while not record.ended:
                for event in await self._next_events(stream, record, started, ends):
                    self._take(event, record)
                    await emit_event(request.on_event, event)
                    yield event
                    await self._end_after_question(event)
                    limit = self._over_limit(record)
                    if limit is not None:
                        raise limit
            if record.completed is not None:
                await self._final_count(record)
                await stream.finish()
                finished = True
        except AgentTurnError as exc:
            error = self._turn_error(exc, request, record, stream)
            if error is exc:
                raise
            raise error from None
        except TimeoutError:
            if stream is not None:
                raise
            raise self._start_timeout(record) from None
        finally:
            self._live = None
            if self._interrupt_by is not None and record.ended and not finished:
                finished = await self._finish_interrupted(stream)
            await self._after(stream, finished, record)
        if self._interrupt_by is not None and not self._waiting(request):
            error = self._interruption(record)
            self._fill(error, record, stream)
            raise error
        self._complete(request, record, stream)
        log.info(
            "turn.finished",
            seconds=round(time.monotonic() - started, 4),
            session_id=record.session_id,
            model_calls=record.model_calls,
            tool_calls=len(record.tool_calls),
        )

    async def _start(self, spec: TurnSpec[Any]) -> TurnStream:
        """Start the turn within the first deadline (a ``TimeoutError`` past it)."""
        with anyio.fail_after(self._start_limit()):
            return await self.transport.start_turn(spec)

    def _started(self) -> None:
        # a kind whose turn launched no process through ctx.launch: its proxy serves now
        begin_proxy = getattr(self.ctx, "begin_proxy", None)
        if begin_proxy is not None:
            begin_proxy()
        self._start_count()

    def _start_limit(self) -> float:
        descriptor = self.target.descriptor
        return min(float(descriptor.idle_timeout), float(descriptor.turn_timeout))

    def _start_timeout(self, record: TurnRecord) -> AgentTimeoutError:
        descriptor = self.target.descriptor
        # the limit that ended the wait: turn_timeout when it is the shorter one
        name = "idle_timeout"
        if float(descriptor.turn_timeout) < float(descriptor.idle_timeout):
            name = "turn_timeout"
        limit = self._start_limit()
        return AgentTimeoutError(
            f"the {self.harness.display_name} turn did not start within {limit:g}s "
            f"({name}); jigs stopped it. Check the model endpoint, or raise the "
            f"descriptor's {name}",
            kind=self.harness.kind,
            limit=name,
            seconds=limit,
            session_id=record.session_id,
            descriptor=self.describe,
        )

    async def _next_events(
        self, stream: TurnStream, record: TurnRecord, started: float, ends: float
    ) -> list[AgentEvent]:
        """The events of the stream's next message, read under the idle and turn deadlines."""
        kind = self.harness.kind
        wait = min(float(self.target.descriptor.idle_timeout), ends - time.monotonic())
        if self._interrupt_by is not None:
            wait = min(wait, self._interrupt_by - time.monotonic())
        message: dict[str, Any] | None = None
        got = False
        if wait > 0:
            with anyio.move_on_after(wait) as self._read_scope:
                message = await stream.receive()
                got = True
            self._read_scope = None
        if not got and self._interrupt_by is not None:
            raise self._interruption(record)
        if not got:
            raise self._timeout(
                record,
                stream,
                turn=time.monotonic() >= ends,
                seconds=time.monotonic() - started,
            )
        if message is None:
            raise await self._ended(stream, record)
        try:
            return list(stream.decoder.decode(message))
        except JigsError:
            raise
        except Exception as exc:
            raise AgentOutputError(
                f"the {kind} kind could not decode a message of its CLI "
                f"({type(exc).__name__}: {str(exc)[:200]}); the CLI may be a version "
                f"the kind does not know: run `jigs doctor`",
                kind=kind,
                session_id=record.session_id,
            ) from exc

    # ---------------------------------------------------------------- interrupt and steer

    async def interrupt(self, *, next_turn: bool = False) -> bool:
        """End the running turn now; False when no turn is running (with ``next_turn``, the
        next turn to start is then interrupted as soon as it starts, and the answer is True).
        The kind's stream is asked to stop (``TurnStream.interrupt``: Codex ``turn/interrupt``,
        Claude's control request); a kind that cannot ask, or a CLI that has not ended its turn
        within
        :data:`_ABORT_GRACE` seconds, is stopped (the turn's process, or the stream's abort).
        The turn then raises :class:`~jigs.errors.AgentInterrupted`."""
        stream = self._live
        if self._interrupt_by is not None:
            return True
        if stream is None:
            if self._busy or next_turn:  # starting: the turn ends at its first read
                self._interrupt_by = time.monotonic()
            return self._busy or next_turn
        self._interrupt_by = time.monotonic() + _ABORT_GRACE
        self.ctx.log.info("turn.interrupt", session_id=self.session_id)
        ask = getattr(stream, "interrupt", None)
        asked = False
        if ask is not None:
            with anyio.move_on_after(_ABORT_GRACE):
                asked = bool(await ask())
        if self._live is not stream:  # the turn ended meanwhile
            return True
        if not asked:  # nothing to wait for: the read ends now, and the turn is stopped
            self._interrupt_by = time.monotonic()
        scope = self._read_scope
        if scope is not None:
            scope.deadline = min(scope.deadline, anyio.current_time() + (_ABORT_GRACE * asked))
        return True

    async def steer(self, text: str) -> None:
        """Put ``text`` into the running turn as user input (the model reads it with its next
        request), or :class:`~jigs.errors.SteerRefusedError`."""
        if not isinstance(text, str) or not text.strip() or "\x00" in text:
            raise PromptError("steer(text) needs a non-empty string without NUL bytes")
        kind = self.harness.kind
        stream = self._live
        if stream is None or self._interrupt_by is not None:
            raise SteerRefusedError(
                f"no {kind} turn is running to steer: send the text as the next turn's prompt",
                kind=kind,
                reason="idle",
            )
        steer = getattr(stream, "steer", None)
        refusal = self.harness.steer_refusal if steer is None else None
        if steer is not None and not await steer(text):
            refusal = self.harness.steer_refusal
        if refusal is not None:
            raise SteerRefusedError(
                f"the {self.harness.display_name} turn cannot be steered: {refusal}. Send the "
                f"text as the next turn's prompt (interrupt() ends the running turn first)",
                kind=kind,
                reason="unsupported",
            )
        self.ctx.log.info("turn.steered", session_id=self.session_id, chars=len(text))

    async def _finish_interrupted(self, stream: TurnStream | None) -> bool:
        """An interrupted turn that the CLI ended itself: let it exit as after any turn (its
        session written whole), within what is left of the grace; True when it did."""
        if stream is None or self._interrupt_by is None:
            return False
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(max(0.0, self._interrupt_by - time.monotonic())):
                try:
                    await stream.finish()
                except JigsError:
                    return False
                return True
        return False

    def _interruption(self, record: TurnRecord) -> AgentInterrupted:
        # ended: the CLI ended the turn when asked; else the engine stops it (abort)
        self.ctx.log.info("turn.interrupted", ended=record.ended, session_id=record.session_id)
        return AgentInterrupted(
            f"the {self.harness.display_name} turn was interrupted by its caller; resume "
            f"error.session to continue from where it stopped",
            kind=self.harness.kind,
            session_id=record.session_id or self.session_id,
            stop_reason="interrupted",
        )

    async def _after(self, stream: TurnStream | None, finished: bool, record: TurnRecord) -> None:
        """On every path: stop a turn that did not finish; later turns continue its session."""
        if not finished and stream is not None:
            with anyio.CancelScope(shield=True):
                await stream.abort()
        if record.session_id:
            self.session_id = record.session_id
            if record.session_id != self._fork_from:
                self._fork_from = None  # forked: later turns continue the fork

    def _complete(
        self, request: TurnRequest, record: TurnRecord, stream: TurnStream | None
    ) -> None:
        """The ended turn into ``record`` (its structured output extracted when asked for), or
        its failure raised (:class:`ApprovalPending` when the gate deferred a call: the turn
        ended because of it, however the CLI reported the end)."""
        if self._waiting(request):
            raise self._pending(request.gate, record, stream)
        if record.failed is not None:
            raise self._failure(record.failed, record, stream)
        assert record.completed is not None
        done = record.completed
        record.text = done.text
        record.stop_reason = done.stop_reason
        record.metadata = dict(done.metadata)
        record.output = done.output
        if request.output_schema is not None and record.output is None:
            record.output, record.output_problem = _structured.extract(
                record.text, request.output_schema
            )

    # ---------------------------------------------------------------- helpers

    def _take(self, event: AgentEvent, record: TurnRecord) -> None:
        if isinstance(event, SessionStarted):
            record.session_id = event.session_id
        elif isinstance(event, ModelCallStarted):
            record.model_calls += 1
        elif isinstance(event, TextDelta):
            record.streamed_text += event.text
        elif isinstance(event, ToolCallStarted):
            record.tool_calls.append(event)
        elif isinstance(event, ToolCallFinished):
            record.tool_results.append(event)
        elif isinstance(event, UsageUpdated):
            record.usage = record.reported_usage = event.usage
        elif isinstance(event, Notice):
            record.notices.append(event.message)
        elif isinstance(event, TurnCompleted):
            record.completed = event
        elif isinstance(event, TurnFailed):
            record.failed = event

    def _start_count(self) -> None:
        """A proxied step's turn counts from here in the proxy's ledger, under its budget."""
        if self.ctx.model_endpoint is not None:
            self._ledger = ledger_for(self.ctx.model_endpoint)
            if self._ledger is not None:
                self._ledger.start_turn(self.target.descriptor.max_budget_usd)

    async def _final_count(self, record: TurnRecord) -> None:
        """The turn's last response counted by the proxy, then the limits checked on it."""
        if self._ledger is not None:
            await self._ledger.settle()
            limit = self._over_limit(record)
            if limit is not None:
                raise limit

    def _account(self, record: TurnRecord) -> int:
        """On a proxied step: the turn's usage from the proxy's ledger (every model call through
        it; the CLI's own figures only when the proxy saw no usage at all), its cost the CLI's
        scaled to the ledger's tokens. Returns the turn's model calls (the ledger's or the
        CLI's, whichever saw more)."""
        ledger = self._ledger
        if ledger is None:
            return record.model_calls
        reported = record.reported_usage
        count = ledger.count()
        told = (reported.input_tokens or 0) + (reported.output_tokens or 0)
        counted = count.input_tokens + count.output_tokens
        cost = reported.cost_usd
        if cost is not None and told > 0:
            ledger.price(cost, told)
            cost = max(cost, cost * counted / told)  # calls the CLI did not see, at its rate
        if count.calls:
            record.usage = Usage(
                input_tokens=count.input_tokens,
                output_tokens=count.output_tokens,
                total_tokens=counted,
                cached_input_tokens=count.cached_input_tokens,
                cost_usd=cost,
            )
        return max(record.model_calls, count.calls)

    def _over_limit(self, record: TurnRecord) -> AgentLimitError | None:
        descriptor = self.target.descriptor
        native = {name for name, who in descriptor.limits.items() if who == "cli"}
        kind = self.harness.kind
        max_turns = descriptor.max_turns
        calls = self._account(record)
        if max_turns is not None and "max_turns" not in native and calls > max_turns:
            return AgentLimitError(
                f"the {self.harness.display_name} turn reached the descriptor's max_turns of "
                f"{max_turns} model requests; jigs stopped it. Continue it by resuming "
                f"error.session, or raise max_turns",
                kind=kind,
                limit="max_turns",
                value=max_turns,
            )
        budget = descriptor.max_budget_usd
        if budget is None:
            return None
        cost = record.usage.cost_usd
        over = cost is not None and cost > budget
        ledger = self._ledger
        # on a proxied step jigs checks whatever the CLI enforces: the CLI never sees the agent's
        # own calls through the proxy (the ledger refused one: its estimate is over)
        if ledger is not None and (over or ledger.over_budget):
            ledger.refuse(f"the turn is over the descriptor's max_budget_usd of ${budget:g}")
        elif not over or "max_budget_usd" in native:
            return None
        spent = f"cost ${cost:.4f}" if cost is not None else "spent its budget"
        return AgentLimitError(
            f"the {self.harness.display_name} turn {spent} (every model call through the "
            f"step's proxy counted), over the descriptor's max_budget_usd of ${budget:g}; jigs "
            f"stopped it. Continue it by resuming error.session, or raise max_budget_usd",
            kind=kind,
            limit="max_budget_usd",
            value=budget,
        )

    def _timeout(
        self, record: TurnRecord, stream: TurnStream, *, turn: bool, seconds: float
    ) -> AgentTimeoutError:
        descriptor = self.target.descriptor
        name = self.harness.display_name
        if turn:
            limit, value = "turn_timeout", float(descriptor.turn_timeout)
            message = (
                f"the {name} turn did not finish within the descriptor's turn_timeout of "
                f"{value:g}s; jigs stopped it. Raise turn_timeout if the task needs longer"
            )
        else:
            limit, value = "idle_timeout", float(descriptor.idle_timeout)
            message = (
                f"the {name} turn sent nothing for {value:g}s (the descriptor's idle_timeout) "
                f"after {seconds:.1f}s; jigs stopped it. A hung model endpoint or CLI does this: "
                f"check the endpoint, or raise idle_timeout if the model is that slow"
            )
        return AgentTimeoutError(message, kind=self.harness.kind, limit=limit, seconds=value)

    async def _ended(self, stream: TurnStream, record: TurnRecord) -> AgentTurnError:
        limit = self._over_limit(record) if self._ledger is not None else None
        if limit is not None:  # the CLI gave up on the proxy's budget refusal
            return limit
        if isinstance(stream, _ProcessTurn):
            return await stream.ended_without_result()
        return AgentCrashedError(
            f"the {self.harness.display_name} transport closed before the turn ended",
            kind=self.harness.kind,
            returncode=None,
            stderr_tail=stream.stderr_tail(),
        )

    def _failure(
        self, failed: TurnFailed, record: TurnRecord, stream: TurnStream | None
    ) -> AgentTurnError:
        name = self.harness.display_name
        kind = self.harness.kind
        limit = self._over_limit(record) if self._ledger is not None else None
        if limit is not None:  # the CLI failed on the proxy's budget refusal
            limit.stop_reason = failed.stop_reason
            self._fill(limit, record, stream)
            return limit
        if failed.reason in ("max_turns", "max_budget_usd"):
            descriptor = self.target.descriptor
            value = getattr(descriptor, failed.reason, None)
            error: AgentTurnError = AgentLimitError(
                f"the {name} turn stopped at the descriptor's {failed.reason}"
                f"{f' of {value:g}' if isinstance(value, int | float) else ''}: {failed.message}. "
                f"Continue it by resuming error.session, or raise {failed.reason}",
                kind=kind,
                limit=failed.reason,
                value=float(value) if isinstance(value, int | float) else math.nan,
            )
        else:
            error = AgentTurnError(
                # an upstream error the CLI quotes may hold a step secret (the token, the key)
                f"the {name} turn failed ({failed.reason}): "
                f"{_secrets.redact_known(failed.message)}",
                kind=kind,
                reason=failed.reason,
                detail=failed.reason,
                retryable=failed.retryable,
            )
        error.stop_reason = failed.stop_reason
        self._fill(error, record, stream)
        return error

    def _turn_error(
        self,
        exc: AgentTurnError,
        request: TurnRequest,
        record: TurnRecord,
        stream: TurnStream | None,
    ) -> AgentTurnError:
        """What a turn that failed with ``exc`` raises: :class:`ApprovalPending` when a call
        waits for a human (however the CLI reported the end), :class:`AgentInterrupted` when
        the turn was interrupted, else ``exc`` itself, filled."""
        if self._waiting(request) and (self._interrupt_by is not None or exc.reason == "aborted"):
            return self._pending(request.gate, record, stream)
        if self._interrupt_by is not None and not isinstance(exc, AgentInterrupted):
            # the CLI's own way of ending an interrupted turn (an error, a crash)
            exc = self._interruption(record)
        self._fill(exc, record, stream)
        return exc

    def _waiting(self, request: TurnRequest) -> bool:
        """Whether a call of the turn waits for a human (deferred by the gate, or a question)."""
        return bool(self.questions) or (request.gate is not None and bool(request.gate.pending))

    async def _end_after_question(self, event: AgentEvent) -> None:
        """After ``ask_human`` the agent was told to end its turn; a later tool call means it
        did not: the turn is interrupted (the question stays pending)."""
        if not self.questions or self._interrupt_by is not None:
            return
        if isinstance(event, ToolCallStarted) and not event.name.endswith("ask_human"):
            self.ctx.log.info("turn.asked.interrupt", tool=event.name[:64])
            await self.interrupt()

    def _pending(
        self, gate: ToolGate | None, record: TurnRecord, stream: TurnStream | None
    ) -> ApprovalPending:
        calls = (*(gate.pending if gate is not None else ()), *self.questions)
        names = ", ".join(sorted({call.tool for call in calls}))
        decide = "Allow() or Deny(reason)"
        if self.questions:
            decide = (
                "Answer(text)"
                if len(calls) == len(self.questions)
                else f"{decide}, or Answer(text) for a question"
            )
        error = ApprovalPending(
            f"the {self.harness.display_name} turn stopped: {len(calls)} call(s) ({names}) wait "
            f"for a human. Store error.pending, then resume its session with "
            f"approvals=error.pending.decide({{call_id: {decide}}})",
            kind=self.harness.kind,
            pending=PendingApproval(session=None, calls=calls),
        )
        if record.failed is not None:
            error.stop_reason = record.failed.stop_reason
        elif record.completed is not None:
            error.stop_reason = record.completed.stop_reason
        self._fill(error, record, stream)
        self.ctx.log.info("turn.approval_pending", calls=len(calls), tools=names)
        return error

    def _fill(self, error: AgentTurnError, record: TurnRecord, stream: TurnStream | None) -> None:
        """Give an error what the turn produced (never overriding what it already has)."""
        if error.session_id is None:
            error.session_id = record.session_id or self.session_id
        if error.usage is None:
            self._account(record)
            error.usage = record.usage
        if error.descriptor is None:
            error.descriptor = self.describe
        if not error.stderr_tail and stream is not None:
            try:
                error.stderr_tail = stream.stderr_tail()
            except Exception:  # a tail is a courtesy
                error.stderr_tail = ""


class _ToolSpans:
    """One span per tool call of a turn, a child of the turn's, from its start to its end."""

    def __init__(self, turn: Any) -> None:
        self._turn = turn
        self._open: dict[str, Any] = {}

    def see(self, event: AgentEvent) -> None:
        if isinstance(event, ToolCallStarted):
            self._open[event.id] = _otel.start(
                f"execute_tool {event.name}",
                self._turn,
                **{
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": event.name,
                    "gen_ai.tool.call.id": event.id,
                },
            )
        elif isinstance(event, ToolCallFinished) and event.id in self._open:
            _otel.end(self._open.pop(event.id), None, **{"jigs.tool.is_error": event.is_error})

    def end(self) -> None:
        """End the spans of tool calls the turn left unfinished."""
        for tool in self._open.values():
            _otel.end(tool)


def _end_turn_span(span: Any, error: BaseException | None, record: TurnRecord) -> None:
    usage = record.usage
    _otel.end(
        span,
        error,
        **{
            "gen_ai.conversation.id": record.session_id,
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.response.finish_reasons": (
                [record.stop_reason] if record.stop_reason else None
            ),
            "jigs.cost_usd": usage.cost_usd,
        },
    )


def _step_secrets(
    harness: Harness[Any], target: HarnessTarget[Any], ctx: HarnessContext
) -> list[str]:
    """The secret values the step handles, for the step log's redaction: secret-named values of
    the agent's env and the host values of every variable the descriptor names."""
    named = set(harness.env_allowlist(target.descriptor)) | set(target.descriptor.env_names())
    key = target.descriptor.model_key_env()
    if key:
        named.add(key)
    extra = [os.environ[n] for n in named if os.environ.get(n)]
    if ctx.model_endpoint is not None:  # the proxy URL holds the step's token
        extra.append(ctx.model_endpoint.base_url)
    return secret_values(ctx.env, extra)


async def emit_event(callback: EventCallback | None, event: AgentEvent) -> None:
    """Call ``callback`` with ``event``, awaiting what it returns when it is awaitable."""
    if callback is None:
        return
    outcome = callback(event)
    if inspect.isawaitable(outcome):
        await outcome
