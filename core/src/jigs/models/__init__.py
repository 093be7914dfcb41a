"""The model protocol: what ``runner.model`` is, and the functions that call it.

Names resolve on first use: ``import jigs.models`` does not import pydantic (a step may run in a
fresh process)."""

from __future__ import annotations

from jigs._lazy import lazy_exports

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: keep this import cheap
if TYPE_CHECKING:
    from jigs._usage import Usage
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
#: Each public name and the module it lives in.
_EXPORTS = {
    name: "jigs.models._functions"
    if name in _FUNCTIONS
    else "jigs.models._protocol"
    if name in _PROTOCOL
    else "jigs._usage"
    if name == "Usage"
    else "jigs.models._types"
    for name in __all__
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
