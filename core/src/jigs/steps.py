"""What a workflow step calls: ``create_agent_runner``, ``run_agent`` and ``agent_session``;
``ask_agent`` for a question that needs no worktree.

::

    async with create_agent_runner(harness, cwd=worktree, run=run, resume=session) as runner:
        result = await generate_text(runner.model, prompt="Explain the failing test.")
        return result.text, runner.session_from(result)

``create_agent_runner`` also works as ``runner = await create_agent_runner(...)`` with
``await runner.close()`` in a ``finally``. Until the runner is closed no other agent can start in
that worktree.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Required, TypedDict, TypeVar, Unpack, overload

import anyio
from pydantic import BaseModel, Field

from jigs.engine import _mailbox
from jigs.engine._engine import TurnEngine, TurnRecord, TurnRequest, emit_event
from jigs.engine._gate import (
    Allow,
    Answer,
    Approval,
    ApproveTool,
    Decided,
    Defer,
    Deny,
    GatedCall,
    PendingApproval,
    Question,
    ToolGate,
    approvals_prompt,
    decisions_of,
    gate_from_options,
)
from jigs.engine._logging import logger
from jigs.engine._model import EngineModel, result_of
from jigs.engine._pipeline import Step, probes_soon
from jigs.engine._prompt import prompt_parts
from jigs.engine._structured import reask_prompt
from jigs.engine._tools import ask_human
from jigs.engine._types import AgentSessionRef, _Data
from jigs.errors import (
    AgentSessionError,
    AgentTurnError,
    ApprovalPending,
    InvalidInputError,
    JitCheckError,
    PromptError,
    RunnerClosedError,
    SessionSaveError,
    SteerRefusedError,
    StructuredOutputError,
)
from jigs.events import AgentEvent
from jigs.harnesses import load
from jigs.models._functions import parse_output
from jigs.models._types import Image, Prompt, Usage
from jigs.policy._files import remove_tree
from jigs.sandbox._isolation import isolation
from jigs.sandbox._private_dirs import make_owned_dir
from jigs.sandbox._probe import collect_started

if TYPE_CHECKING:
    from collections.abc import Mapping

    from jigs.descriptors import HarnessDescriptor
    from jigs.engine._engine import EventCallback
    from jigs.engine._types import RunMetadata
    from jigs.models._protocol import LanguageModel
    from jigs.models._types import GenerateResult
    from jigs.registry._registry import Registry
    from jigs.stores import SessionStore

# the two errors are re-exported beside create_agent_runner: the guide jigs implements imports
# them from here (they are documented in jigs.errors)
__all__ = [
    "AgentResult",
    "AgentRunner",
    "AgentRunnerOpening",
    "AgentSessionError",
    "AgentStream",
    "Allow",
    "Answer",
    "Approval",
    "ApprovalPending",
    "ApproveTool",
    "AskOptions",
    "Decided",
    "Defer",
    "Deny",
    "EngineStepOptions",
    "GatedCall",
    "JitCheckError",
    "LazyPrompt",
    "PendingApproval",
    "Question",
    "StepOptions",
    "agent_session",
    "approvals_prompt",
    "ask_agent",
    "ask_human",
    "create_agent_runner",
    "decisions_of",
    "run_agent",
    "stream_agent",
]

T = TypeVar("T", bound="BaseModel")


class _Options(TypedDict, total=False):
    """The options all step functions share (see :class:`StepOptions`)."""

    cwd: Required[str | Path]
    resume: AgentSessionRef | Mapping[str, Any] | None
    agents_env: Sequence[str] | None
    provider_options: Mapping[str, Mapping[str, Any]] | None
    on_event: EventCallback | None
    approve_tool: ApproveTool | None
    approvals: Sequence[Approval] | None
    registry: Registry | None
    session_store: SessionStore | str | Mapping[str, Any] | None
    tools: Sequence[Callable[..., Any]] | None


class StepOptions(_Options, total=False):
    """The options of a step, the same for every step function (:func:`create_agent_runner`,
    :func:`run_agent`, :func:`stream_agent`, :func:`agent_session`) and, but for ``run``, for
    ``jigs_dbos`` and ``jigs_temporal`` (:class:`EngineStepOptions`). Passed as keywords:
    ``run_agent(harness=..., cwd=..., prompt=..., run=...)``.

    - ``cwd`` (required): the step's worktree (never the process's working directory).
    - ``run`` (required): the step's :class:`~jigs.RunMetadata` (a mapping of its fields too).
    - ``resume``: the :class:`~jigs.AgentSessionRef` to continue (forked, never changed), or its
      mapping (a ref that went through JSON). :func:`agent_session` takes it as ``session=``.
    - ``agents_env``: overrides the factory's ``agents.env`` (otherwise read from ``jigs.toml``
      or ``pyproject.toml`` found from ``cwd`` upward).
    - ``provider_options``: ``{kind: {...}}``, what the kind reads itself (Codex's ``effort``,
      ...) and ``on_event``; never persisted. For a runner they are the defaults of every call of
      ``runner.model`` (a call's own ``provider_options`` win).
    - ``on_event``: called with every :mod:`jigs.events` event as it happens; may be async.
    - ``approve_tool``: the step's tool gate, ``fn(call: GatedCall) -> Allow() | Deny(reason) |
      Defer()`` (may be async), asked before each shell command, file edit and MCP tool call the
      agent makes (what each kind shows it: the kinds page). ``Defer()`` ends the turn with
      :class:`~jigs.errors.ApprovalPending`. A kind that cannot ask before a tool runs refuses it
      with :class:`~jigs.errors.InvalidInputError` before anything starts.
    - ``approvals``: decisions taken after a ``Defer()``
      (``error.pending.decide({call_id: Allow()})``), for the step that resumes its session: the
      identical call is allowed once without asking ``approve_tool``, a denied one is refused
      with its reason.
    - ``registry``: resolves the kind (default: the installed plugins), for a descriptor object
      and stored data alike, the way httpx takes ``transport=``.
    - ``session_store``: a :class:`jigs.stores.SessionStore`, a URL or a table; overrides the
      configured store (``JIGS_SESSION_STORE``, ``[tool.jigs.session_store]``, else the local
      directory). At close the session's artifacts go there, and a resume of a ref that names a
      stored copy fetches and verifies it first.
    - ``tools``: plain Python functions (sync or async, typed parameters, a docstring) the agent
      may call, served to it as an MCP server (``tools``) that runs in this worker, for the
      step only (the Tools page). A tool that raises gives the agent an error to
      read; the step goes on.
    """

    run: Required[RunMetadata]


class EngineStepOptions(_Options, total=False):
    """:class:`StepOptions` as ``jigs_dbos`` and ``jigs_temporal`` take them: ``run`` may be
    left out, and is then filled from the engine's context (the DBOS step, the Temporal
    activity). Everything else is the same."""

    run: RunMetadata | None


class AskOptions(TypedDict, total=False):
    """The options of :func:`ask_agent`: :class:`StepOptions` without what needs a worktree
    (``cwd``, ``resume``, ``session_store``). ``agents_env`` is the only source of the agent's
    extra variable names: an ask has no worktree to find the factory's configuration from."""

    run: Required[RunMetadata]
    agents_env: Sequence[str] | None
    provider_options: Mapping[str, Mapping[str, Any]] | None
    on_event: EventCallback | None
    registry: Registry | None


#: A prompt, or a function that makes it (sync or async), called only when the prompt is sent:
#: :func:`agent_session` calls ``fresh_prompt`` only on the fresh path (an expensive diff is
#: never computed for a resumed session) and ``resume_prompt`` only on the resumed one.
LazyPrompt = str | Callable[[], str | Awaitable[str]]

#: The structured output of a turn: a pydantic model, or None when none was asked for.
OutputT = TypeVar("OutputT", bound="BaseModel | None")


class AgentResult(_Data, Generic[OutputT]):
    """A whole turn: the text, the session to resume, and the structured output (typed as the
    model asked for with ``output=``; None when none was). A frozen, generic pydantic model:
    ``AgentResult[MyOutput]`` validates ``output`` as ``MyOutput``."""

    text: str
    session: AgentSessionRef | None
    output: OutputT
    usage: Usage = Field(default_factory=Usage)
    provider_metadata: dict[str, dict[str, Any]] | None = None


class AgentRunner:
    """An opened harness: its model, how to read a session from a result, and ``close``."""

    def __init__(
        self,
        step: Step,
        provider_options: Mapping[str, Mapping[str, Any]] | None = None,
        on_event: EventCallback | None = None,
        gate: ToolGate | None = None,
    ) -> None:
        engine = step.engine
        self._step = step
        self._harness = engine.harness
        self._model = EngineModel(engine, provider_options, on_event, gate)
        self.kind = engine.harness.kind
        self.run_id = engine.ctx.run.workflow_run_id
        self.descriptor: HarnessDescriptor = step.descriptor or engine.target.descriptor
        self.cwd: Path = engine.target.cwd
        self.env_names: tuple[str, ...] = tuple(sorted(engine.ctx.env))
        self.lock_path: Path = step.lock.path

    @property
    def model(self) -> LanguageModel:
        """The live model. Raises :class:`~jigs.errors.RunnerClosedError` once the runner is
        closed."""
        if self._step.closed:
            raise RunnerClosedError(self.kind, self.run_id)
        return self._model

    def session_from(self, result: GenerateResult) -> AgentSessionRef | None:
        """The session a later step can resume, or None. Always read it from the latest
        result: a resumed run can report a new id."""
        session_id = self._harness.session_id(result)
        if session_id is None:
            return None
        stored = self._step.snapshot_ref(session_id) if not self._step.closed else None
        if stored is None:
            stored = self._step.stored.get(session_id)
        return AgentSessionRef(
            harness=self.kind,
            id=session_id,
            descriptor=self._step.describe or self.descriptor.describe(),
            store_key=stored[0] if stored else None,
            digest=stored[1] if stored else None,
        )

    @property
    def closed(self) -> bool:
        return self._step.closed

    async def interrupt(self) -> bool:
        """End the running turn at once: the call of ``runner.model`` running it raises
        :class:`~jigs.errors.AgentInterrupted`, whose ``session`` continues from where the turn
        stopped (``usage`` holds what it spent). The CLI is told to stop (Codex
        ``turn/interrupt``, Claude Code's ``interrupt`` control request); what has not stopped
        within two seconds is killed (Pi's turn is stopped so). Returns False when no turn is
        running. The runner stays open, its lock held, for the next call."""
        return await self._step.engine.interrupt()

    async def steer(self, text: str) -> None:
        """Put ``text`` into the running turn as user input: the model reads it with its next
        request of the same turn (Codex ``turn/steer``; Claude Code reads it from its
        stream-json input). Raises :class:`~jigs.errors.SteerRefusedError` when the kind cannot
        (``reason="unsupported"``, e.g. Pi) or no turn is running (``"idle"``),
        :class:`~jigs.errors.PromptError` for an empty text."""
        if self._step.closed:
            raise RunnerClosedError(self.kind, self.run_id)
        await self._step.engine.steer(text)

    async def close(self) -> None:
        """Stop every process the harness started and release the lock. Idempotent, shielded
        from cancellation, and bounded in time (the lock is released even if the kind's
        cleanup overruns)."""
        await self._step.aclose()

    async def __aenter__(self) -> AgentRunner:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await _close_after(self.close, exc, self._step)


async def _open_runner(
    harness: HarnessDescriptor | Mapping[str, Any], options: StepOptions
) -> AgentRunner:
    probes_soon(harness)  # the host probes run while the step resolves and locks

    step = Step(options.get("registry"), options.get("session_store"))
    try:
        gate = _gate(options)
        await _open_step(step, harness, options, need_model=True, gated=gate is not None)
        step.log.info("runner.opened", total_seconds=round(time.perf_counter() - step.started, 4))
        return AgentRunner(step, options.get("provider_options"), options.get("on_event"), gate)
    except BaseException as exc:
        await _close_after(step.aclose, exc)
        _collect_probe()
        raise


async def _open_step(
    step: Step,
    harness: HarnessDescriptor | Mapping[str, Any],
    options: StepOptions,
    *,
    need_model: bool,
    gated: bool = False,
    images: bool = False,
) -> TurnEngine:
    """Run the step's stages with the caller's options (a missing ``run`` or ``cwd`` is the
    pipeline's :class:`~jigs.errors.InvalidInputError`, as a wrong one is). Inside an engine
    step that listens for the workflow's messages the step joins its mailbox."""
    engine = await step.open(
        harness,
        cwd=options.get("cwd"),
        run=options.get("run"),
        resume=options.get("resume"),
        agents_env=options.get("agents_env"),
        need_model=need_model,
        gated=gated,
        tools=options.get("tools"),
        images=images,
    )
    mailbox = _mailbox.current()
    if mailbox is not None:
        mailbox.add(engine)
    return engine


def _gate(options: StepOptions) -> ToolGate | None:
    """The step's tool gate from ``approve_tool`` and ``approvals`` (None: neither given)."""
    return gate_from_options(
        options.get("approve_tool"),
        options.get("approvals"),
        options.get("provider_options"),
        logger,
    )


def _check_arguments(prompt: object, output: object) -> tuple[str, tuple[Image, ...]]:
    """:func:`run_agent`'s own refusals (the prompt, ``output``), collecting the probe first;
    the prompt's text and images."""
    try:
        parts = prompt_parts(prompt)
        if output is not None and not _is_model_class(output):
            raise InvalidInputError("output must be a pydantic model class", argument="output")
        return parts
    except BaseException:
        _collect_probe()
        raise


def _collect_probe() -> None:
    """A refused call leaves no process behind: collect the host probes that
    :func:`~jigs.engine._pipeline.probes_soon` started (else they stay zombie children until the
    interpreter exits). ``isolation()`` waits for the namespace chain's (milliseconds), reaps it
    and caches the answer for the next step, :func:`~jigs.sandbox._probe.collect_started` does
    the same for bwrap's; once a step has launched, both are cached no-ops."""
    isolation()
    collect_started()


class AgentRunnerOpening:
    """What :func:`create_agent_runner` returns: await it, or use it as an async context
    manager (which closes the runner on exit)."""

    def __init__(
        self, harness: HarnessDescriptor | Mapping[str, Any], options: StepOptions
    ) -> None:
        self._harness = harness
        self._options = options
        self._runner: AgentRunner | None = None

    def __await__(self) -> Generator[Any, None, AgentRunner]:
        return _open_runner(self._harness, self._options).__await__()

    async def __aenter__(self) -> AgentRunner:
        self._runner = await _open_runner(self._harness, self._options)
        return self._runner

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._runner is not None:
            await _close_after(self._runner.close, exc, self._runner._step)


async def _close_after(
    close: Callable[[], Awaitable[None]], exc: BaseException | None, step: Step | None = None
) -> None:
    """Close a step a block ended. A session that could not be saved fails the step
    (:class:`~jigs.errors.SessionSaveError`), unless the block raised already: its own error
    then goes on (the save failure is logged as ``store.session.save_failed``). A failed
    turn's error learns where its session was stored, so ``error.session`` resumes checked."""
    try:
        await close()
    except SessionSaveError:
        if exc is None:
            raise
    if isinstance(exc, AgentTurnError) and exc.session_id and step is not None:
        stored = step.stored.get(exc.session_id)
        if stored is not None:
            exc.store_key, exc.digest = stored


def create_agent_runner(
    harness: HarnessDescriptor | Mapping[str, Any], **options: Unpack[StepOptions]
) -> AgentRunnerOpening:
    """Open a harness under jigs' policy and hand back its live model. ``options``:
    :class:`StepOptions` (``provider_options`` and ``on_event`` become the defaults of every
    call of ``runner.model``).

    Raises :class:`~jigs.errors.ModelNotAvailableError` at once for a kind without a model (use
    :func:`run_agent`), :class:`~jigs.errors.InvalidInputError` for an unusable ``cwd``, ``run``,
    ``resume`` or ``agents_env``, :class:`~jigs.errors.AgentSessionError` when ``resume`` cannot
    be resumed, :class:`~jigs.errors.CheckFailedError` / :class:`~jigs.errors.JitCheckError`
    when a check fails, :class:`~jigs.errors.WorktreeBusyError` when another agent holds the
    worktree, :class:`~jigs.errors.SessionStoreError` when the session store cannot be reached.
    Every failure releases what was acquired.
    """
    return AgentRunnerOpening(harness, options)


@overload
async def run_agent(
    *,
    harness: HarnessDescriptor | Mapping[str, Any],
    prompt: Prompt,
    output: type[T],
    **options: Unpack[StepOptions],
) -> AgentResult[T]: ...


@overload
async def run_agent(
    *,
    harness: HarnessDescriptor | Mapping[str, Any],
    prompt: Prompt,
    output: None = None,
    **options: Unpack[StepOptions],
) -> AgentResult[None]: ...


async def run_agent(
    *,
    harness: HarnessDescriptor | Mapping[str, Any],
    prompt: Prompt,
    output: type[T] | None = None,
    **options: Unpack[StepOptions],
) -> AgentResult[Any]:
    """Run one whole agent turn in ``cwd`` for any kind, with or without a model. ``options``:
    :class:`StepOptions`.

    With ``output`` (a pydantic model) the answer is validated into it. An answer that does not
    fit is sent back once ("Your answer was rejected: ..."), in the same step and the same
    session; a second misfit raises :class:`~jigs.errors.StructuredOutputError`. Raises what
    :func:`create_agent_runner` raises (except that kinds without a model are supported),
    :class:`~jigs.errors.PromptError` for an empty prompt or one with a NUL byte (or with images
    for a kind that takes none: ``prompt`` may be a list of text and
    :class:`~jigs.models.Image` parts), and the turn
    errors (:class:`~jigs.errors.AgentTurnError` and its subclasses, which keep the session id,
    usage and cost).
    """
    return await _run_agent(harness, prompt, output, options)


async def _run_agent(
    harness: HarnessDescriptor | Mapping[str, Any],
    prompt: Prompt,
    output: type[BaseModel] | None,
    options: StepOptions,
    opened: Callable[[TurnEngine], Any] | None = None,
) -> AgentResult[Any]:
    probes_soon(harness)  # the host probes run while the step resolves and locks

    text, images = _check_arguments(prompt, output)
    schema = output.model_json_schema() if output is not None else None
    step = Step(options.get("registry"), options.get("session_store"))
    try:
        gate = _gate(options)
        engine = await _open_step(
            step, harness, options, need_model=False, gated=gate is not None, images=bool(images)
        )
        if opened is not None:
            await opened(engine)
        turn = _Turns(step, engine, schema, options, gate)
        record, usage, parsed = await turn.answer(text, images, output)
    except BaseException as exc:
        await _close_after(step.aclose, exc, step)
        _collect_probe()
        raise
    await step.aclose()  # raises SessionSaveError when the session could not be stored
    kind = engine.harness.kind
    return AgentResult(
        text=record.text,
        session=_session_ref(step, engine, record.session_id),
        output=parsed,
        usage=usage,
        provider_metadata=record.provider_metadata(kind),
    )


class _Turns:
    """The turns of one :func:`run_agent` call: the prompt's, and the one re-ask when the
    answer does not fit ``output``."""

    def __init__(
        self,
        step: Step,
        engine: TurnEngine,
        schema: dict[str, Any] | None,
        options: StepOptions | AskOptions,
        gate: ToolGate | None = None,
    ) -> None:
        self._step = step
        self._gate = gate
        self._engine = engine
        self._schema = schema
        self._kind = engine.harness.kind
        provider_options = options.get("provider_options") or {}
        self._options = dict(provider_options.get(self._kind, {}))
        self._on_event = options.get("on_event") or self._options.pop("on_event", None)

    async def turn(self, text: str, images: tuple[Image, ...] = ()) -> TurnRecord:
        record = TurnRecord()
        request = TurnRequest(
            prompt=text,
            output_schema=self._schema,
            options=self._options,
            on_event=self._on_event,
            gate=self._gate,
            images=images,
        )
        async for _ in self._engine.run(request, record):
            pass
        return record

    async def answer(
        self, prompt: str, images: tuple[Image, ...], output: type[BaseModel] | None
    ) -> tuple[TurnRecord, Usage, Any]:
        """The turn's record, its usage (both turns' when it re-asked) and the parsed output."""
        record = await self.turn(prompt, images)
        if output is None:
            return record, record.usage, None
        try:
            return record, record.usage, self._parse(output, record)
        except StructuredOutputError as exc:
            # ask once more, in the same step and session (the worktree stays locked)
            problem = record.output_problem or str(exc)
            self._step.log.info("run_agent.output.rejected", error=problem[:200])

            again = reask_prompt(problem, self._schema or {})
            resent: tuple[Image, ...] = ()
            if self._engine.session_id is None:  # no session holds the prompt: send it again
                again, resent = f"{prompt}\n\n{again}", images
            first = record.usage
            record = await self.turn(again, resent)
            return record, _add_usage(first, record.usage), self._parse(output, record)

    def _parse(self, output: type[BaseModel], record: TurnRecord) -> BaseModel:
        return parse_output(output, result_of(self._kind, record, [], None))


def _session_ref(step: Step, engine: TurnEngine, session_id: str | None) -> AgentSessionRef | None:
    """The ref a later step resumes, with where the closed step stored the session."""
    if not session_id:
        return None
    stored = step.stored.get(session_id)
    return AgentSessionRef(
        harness=engine.harness.kind,
        id=session_id,
        descriptor=engine.describe,
        store_key=stored[0] if stored else None,
        digest=stored[1] if stored else None,
    )


class AgentStream:
    """A running turn as an async iterator of :mod:`jigs.events` events (see
    :func:`stream_agent`). After the iteration, :attr:`result` holds the
    :class:`AgentResult`; a failed turn raises its error from the iteration."""

    def __init__(
        self,
        harness: HarnessDescriptor | Mapping[str, Any],
        prompt: Prompt,
        output: type[BaseModel] | None,
        options: StepOptions,
    ) -> None:
        self._call = (harness, prompt, output, options)
        self.result: AgentResult[Any] | None = None
        self._error: BaseException | None = None
        self._group: Any = None
        self._engine: TurnEngine | None = None
        self._interrupted = False

    async def __aenter__(self) -> AgentStream:
        send, self._receive = anyio.create_memory_object_stream[AgentEvent](1000)
        self._group = anyio.create_task_group()
        await self._group.__aenter__()

        harness, prompt, output, options = self._call
        also = options.get("on_event")

        async def on_event(event: AgentEvent) -> None:
            await emit_event(also, event)
            await send.send(event)

        async def turn() -> None:
            async with send:
                try:
                    calling: StepOptions = {**options, "on_event": on_event}
                    self.result = await _run_agent(harness, prompt, output, calling, self._opened)
                except Exception as exc:  # handed to the consumer when the events run out
                    self._error = exc

        self._group.start_soon(turn)
        return self

    async def _opened(self, engine: TurnEngine) -> None:
        self._engine = engine
        if self._interrupted:  # interrupted while the step opened: its turn ends at once
            await engine.interrupt(next_turn=True)

    async def interrupt(self) -> bool:
        """End the turn at once (see :meth:`AgentRunner.interrupt`): the iteration raises
        :class:`~jigs.errors.AgentInterrupted` once the step is closed (the worktree free),
        with the session to resume. False when the turn has already ended."""
        if self.result is not None or self._error is not None:
            return False
        self._interrupted = True
        if self._engine is None:
            return True
        return await self._engine.interrupt(next_turn=True)

    async def steer(self, text: str) -> None:
        """Put ``text`` into the running turn (see :meth:`AgentRunner.steer`)."""
        engine = self._engine
        if engine is None:
            raise SteerRefusedError(
                "the stream's turn has not started yet: wait for its first event",
                kind=str(getattr(self._call[0], "kind", "") or ""),
                reason="idle",
            )
        await engine.steer(text)

    def __aiter__(self) -> AgentStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            if self._error is not None:
                error, self._error = self._error, None
                raise error from None
            raise StopAsyncIteration from None

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None or self.result is None:
            self._group.cancel_scope.cancel()  # leaving early stops the turn (and releases)
        self._receive.close()
        # the turn task keeps its own error (raised from the iteration): the block's own
        # exception, if any, propagates as it is
        await self._group.__aexit__(None, None, None)


def stream_agent(
    *,
    harness: HarnessDescriptor | Mapping[str, Any],
    prompt: Prompt,
    output: type[BaseModel] | None = None,
    **options: Unpack[StepOptions],
) -> AgentStream:
    """:func:`run_agent` as a stream of events, for any kind (``options``:
    :class:`StepOptions`; an ``on_event`` is called too, before each event is handed on)::

        async with stream_agent(harness=..., cwd=..., prompt=..., run=...) as turn:
            async for event in turn:
                print(event.type)
        print(turn.result.text)

    Leaving the block before the turn ends stops the agent and releases the worktree.
    """
    return AgentStream(harness, prompt, output, options)


def _is_model_class(value: object) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def _add_usage(a: Usage, b: Usage) -> Usage:
    def add(x: Any, y: Any) -> Any:
        return None if x is None and y is None else (x or 0) + (y or 0)

    return Usage(**{name: add(getattr(a, name), getattr(b, name)) for name in Usage.model_fields})


@overload
async def agent_session(
    *,
    harness: HarnessDescriptor | Mapping[str, Any],
    session: AgentSessionRef | None,
    resume_prompt: LazyPrompt,
    fresh_prompt: LazyPrompt,
    output: type[T],
    name: str = "agent",
    **options: Unpack[StepOptions],
) -> AgentResult[T]: ...


@overload
async def agent_session(
    *,
    harness: HarnessDescriptor | Mapping[str, Any],
    session: AgentSessionRef | None,
    resume_prompt: LazyPrompt,
    fresh_prompt: LazyPrompt,
    output: None = None,
    name: str = "agent",
    **options: Unpack[StepOptions],
) -> AgentResult[None]: ...


async def agent_session(
    *,
    harness: HarnessDescriptor | Mapping[str, Any],
    session: AgentSessionRef | None,
    resume_prompt: LazyPrompt,
    fresh_prompt: LazyPrompt,
    output: type[T] | None = None,
    name: str = "agent",
    **options: Unpack[StepOptions],
) -> AgentResult[Any]:
    """Continue a held session when it still fits, else start fresh.

    Each prompt is a string or a function making one (sync or async, :data:`LazyPrompt`),
    called only on the path that sends it. Resumes ``session`` with ``resume_prompt`` only if
    it was recorded on the same kind with the same descriptor (``describe()``); otherwise, or
    when the harness cannot resume it (:class:`~jigs.errors.AgentSessionError`), runs
    ``fresh_prompt`` without resume, logging why. A turn error that carries a session (a turn
    stopped by ``max_turns``, say) can be continued by passing ``error.session`` as
    ``session``. ``options``: :class:`StepOptions`, but for ``resume``
    (:class:`~jigs.errors.InvalidInputError`): the held session is ``session``.
    """
    if "resume" in options:
        raise InvalidInputError(
            "agent_session resumes the session given as session= when it still fits; pass the "
            "ref there, not as resume=",
            argument="resume",
        )
    descriptor = load(harness, registry=options.get("registry"))
    run_id = getattr(options.get("run"), "workflow_run_id", None)
    log = logger.bind(session_name=name, run_id=run_id, kind=descriptor.kind)
    if session is not None:
        if session.harness != descriptor.kind or session.descriptor != descriptor.describe():
            log.info(
                "agent_session.fresh",
                reason="the session was recorded on another harness or descriptor",
                session_id=session.id,
            )
        else:
            try:
                resuming: StepOptions = {**options, "resume": session}
                prompt = await _made(resume_prompt)
                return await _run_agent(descriptor, prompt, output, resuming)
            except AgentSessionError as exc:
                log.info("agent_session.fresh", reason=str(exc), session_id=session.id)
    return await _run_agent(descriptor, await _made(fresh_prompt), output, options)


async def _made(prompt: LazyPrompt) -> str:
    """The prompt itself: a string as it is, a function's (awaited) return value. What is not
    a string is :func:`run_agent`'s :class:`~jigs.errors.PromptError`."""
    if not callable(prompt):
        return prompt
    made = prompt()
    if inspect.isawaitable(made):
        made = await made
    return made


#: What :func:`ask_agent` refuses, and why.
_NOT_FOR_ASKS = {
    "cwd": "ask_agent runs in a private scratch directory of its own",
    "resume": "an ask keeps no session to resume",
    "session_store": "an ask keeps no session to store",
    "tools": "an ask runs without tools (use run_agent to give the agent Python tools)",
}


@overload
async def ask_agent(
    *,
    harness: HarnessDescriptor | Mapping[str, Any],
    prompt: str,
    output: type[T],
    **options: Unpack[AskOptions],
) -> AgentResult[T]: ...


@overload
async def ask_agent(
    *,
    harness: HarnessDescriptor | Mapping[str, Any],
    prompt: str,
    output: None = None,
    **options: Unpack[AskOptions],
) -> AgentResult[None]: ...


async def ask_agent(
    *,
    harness: HarnessDescriptor | Mapping[str, Any],
    prompt: str,
    output: type[T] | None = None,
    **options: Unpack[AskOptions],
) -> AgentResult[Any]:
    """One tool-free turn: a question that needs no worktree ("classify this ticket",
    "summarise this diff": put what it needs in the prompt). ``options``: :class:`AskOptions`.

    The agent runs in a private scratch directory (removed afterwards, whatever happens) with
    no tool at all: no shell, no file tools, no MCP server, no web search; nothing is locked
    and no session is kept (``result.session`` is None). Everything else is
    :func:`run_agent`'s policy: the environment built from empty, the credential proxy, the
    sandbox, the descriptor's limits and timeouts, ``output`` validated with one re-ask.

    Raises :class:`~jigs.errors.InvalidInputError` for ``cwd``, ``resume`` or
    ``session_store``, for a descriptor with ``mcp_servers``, and for a kind that cannot run
    its CLI without tools (the message says why); otherwise what :func:`run_agent` raises.
    """
    for key, why in _NOT_FOR_ASKS.items():
        if key in options:
            raise InvalidInputError(f"ask_agent takes no {key}=: {why}", argument=key)
    return await _ask(harness, prompt, output, options)


async def _ask(
    harness: HarnessDescriptor | Mapping[str, Any],
    prompt: str,
    output: type[BaseModel] | None,
    options: AskOptions,
) -> AgentResult[Any]:
    probes_soon(harness)  # the host probes run while the step resolves

    text, images = _check_arguments(prompt, output)
    if images:
        _collect_probe()
        raise PromptError("ask_agent's prompt is text; send images with run_agent")
    schema = output.model_json_schema() if output is not None else None
    scratch = make_owned_dir("jigs-ask-")
    step = Step(options.get("registry"))
    try:
        try:
            engine = await step.open(
                harness,
                cwd=scratch,
                run=options.get("run"),
                resume=None,
                agents_env=options.get("agents_env"),
                need_model=False,
                tool_free=True,
            )
            turn = _Turns(step, engine, schema, options)
            record, usage, parsed = await turn.answer(text, (), output)
        except BaseException as exc:
            await _close_after(step.aclose, exc, step)
            _collect_probe()
            raise
        await step.aclose()
    finally:
        remove_tree(scratch)  # after the close: no process of the step is left to write there
    return AgentResult(
        text=record.text,
        session=None,
        output=parsed,
        usage=usage,
        provider_metadata=record.provider_metadata(engine.harness.kind),
    )
