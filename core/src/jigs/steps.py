"""What a workflow step calls: ``create_agent_runner``, ``run_agent`` and ``agent_session``.

::

    async with create_agent_runner(harness, cwd=worktree, run=run, resume=session) as runner:
        result = await generate_text(runner.model, prompt="Explain the failing test.")
        return result.text, runner.session_from(result)

``create_agent_runner`` also works as ``runner = await create_agent_runner(...)`` with
``await runner.close()`` in a ``finally``. Until the runner is closed no other agent can start in
that worktree.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import anyio
from pydantic import BaseModel, Field

from jigs._engine import TurnRecord, TurnRequest
from jigs._isolation import isolation, probe_soon
from jigs._logging import logger
from jigs._model import EngineModel, result_of
from jigs._pipeline import Step, validate_prompt
from jigs._structured import reask_prompt
from jigs._types import AgentSessionRef, _Data
from jigs.errors import (
    AgentSessionError,
    AgentTurnError,
    InvalidInputError,
    JitCheckError,
    RunnerClosedError,
    SessionSaveError,
    StructuredOutputError,
)
from jigs.events import AgentEvent
from jigs.harnesses import load
from jigs.models._functions import parse_output
from jigs.models._types import Usage

if TYPE_CHECKING:
    from collections.abc import Mapping

    from jigs._engine import EventCallback
    from jigs._registry import Registry
    from jigs._types import RunMetadata
    from jigs.descriptors import HarnessDescriptor
    from jigs.models._protocol import LanguageModel
    from jigs.models._types import GenerateResult
    from jigs.stores import SessionStore

# the two errors are re-exported beside create_agent_runner: the guide jigs implements imports
# them from here (they are documented in jigs.errors)
__all__ = [
    "AgentResult",
    "AgentRunner",
    "AgentRunnerOpening",
    "AgentSessionError",
    "AgentStream",
    "JitCheckError",
    "agent_session",
    "create_agent_runner",
    "run_agent",
    "stream_agent",
]

T = TypeVar("T", bound="BaseModel")
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

    def __init__(self, step: Step) -> None:
        engine = step.engine
        self._step = step
        self._harness = engine.harness
        self._model = EngineModel(engine)
        self.kind = engine.harness.kind
        self.run_id = engine.ctx.run.workflow_run_id
        self.descriptor: HarnessDescriptor = engine.target.descriptor
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
            descriptor=self.descriptor.describe(),
            store_key=stored[0] if stored else None,
            digest=stored[1] if stored else None,
        )

    @property
    def closed(self) -> bool:
        return self._step.closed

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
    harness: HarnessDescriptor | dict[str, Any],
    *,
    cwd: str | Path,
    run: RunMetadata,
    resume: AgentSessionRef | None,
    agents_env: Sequence[str] | None,
    registry: Registry | None,
    session_store: object = None,
) -> AgentRunner:
    probe_soon()  # the isolation probe runs while the step resolves and locks

    step = Step(registry, session_store)
    try:
        await step.open(
            harness, cwd=cwd, run=run, resume=resume, agents_env=agents_env, need_model=True
        )
        step.log.info("runner.opened", total_seconds=round(time.perf_counter() - step.started, 4))
        return AgentRunner(step)
    except BaseException as exc:
        await _close_after(step.aclose, exc)
        _collect_probe()
        raise


def _check_arguments(prompt: object, output: object) -> None:
    """:func:`run_agent`'s own refusals (the prompt, ``output``), collecting the probe first."""
    try:
        validate_prompt(prompt)
        if output is not None and not _is_model_class(output):
            raise InvalidInputError("output must be a pydantic model class", argument="output")
    except BaseException:
        _collect_probe()
        raise


def _collect_probe() -> None:
    """A refused call leaves no process behind: collect the isolation probe that
    ``probe_soon`` started (else it stays a zombie child until the interpreter exits).
    ``isolation()`` waits for it (milliseconds), reaps it and caches the answer for the next
    step; once a step has launched, it is a cached no-op."""
    isolation()


class AgentRunnerOpening:
    """What :func:`create_agent_runner` returns: await it, or use it as an async context
    manager (which closes the runner on exit)."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._runner: AgentRunner | None = None

    def __await__(self) -> Generator[Any, None, AgentRunner]:
        return _open_runner(**self._kwargs).__await__()

    async def __aenter__(self) -> AgentRunner:
        self._runner = await _open_runner(**self._kwargs)
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
    harness: HarnessDescriptor | dict[str, Any],
    *,
    cwd: str | Path,
    run: RunMetadata,
    resume: AgentSessionRef | None = None,
    agents_env: Sequence[str] | None = None,
    registry: Registry | None = None,
    session_store: SessionStore | str | Mapping[str, Any] | None = None,
) -> AgentRunnerOpening:
    """Open a harness under jigs' policy and hand back its live model.

    ``agents_env`` overrides the factory's ``agents.env`` (otherwise read from ``jigs.toml`` or
    ``pyproject.toml`` found from ``cwd`` upward). ``registry`` resolves the kind (default: the
    installed plugins), for a descriptor object and stored data alike.

    Raises :class:`~jigs.errors.ModelNotAvailableError` at once for a kind without a model (use
    :func:`run_agent`), :class:`~jigs.errors.InvalidInputError` for an unusable ``cwd``, ``run``,
    ``resume`` or ``agents_env``, :class:`~jigs.errors.AgentSessionError` when ``resume`` cannot
    be resumed, :class:`~jigs.errors.CheckFailedError` / :class:`~jigs.errors.JitCheckError`
    when a check fails, :class:`~jigs.errors.WorktreeBusyError` when another agent holds the
    worktree. Every failure releases what was acquired.

    ``session_store`` (a :class:`jigs.stores.SessionStore`, a URL or a table) overrides the
    configured store (``JIGS_SESSION_STORE``, ``[tool.jigs.session_store]``, else the local
    directory): at close the session's artifacts go there, and a resume of a ref that names a
    stored copy fetches and verifies it first (:class:`~jigs.errors.SessionStoreError` when
    the store cannot be reached).
    """
    return AgentRunnerOpening(
        harness=harness,
        cwd=cwd,
        run=run,
        resume=resume,
        agents_env=agents_env,
        registry=registry,
        session_store=session_store,
    )


@overload
async def run_agent(
    *,
    harness: HarnessDescriptor | dict[str, Any],
    cwd: str | Path,
    prompt: str,
    run: RunMetadata,
    resume: AgentSessionRef | None = None,
    output: type[T],
    agents_env: Sequence[str] | None = None,
    provider_options: dict[str, dict[str, Any]] | None = None,
    on_event: EventCallback | None = None,
    registry: Registry | None = None,
    session_store: SessionStore | str | Mapping[str, Any] | None = None,
) -> AgentResult[T]: ...


@overload
async def run_agent(
    *,
    harness: HarnessDescriptor | dict[str, Any],
    cwd: str | Path,
    prompt: str,
    run: RunMetadata,
    resume: AgentSessionRef | None = None,
    output: None = None,
    agents_env: Sequence[str] | None = None,
    provider_options: dict[str, dict[str, Any]] | None = None,
    on_event: EventCallback | None = None,
    registry: Registry | None = None,
    session_store: SessionStore | str | Mapping[str, Any] | None = None,
) -> AgentResult[None]: ...


async def run_agent(
    *,
    harness: HarnessDescriptor | dict[str, Any],
    cwd: str | Path,
    prompt: str,
    run: RunMetadata,
    resume: AgentSessionRef | None = None,
    output: type[T] | None = None,
    agents_env: Sequence[str] | None = None,
    provider_options: dict[str, dict[str, Any]] | None = None,
    on_event: EventCallback | None = None,
    registry: Registry | None = None,
    session_store: SessionStore | str | Mapping[str, Any] | None = None,
) -> AgentResult[Any]:
    """Run one whole agent turn in ``cwd`` for any kind, with or without a model.

    With ``output`` (a pydantic model) the answer is validated into it. An answer that does not
    fit is sent back once ("Your answer was rejected: ..."), in the same step and the same
    session; a second misfit raises :class:`~jigs.errors.StructuredOutputError`. ``on_event`` is
    called with every :mod:`jigs.events` event as it happens (it may be async). Raises what
    :func:`create_agent_runner` raises (except that kinds without a model are supported),
    :class:`~jigs.errors.PromptError` for an empty prompt or one with a NUL byte, and the turn
    errors (:class:`~jigs.errors.AgentTurnError` and its subclasses, which keep the session id,
    usage and cost).
    """
    probe_soon()  # the isolation probe runs while the step resolves and locks

    _check_arguments(prompt, output)
    schema = output.model_json_schema() if output is not None else None
    step = Step(registry, session_store)
    try:
        engine = await step.open(
            harness, cwd=cwd, run=run, resume=resume, agents_env=agents_env, need_model=False
        )
        kind = engine.harness.kind
        options = dict((provider_options or {}).get(kind, {}))
        callback = on_event or options.pop("on_event", None)

        async def turn(text: str) -> TurnRecord:
            record = TurnRecord()
            request = TurnRequest(
                prompt=text, output_schema=schema, options=options, on_event=callback
            )
            async for _ in engine.run(request, record):
                pass
            return record

        record = await turn(prompt)
        usage = record.usage
        parsed = None
        if output is not None:
            try:
                parsed = parse_output(output, result_of(kind, record, [], None))
            except StructuredOutputError as exc:
                # ask once more, in the same step and session (the worktree stays locked)
                problem = record.output_problem or str(exc)
                step.log.info("run_agent.output.rejected", error=problem[:200])

                again = reask_prompt(problem, schema or {})
                if engine.session_id is None:
                    again = f"{prompt}\n\n{again}"
                first = usage
                record = await turn(again)
                usage = _add_usage(first, record.usage)
                parsed = parse_output(output, result_of(kind, record, [], None))
        descriptor = engine.target.descriptor
    except BaseException as exc:
        await _close_after(step.aclose, exc, step)
        _collect_probe()
        raise
    await step.aclose()  # raises SessionSaveError when the session could not be stored
    stored = step.stored.get(record.session_id) if record.session_id else None
    session = (
        AgentSessionRef(
            harness=kind,
            id=record.session_id,
            descriptor=descriptor.describe(),
            store_key=stored[0] if stored else None,
            digest=stored[1] if stored else None,
        )
        if record.session_id
        else None
    )
    return AgentResult(
        text=record.text,
        session=session,
        output=parsed,
        usage=usage,
        provider_metadata=record.provider_metadata(kind),
    )


class AgentStream:
    """A running turn as an async iterator of :mod:`jigs.events` events (see
    :func:`stream_agent`). After the iteration, :attr:`result` holds the
    :class:`AgentResult`; a failed turn raises its error from the iteration."""

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self._kwargs = kwargs
        self.result: AgentResult[Any] | None = None
        self._error: BaseException | None = None
        self._group: Any = None

    async def __aenter__(self) -> AgentStream:
        send, self._receive = anyio.create_memory_object_stream[AgentEvent](1000)
        self._group = anyio.create_task_group()
        await self._group.__aenter__()

        async def turn() -> None:
            async with send:
                try:
                    self.result = await run_agent(**self._kwargs, on_event=send.send)
                except Exception as exc:  # handed to the consumer when the events run out
                    self._error = exc

        self._group.start_soon(turn)
        return self

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
    harness: HarnessDescriptor | dict[str, Any],
    cwd: str | Path,
    prompt: str,
    run: RunMetadata,
    resume: AgentSessionRef | None = None,
    output: type[BaseModel] | None = None,
    agents_env: Sequence[str] | None = None,
    provider_options: dict[str, dict[str, Any]] | None = None,
    registry: Registry | None = None,
    session_store: SessionStore | str | Mapping[str, Any] | None = None,
) -> AgentStream:
    """:func:`run_agent` as a stream of events, for any kind::

        async with stream_agent(harness=..., cwd=..., prompt=..., run=...) as turn:
            async for event in turn:
                print(event.type)
        print(turn.result.text)

    Leaving the block before the turn ends stops the agent and releases the worktree.
    """
    return AgentStream(
        {
            "harness": harness,
            "cwd": cwd,
            "prompt": prompt,
            "run": run,
            "resume": resume,
            "output": output,
            "agents_env": agents_env,
            "provider_options": provider_options,
            "registry": registry,
            "session_store": session_store,
        }
    )


def _is_model_class(value: object) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def _add_usage(a: Usage, b: Usage) -> Usage:
    def add(x: Any, y: Any) -> Any:
        return None if x is None and y is None else (x or 0) + (y or 0)

    return Usage(**{name: add(getattr(a, name), getattr(b, name)) for name in Usage.model_fields})


@overload
async def agent_session(
    *,
    harness: HarnessDescriptor | dict[str, Any],
    cwd: str | Path,
    run: RunMetadata,
    session: AgentSessionRef | None,
    resume_prompt: str,
    fresh_prompt: str,
    output: type[T],
    name: str = "agent",
    agents_env: Sequence[str] | None = None,
    on_event: EventCallback | None = None,
    registry: Registry | None = None,
    session_store: SessionStore | str | Mapping[str, Any] | None = None,
) -> AgentResult[T]: ...


@overload
async def agent_session(
    *,
    harness: HarnessDescriptor | dict[str, Any],
    cwd: str | Path,
    run: RunMetadata,
    session: AgentSessionRef | None,
    resume_prompt: str,
    fresh_prompt: str,
    output: None = None,
    name: str = "agent",
    agents_env: Sequence[str] | None = None,
    on_event: EventCallback | None = None,
    registry: Registry | None = None,
    session_store: SessionStore | str | Mapping[str, Any] | None = None,
) -> AgentResult[None]: ...


async def agent_session(
    *,
    harness: HarnessDescriptor | dict[str, Any],
    cwd: str | Path,
    run: RunMetadata,
    session: AgentSessionRef | None,
    resume_prompt: str,
    fresh_prompt: str,
    output: type[T] | None = None,
    name: str = "agent",
    agents_env: Sequence[str] | None = None,
    on_event: EventCallback | None = None,
    registry: Registry | None = None,
    session_store: SessionStore | str | Mapping[str, Any] | None = None,
) -> AgentResult[Any]:
    """Continue a held session when it still fits, else start fresh.

    Resumes ``session`` with ``resume_prompt`` only if it was recorded on the same kind with the
    same descriptor (``describe()``); otherwise, or when the harness cannot resume it
    (:class:`~jigs.errors.AgentSessionError`), runs ``fresh_prompt`` without resume, logging
    why. A turn error that carries a session (a turn stopped by ``max_turns``, say) can be
    continued by passing ``error.session`` as ``session``.
    """
    descriptor = load(harness, registry=registry)
    run_id = getattr(run, "workflow_run_id", None)
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
                return await run_agent(
                    harness=descriptor,
                    cwd=cwd,
                    prompt=resume_prompt,
                    run=run,
                    resume=session,
                    output=output,
                    agents_env=agents_env,
                    on_event=on_event,
                    registry=registry,
                    session_store=session_store,
                )
            except AgentSessionError as exc:
                log.info("agent_session.fresh", reason=str(exc), session_id=session.id)
    return await run_agent(
        harness=descriptor,
        cwd=cwd,
        prompt=fresh_prompt,
        run=run,
        output=output,
        agents_env=agents_env,
        on_event=on_event,
        registry=registry,
        session_store=session_store,
    )
