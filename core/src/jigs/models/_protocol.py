"""The ``LanguageModel`` protocol a harness kind with a model implements."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from jigs.models._types import FinishPart, GenerateResult, ModelRequest, StreamPart

__all__ = ["LanguageModel", "StreamingModel"]


@runtime_checkable
class LanguageModel(Protocol):
    """A model object in the spirit of the AI SDK's ``LanguageModel``.

    ``generate`` runs one whole call; ``stream`` yields parts as they happen and ends with a
    :class:`FinishPart`. Both raise :class:`jigs.errors.JigsError` subclasses on failure.
    """

    @property
    def provider(self) -> str: ...

    @property
    def model_id(self) -> str: ...

    async def generate(self, request: ModelRequest) -> GenerateResult: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]: ...


class StreamingModel:
    """A base for models that implement ``stream`` only: ``generate`` drains the stream."""

    provider: str = "unknown"
    model_id: str = "unknown"

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        raise NotImplementedError

    async def generate(self, request: ModelRequest) -> GenerateResult:
        result: GenerateResult | None = None
        async for part in self.stream(request):
            if isinstance(part, FinishPart):
                result = part.result
        if result is None:
            raise RuntimeError(f"{type(self).__name__}.stream ended without a finish part")
        return result
