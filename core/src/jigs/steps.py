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
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, TypeVar, overload

from pydantic import BaseModel

from jigs._logging import logger, timed
from jigs._pipeline import Prepared, StepScope, prepare
from jigs._types import AgentSessionRef, RunMetadata
from jigs.descriptors import HarnessDescriptor
from jigs.errors import (
    AgentSessionError,
    JitCheckError,
    ModelNotAvailableError,
    RunnerClosedError,
    StructuredOutputError,
    WorktreeBusyError,
)
from jigs.models._functions import parse_output
from jigs.models._protocol import LanguageModel
from jigs.models._types import GenerateResult, Usage
from jigs.plugin import AgentRequest, AgentTurn, HarnessTarget

__all__ = [
    "AgentResult",
    "AgentRunner",
    "AgentRunnerOpening",
    "AgentSessionError",
    "JitCheckError",
    "ModelNotAvailableError",
    "WorktreeBusyError",
    "agent_session",
    "create_agent_runner",
    "run_agent",
]

T = TypeVar("T", bound=BaseModel)
#: The structured output of a turn: a pydantic model, or None when none was asked for.
OutputT = TypeVar("OutputT", bound=BaseModel | None)


class AgentRunner:
    """An opened harness: its model, how to read a session from a result, and ``close``."""

    def __init__(self, prepared: Prepared, model: LanguageModel | None, scope: StepScope) -> None:
        self._prepared = prepared
        self._model = model
        self._scope = scope
        self.kind = prepared.harness.kind
        self.run_id = prepared.ctx.run.workflow_run_id
        self.descriptor: HarnessDescriptor = prepared.target.descriptor
        self.cwd: Path = prepared.target.cwd
        self.env_names: tuple[str, ...] = tuple(sorted(prepared.ctx.env))
        self.lock_path: Path = prepared.lock.path

    @property
    def model(self) -> LanguageModel:
        """The live model. Raises :class:`ModelNotAvailableError` for kinds without one and
        :class:`~jigs.errors.RunnerClosedError` once the runner is closed."""
        if self._model is None:
            raise ModelNotAvailableError(self.kind)
        if self._scope.closed:
            raise RunnerClosedError(self.kind, self.run_id)
        return self._model

    def session_from(self, result: GenerateResult) -> AgentSessionRef | None:
        """The session a later step can resume, or None. Always read it from the latest
        result: a resumed run can report a new id."""
        session_id = self._prepared.harness.session_id(result)
        if session_id is None:
            return None
        return AgentSessionRef(
            harness=self.kind, id=session_id, descriptor=self.descriptor.describe()
        )

    @property
    def closed(self) -> bool:
        return self._scope.closed

    async def close(self) -> None:
        """Stop every process the harness started and release the lock. Idempotent, shielded
        from cancellation, and bounded in time (the lock is released even if the kind's
        cleanup overruns)."""
        await self._scope.aclose()

    async def __aenter__(self) -> AgentRunner:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


async def _open_runner(
    harness: HarnessDescriptor | dict[str, Any],
    *,
    cwd: str | Path,
    run: RunMetadata,
    resume: AgentSessionRef | None,
    agents_env: Sequence[str] | None,
) -> AgentRunner:
    scope = StepScope()
    try:
        prepared = await prepare(
            harness,
            cwd=cwd,
            run=run,
            resume=resume,
            agents_env=agents_env,
            need_model=True,
            scope=scope,
        )
        started = time.perf_counter()
        model = await prepared.harness.open(prepared.target, prepared.ctx)
        prepared.ctx.log.info(
            "runner.opened",
            seconds=round(time.perf_counter() - started, 4),
            total_seconds=round(time.perf_counter() - prepared.started, 4),
        )
    except BaseException:
        await scope.aclose()
        raise
    return AgentRunner(prepared, model, scope)


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
            await self._runner.close()


def create_agent_runner(
    harness: HarnessDescriptor | dict[str, Any],
    *,
    cwd: str | Path,
    run: RunMetadata,
    resume: AgentSessionRef | None = None,
    agents_env: Sequence[str] | None = None,
) -> AgentRunnerOpening:
    """Open a harness under jigs' policy and hand back its live model.

    ``agents_env`` overrides the factory's ``agents.env`` (otherwise read from ``jigs.toml`` or
    ``pyproject.toml`` found from ``cwd`` upward).

    Raises :class:`ModelNotAvailableError` at once for a kind without a model (use
    :func:`run_agent`), :class:`AgentSessionError` when ``resume`` cannot be resumed,
    :class:`~jigs.errors.CheckFailedError` / :class:`JitCheckError` when a check fails,
    :class:`WorktreeBusyError` when another agent holds the worktree. Every failure releases
    what was acquired.
    """
    return AgentRunnerOpening(
        harness=harness, cwd=cwd, run=run, resume=resume, agents_env=agents_env
    )


@dataclass(frozen=True, slots=True)
class AgentResult(Generic[OutputT]):
    """A whole turn: the text, the session to resume, and the structured output (typed as the
    model asked for with ``output=``; None when none was)."""

    text: str
    session: AgentSessionRef | None
    output: OutputT
    usage: Usage = field(default_factory=Usage)
    provider_metadata: dict[str, dict[str, Any]] | None = None


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
) -> AgentResult[Any]:
    """Run one whole agent turn in ``cwd`` for any kind, with or without a model.

    With ``output`` (a pydantic model) the answer is validated into it. An answer that does not
    fit is sent back once ("Your answer was rejected: ..."), resuming the turn's session when it
    has one; a second misfit raises :class:`~jigs.errors.StructuredOutputError`. Raises what
    :func:`create_agent_runner` raises, except that kinds without a model are supported.
    """
    schema = output.model_json_schema() if output is not None else None
    options = provider_options or {}
    scope = StepScope()
    try:
        prepared = await prepare(
            harness,
            cwd=cwd,
            run=run,
            resume=resume,
            agents_env=agents_env,
            need_model=False,
            scope=scope,
        )
        kind, target, ctx = prepared.harness.kind, prepared.target, prepared.ctx

        async def turn(target: HarnessTarget, prompt: str) -> AgentTurn:
            with timed("runner.turn", ctx.log, resumed=target.resume is not None):
                return await prepared.harness.run(
                    AgentRequest(
                        target=target,
                        prompt=prompt,
                        output_schema=schema,
                        provider_options=options,
                    ),
                    ctx,
                )

        result = await turn(target, prompt)
        parsed = None
        if output is not None:
            try:
                parsed = parse_output(
                    output, GenerateResult(text=result.text, output=result.output)
                )
            except StructuredOutputError as exc:
                # ask once more, in the same step (the worktree stays locked)
                rejection = f"Your answer was rejected:\n{exc}\n\nAnswer again, fixing that."
                ctx.log.info("run_agent.output.rejected", error=str(exc)[:200])
                if result.session_id:
                    again = HarnessTarget(
                        descriptor=target.descriptor,
                        cwd=target.cwd,
                        resume=AgentSessionRef(
                            harness=kind,
                            id=result.session_id,
                            descriptor=target.descriptor.describe(),
                        ),
                    )
                    await prepared.harness.verify_resume(again, ctx)
                    result = await turn(again, rejection)
                else:
                    result = await turn(target, f"{prompt}\n\n{rejection}")
                parsed = parse_output(
                    output, GenerateResult(text=result.text, output=result.output)
                )
    finally:
        await scope.aclose()
    session = (
        AgentSessionRef(harness=kind, id=result.session_id, descriptor=target.descriptor.describe())
        if result.session_id
        else None
    )
    return AgentResult(
        text=result.text,
        session=session,
        output=parsed,
        usage=result.usage,
        provider_metadata=result.provider_metadata,
    )


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
) -> AgentResult[Any]:
    """Continue a held session when it still fits, else start fresh.

    Resumes ``session`` with ``resume_prompt`` only if it was recorded on the same kind with the
    same descriptor (``describe()``); otherwise, or when the harness cannot resume it
    (:class:`AgentSessionError`), runs ``fresh_prompt`` without resume, logging why.
    """
    from jigs.harnesses import load

    descriptor = load(harness)
    log = logger.bind(session_name=name, run_id=run.workflow_run_id, kind=descriptor.kind)
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
    )
