"""The model protocol's data: requests, results, stream parts, usage and warnings."""

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from jigs.engine._usage import Usage
from jigs.errors import InvalidInputError
from jigs.policy._record import Record

if TYPE_CHECKING:
    from jigs.errors import JigsError

__all__ = [
    "CallWarning",
    "FinishPart",
    "FinishReason",
    "GenerateResult",
    "ModelRequest",
    "StreamPart",
    "TextDeltaPart",
    "ToolCall",
    "ToolCallPart",
    "ToolResult",
    "ToolResultPart",
    "Usage",
]

FinishReason = Literal["stop", "length", "tool-calls", "content-filter", "error", "other"]


class _Data(Record):
    """Frozen pydantic models; bad data is an :class:`~jigs.errors.InvalidInputError` naming the
    key, never the value."""

    @classmethod
    def _invalid(cls, message: str) -> "JigsError":
        return InvalidInputError(f"invalid {cls.__name__}: {message}", argument=cls.__name__)


class CallWarning(_Data):
    """A setting the harness could not honour (the call still ran without it)."""

    type: Literal["unsupported-setting", "other"] = "unsupported-setting"
    setting: str | None = None
    message: str


class ToolCall(_Data):
    """A tool the agent called during its turn (the harness ran it)."""

    id: str
    name: str
    arguments: Any = None


class ToolResult(_Data):
    """What a tool the agent called returned."""

    id: str
    name: str
    output: Any = None
    is_error: bool = False


class ModelRequest(_Data):
    """One call: a prompt plus generation settings.

    ``provider_options`` is the one place a step hands a harness functions (a tool-approval
    callback, an event logger), keyed by provider name; it is never persisted.
    """

    prompt: str
    system: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_output_tokens: int | None = None
    stop_sequences: tuple[str, ...] | None = None
    seed: int | None = None
    output_schema: dict[str, Any] | None = None
    provider_options: dict[str, dict[str, Any]] = Field(default_factory=dict)

    def options_for(self, provider: str) -> dict[str, Any]:
        """This provider's options (empty when none were given)."""
        return self.provider_options.get(provider, {})

    def unsupported(self, *settings: str) -> list[CallWarning]:
        """Warnings for each of ``settings`` that the caller set (a harness cannot honour)."""
        return [
            CallWarning(setting=name, message=f"{name} is not supported by this harness; ignored")
            for name in settings
            if getattr(self, name) is not None
        ]


class GenerateResult(_Data):
    """The outcome of one agent turn."""

    text: str
    finish_reason: FinishReason = "stop"
    usage: Usage = Field(default_factory=Usage)
    warnings: tuple[CallWarning, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()
    output: Any = None
    provider_metadata: dict[str, dict[str, Any]] = Field(default_factory=dict)
    model_id: str | None = None


class TextDeltaPart(_Data):
    type: Literal["text-delta"] = "text-delta"
    text: str


class ToolCallPart(_Data):
    type: Literal["tool-call"] = "tool-call"
    call: ToolCall


class ToolResultPart(_Data):
    type: Literal["tool-result"] = "tool-result"
    result: ToolResult


class FinishPart(_Data):
    """Always the last part of a successful stream; carries the whole result."""

    type: Literal["finish"] = "finish"
    result: GenerateResult


#: One part of a stream: a union discriminated on ``type``.
StreamPart = Annotated[
    TextDeltaPart | ToolCallPart | ToolResultPart | FinishPart, Field(discriminator="type")
]
