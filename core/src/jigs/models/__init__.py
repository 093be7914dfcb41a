"""The model protocol: what ``runner.model`` is, and the functions that call it."""

from __future__ import annotations

from jigs.engine._usage import Usage
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
    Image,
    ImageMediaType,
    ModelRequest,
    Prompt,
    PromptPart,
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
    "Image",
    "ImageMediaType",
    "LanguageModel",
    "ModelRequest",
    "ObjectResult",
    "Prompt",
    "PromptPart",
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
