"""What users call: ``generate_text``, ``stream_text`` and ``generate_object``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import ValidationError

from jigs.errors import StructuredOutputError
from jigs.models._protocol import LanguageModel
from jigs.models._types import (
    FinishPart,
    GenerateResult,
    ModelRequest,
    Prompt,
    StreamPart,
    TextDeltaPart,
)

__all__ = ["ObjectResult", "TextStream", "generate_object", "generate_text", "stream_text"]

if TYPE_CHECKING:
    from pydantic import BaseModel

T = TypeVar("T", bound="BaseModel")


def _request(
    prompt: Prompt,
    *,
    system: str | None,
    temperature: float | None,
    top_p: float | None,
    top_k: int | None,
    max_output_tokens: int | None,
    stop_sequences: Sequence[str] | None,
    seed: int | None,
    output_schema: dict[str, Any] | None,
    provider_options: dict[str, dict[str, Any]] | None,
) -> ModelRequest:
    return ModelRequest(
        # a list of parts becomes the request's tuple (Image parts stay records)
        prompt=prompt if isinstance(prompt, str) else tuple(prompt),
        system=system,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        max_output_tokens=max_output_tokens,
        stop_sequences=tuple(stop_sequences) if stop_sequences is not None else None,
        seed=seed,
        output_schema=output_schema,
        provider_options=provider_options or {},
    )


async def generate_text(
    model: LanguageModel,
    *,
    prompt: Prompt,
    system: str | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    top_k: int | None = None,
    max_output_tokens: int | None = None,
    stop_sequences: Sequence[str] | None = None,
    seed: int | None = None,
    provider_options: dict[str, dict[str, Any]] | None = None,
) -> GenerateResult:
    """Run one call to completion. Settings the harness cannot honour come back in
    ``result.warnings``; failures raise :class:`jigs.errors.JigsError` subclasses."""
    return await model.generate(
        _request(
            prompt,
            system=system,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            max_output_tokens=max_output_tokens,
            stop_sequences=stop_sequences,
            seed=seed,
            output_schema=None,
            provider_options=provider_options,
        )
    )


class TextStream:
    """The parts of a streamed call. Iterate it once; afterwards ``result`` holds the outcome."""

    def __init__(self, parts: AsyncIterator[StreamPart]) -> None:
        self._parts = parts
        self.result: GenerateResult | None = None

    def __aiter__(self) -> AsyncIterator[StreamPart]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[StreamPart]:
        async for part in self._parts:
            if isinstance(part, FinishPart):
                self.result = part.result
            yield part

    async def text_stream(self) -> AsyncIterator[str]:
        """Only the text deltas."""
        async for part in self:
            if isinstance(part, TextDeltaPart):
                yield part.text


def stream_text(
    model: LanguageModel,
    *,
    prompt: Prompt,
    system: str | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    top_k: int | None = None,
    max_output_tokens: int | None = None,
    stop_sequences: Sequence[str] | None = None,
    seed: int | None = None,
    provider_options: dict[str, dict[str, Any]] | None = None,
) -> TextStream:
    """Stream one call: text deltas and tool calls as they happen, then a finish part."""
    return TextStream(
        model.stream(
            _request(
                prompt,
                system=system,
                temperature=temperature,
                top_p=top_p,
                top_k=top_k,
                max_output_tokens=max_output_tokens,
                stop_sequences=stop_sequences,
                seed=seed,
                output_schema=None,
                provider_options=provider_options,
            )
        )
    )


@dataclass(frozen=True, slots=True)
class ObjectResult(Generic[T]):
    """A validated structured answer and the call's full result."""

    object: T
    result: GenerateResult


def parse_output(schema: type[T], result: GenerateResult) -> T:
    """Validate a structured answer: ``result.output`` when the harness gave one, else the
    text parsed as JSON. Raises :class:`StructuredOutputError` naming what did not fit."""
    raw: Any = result.output
    if raw is None:
        text = result.text.strip()
        if text.startswith("```"):
            text = text.strip("`").removeprefix("json").strip()
        try:
            raw = json.loads(text)
        except ValueError:
            raise StructuredOutputError(
                f"the agent's answer is not JSON for {schema.__name__}: {result.text[:200]!r}",
                raw=result.text,
            ) from None

    try:
        return schema.model_validate(raw)
    except ValidationError as exc:
        raise StructuredOutputError(
            f"the agent's answer does not match {schema.__name__}: {exc}", raw=json.dumps(raw)
        ) from None


async def generate_object(
    model: LanguageModel,
    *,
    schema: type[T],
    prompt: Prompt,
    system: str | None = None,
    temperature: float | None = None,
    max_output_tokens: int | None = None,
    provider_options: dict[str, dict[str, Any]] | None = None,
) -> ObjectResult[T]:
    """Ask for an answer matching ``schema`` (a pydantic model) through the harness's own
    JSON-schema output, and validate it."""
    result = await model.generate(
        _request(
            prompt,
            system=system,
            temperature=temperature,
            top_p=None,
            top_k=None,
            max_output_tokens=max_output_tokens,
            stop_sequences=None,
            seed=None,
            output_schema=schema.model_json_schema(),
            provider_options=provider_options,
        )
    )
    return ObjectResult(parse_output(schema, result), result)
