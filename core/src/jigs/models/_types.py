"""The model protocol's data: requests, results, stream parts, usage and warnings."""

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import ConfigDict, Field

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
    "Image",
    "ImageMediaType",
    "ModelRequest",
    "Prompt",
    "PromptPart",
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


#: The image types every CLI that takes images accepts.
ImageMediaType = Literal["image/png", "image/jpeg", "image/gif", "image/webp"]


class Image(_Data):
    """An image in a prompt: a file (``Image(path)``) or its bytes (``Image(data, media_type)``).

    ``Image("shot.png")``, ``Image(Path("mock.jpg"))`` and ``Image(png_bytes, "image/png")``
    are the short forms (``path=``, ``data=`` and ``media_type=`` the long ones). Without
    ``media_type`` it is read from the image's first bytes when the turn starts. A file is read
    then, not now. Either way the step copies the image into its private dir and hands the
    kind that copy; the step log records its digest, never its bytes.
    """

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    #: The part's tag (text parts are plain strings).
    type: Literal["image"] = "image"
    path: Path | None = None
    data: Annotated[bytes, Field(min_length=1)] | None = None
    media_type: ImageMediaType | None = None

    def __init__(
        self,
        source: str | Path | bytes | None = None,
        media_type: str | None = None,
        /,
        **fields: Any,
    ) -> None:
        if source is not None:
            if isinstance(source, bytes | bytearray):
                fields["data"] = bytes(source)
            else:
                fields["path"] = source
        if media_type is not None:
            fields["media_type"] = media_type
        super().__init__(**fields)

    def __post_init__(self) -> None:
        if (self.path is None) == (self.data is None):
            raise ValueError("an Image is either a path or bytes (data), exactly one of them")

    def __repr__(self) -> str:
        what = (
            f"path={str(self.path)!r}"
            if self.path is not None
            else f"{len(self.data or b'')} bytes"
        )
        return f"Image({what}, media_type={self.media_type!r})"


#: One part of a prompt: text, or an :class:`Image`.
PromptPart: TypeAlias = str | Image
#: What a step's ``prompt`` is: a string, or a list of text and image parts.
Prompt: TypeAlias = str | Sequence[PromptPart]


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

    ``prompt`` is a string or a tuple of text and :class:`Image` parts (for a kind that takes
    images). ``provider_options`` is the one place a step hands a harness functions (a
    tool-approval callback, an event logger), keyed by provider name; it is never persisted.
    """

    prompt: str | tuple[str | Image, ...]
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
