"""Step calls that fill ``run`` from the activity, and a descriptor type for the converter."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, Unpack, overload

from jigs.descriptors import HarnessDescriptor
from pydantic import BaseModel

from jigs_temporal._context import run_metadata

if TYPE_CHECKING:
    from jigs.models import Prompt
    from jigs.steps import AgentResult, AgentRunnerOpening, EngineStepOptions, StepOptions

__all__ = ["Descriptor", "create_agent_runner", "run_agent"]

T = TypeVar("T", bound=BaseModel)


def _load(value: Any) -> HarnessDescriptor:
    from temporalio import workflow

    # inside a workflow's sandbox the kind's plugin must load as the real module (its registry
    # holds locks); outside one this is a no-op
    with workflow.unsafe.imports_passed_through():
        from jigs import harnesses

        kind = value.get("kind") if isinstance(value, Mapping) else None
        if isinstance(kind, str):
            # pydantic builds a descriptor's schema on first use and resolves its annotations in
            # sys.modules[its module]; the sandbox's sys.modules has only what the workflow
            # imported, so pass the class's modules in
            descriptor_type = harnesses._registry().get(kind).descriptor_type
            for base in descriptor_type.__mro__:
                importlib.import_module(base.__module__)
        return harnesses.load(value)


def _dump(value: HarnessDescriptor) -> dict[str, Any]:
    return value.to_data()


if TYPE_CHECKING:
    #: A harness descriptor of any installed kind, for activity and workflow signatures.
    Descriptor = HarnessDescriptor
else:

    class Descriptor:
        """A harness descriptor of any installed kind, for activity and workflow signatures:
        Temporal's pydantic data converter stores its data and rebuilds the kind's own class
        (``jigs.harnesses.load``), which a ``HarnessDescriptor`` annotation cannot (it would
        refuse the kind's keys). Type checkers see :class:`~jigs.descriptors.HarnessDescriptor`.
        """

        @classmethod
        def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
            from pydantic_core import core_schema

            return core_schema.no_info_plain_validator_function(
                _load,
                serialization=core_schema.plain_serializer_function_ser_schema(_dump),
            )


def _filled(options: EngineStepOptions) -> StepOptions:
    """The options with ``run`` filled from the activity unless given."""
    filled: StepOptions = {**options, "run": options.get("run") or run_metadata()}
    return filled


@overload
async def run_agent(
    *,
    harness: HarnessDescriptor | Mapping[str, Any],
    prompt: Prompt,
    output: type[T],
    **options: Unpack[EngineStepOptions],
) -> AgentResult[T]: ...


@overload
async def run_agent(
    *,
    harness: HarnessDescriptor | Mapping[str, Any],
    prompt: Prompt,
    output: None = None,
    **options: Unpack[EngineStepOptions],
) -> AgentResult[None]: ...


async def run_agent(
    *,
    harness: HarnessDescriptor | Mapping[str, Any],
    prompt: Prompt,
    output: type[T] | None = None,
    **options: Unpack[EngineStepOptions],
) -> AgentResult[Any]:
    """:func:`jigs.steps.run_agent` with ``run`` filled from the activity
    (:func:`run_metadata`) unless given (:class:`~jigs.steps.EngineStepOptions`). Every attempt
    of the activity gets the same arguments from Temporal, so a retry resumes the step's input
    ref, never a session a failed attempt made."""
    from jigs.steps import run_agent as _run_agent

    if output is None:
        return await _run_agent(harness=harness, prompt=prompt, **_filled(options))
    return await _run_agent(harness=harness, prompt=prompt, output=output, **_filled(options))


def create_agent_runner(
    harness: HarnessDescriptor | Mapping[str, Any], **options: Unpack[EngineStepOptions]
) -> AgentRunnerOpening:
    """:func:`jigs.steps.create_agent_runner` with ``run`` filled from the activity
    (:func:`run_metadata`) unless given (:class:`~jigs.steps.EngineStepOptions`)."""
    from jigs.steps import create_agent_runner as _create

    return _create(harness, **_filled(options))
