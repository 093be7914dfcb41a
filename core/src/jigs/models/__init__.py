"""The model protocol: what ``runner.model`` is, and the functions that call it.

Names resolve on first use: ``import jigs.models`` does not import pydantic (a step may run in a
fresh process)."""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: keep this import cheap
if TYPE_CHECKING:
    from typing import Any

    from jigs.models._functions import (
        ObjectResult,
        TextStream,
        generate_object,
        generate_text,
        parse_output,
        stream_text,
    )
    from jigs.models._protocol import LanguageModel, StreamingModel
    from jigs.models._types import (
        CallWarning,
        FinishPart,
        FinishReason,
        GenerateResult,
        ModelRequest,
        StreamPart,
        TextDeltaPart,
        ToolCall,
        ToolCallPart,
        ToolResult,
        ToolResultPart,
        Usage,
    )

__all__ = [
    "CallWarning",
    "FinishPart",
    "FinishReason",
    "GenerateResult",
    "LanguageModel",
    "ModelRequest",
    "ObjectResult",
    "StreamPart",
    "StreamingModel",
    "TextDeltaPart",
    "TextStream",
    "ToolCall",
    "ToolCallPart",
    "ToolResult",
    "ToolResultPart",
    "Usage",
    "generate_object",
    "generate_text",
    "parse_output",
    "stream_text",
]

_FUNCTIONS = {"ObjectResult", "TextStream", "generate_object", "generate_text"}
_FUNCTIONS |= {"parse_output", "stream_text"}
_PROTOCOL = {"LanguageModel", "StreamingModel"}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'jigs.models' has no attribute {name!r}")
    import importlib

    where = "_functions" if name in _FUNCTIONS else "_protocol" if name in _PROTOCOL else "_types"
    value = getattr(importlib.import_module(f"jigs.models.{where}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
