"""``runner.model`` for every kind with a model: the turn engine behind the model protocol.

Each ``generate`` / ``stream`` call is one turn (:class:`jigs.engine._engine.TurnEngine`): the first
continues ``resume`` (or starts a session), every later call continues the latest session. Events
become stream parts (text deltas, tool calls and results) and the call ends with a
:class:`~jigs.models.FinishPart` whose result carries ``provider_metadata[kind]["session_id"]``.

Provider options (``provider_options={kind: {...}}``, never persisted): ``on_event`` (called with
every :mod:`jigs.events` event; may be async) and whatever the kind reads itself (such as Codex's
``effort``); the tool gate is a step option (``approve_tool``), the same for every call. The
runner's own ``provider_options`` and ``on_event`` (given to ``create_agent_runner``) are the
defaults of every call; a call's own win.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from jigs.engine._engine import EventCallback, TurnEngine, TurnRecord, TurnRequest
from jigs.engine._gate import ToolGate, gate_from_options
from jigs.engine._prompt import prompt_parts
from jigs.events import TextDelta, ToolCallFinished, ToolCallStarted
from jigs.models._protocol import StreamingModel
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

__all__ = ["EngineModel", "result_of"]

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop": "stop",
    "completed": "stop",
    "max_tokens": "length",
    "length": "length",
    "refusal": "content-filter",
}
_PER_CALL = (
    "system",
    "temperature",
    "top_p",
    "top_k",
    "max_output_tokens",
    "stop_sequences",
    "seed",
)


def _call(event: ToolCallStarted) -> ToolCall:
    return ToolCall(id=event.id, name=event.name, arguments=event.arguments)


def _result(event: ToolCallFinished) -> ToolResult:
    return ToolResult(id=event.id, name=event.name, output=event.output, is_error=event.is_error)


def result_of(
    kind: str, record: TurnRecord, warnings: list[CallWarning], model_id: str | None
) -> GenerateResult:
    """A finished turn as a :class:`GenerateResult`."""
    notices = [CallWarning(type="other", message=m) for m in record.notices]
    return GenerateResult(
        text=record.text,
        finish_reason=_FINISH.get(str(record.stop_reason), "stop"),
        usage=record.usage,
        warnings=(*warnings, *notices),
        tool_calls=tuple(_call(c) for c in record.tool_calls),
        tool_results=tuple(_result(r) for r in record.tool_results),
        output=record.output,
        provider_metadata=record.provider_metadata(kind),
        model_id=model_id,
    )


class EngineModel(StreamingModel):
    """One kind's agent in one worktree, as a model object."""

    def __init__(
        self,
        engine: TurnEngine,
        provider_options: Mapping[str, Mapping[str, Any]] | None = None,
        on_event: EventCallback | None = None,
        gate: ToolGate | None = None,
    ) -> None:
        self._engine = engine
        self._gate = gate
        # the runner's options: the defaults of every call (see create_agent_runner)
        self._defaults = dict((provider_options or {}).get(engine.harness.kind, {}))
        kind_event = self._defaults.pop("on_event", None)
        self._on_event = on_event or kind_event
        self.provider = engine.harness.kind
        model = engine.target.descriptor.model_id()
        self.model_id = model or f"{self.provider}-default"

    @property
    def session_id(self) -> str | None:
        """The session the next call continues (None: the next call starts one)."""
        return self._engine.session_id

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        return self._stream(request, partial=True)

    async def generate(self, request: ModelRequest) -> GenerateResult:
        result: GenerateResult | None = None
        async for part in self._stream(request, partial=False):
            if isinstance(part, FinishPart):
                result = part.result
        assert result is not None  # _stream ends with a FinishPart or raises
        return result

    async def _stream(self, request: ModelRequest, *, partial: bool) -> AsyncIterator[StreamPart]:
        engine = self._engine
        warnings = engine.warnings_for({name: getattr(request, name) for name in _PER_CALL})
        options = {**self._defaults, **request.options_for(self.provider)}
        gate_from_options(None, None, {self.provider: options}, None)  # a moved approve_tool
        on_event = (
            options.pop("on_event", None)
            or request.options_for("jigs").get("on_event")
            or self._on_event
        )
        record = TurnRecord()
        text, images = prompt_parts(request.prompt)
        turn = TurnRequest(
            prompt=text,
            images=images,
            output_schema=request.output_schema,
            system=request.system,
            max_output_tokens=request.max_output_tokens,
            partial=partial,
            options=options,
            on_event=on_event if callable(on_event) else None,
            gate=self._gate,
        )
        async for event in engine.run(turn, record):
            if isinstance(event, TextDelta):
                yield TextDeltaPart(text=event.text)
            elif isinstance(event, ToolCallStarted):
                yield ToolCallPart(call=_call(event))
            elif isinstance(event, ToolCallFinished):
                yield ToolResultPart(result=_result(event))
        if not partial or record.streamed_text != record.text:
            # the whole text when deltas were not streamed, or the part that was not
            missing = record.text
            if partial and record.text.startswith(record.streamed_text):
                missing = record.text[len(record.streamed_text) :]
            if missing and partial:
                yield TextDeltaPart(text=missing)
        yield FinishPart(result=result_of(self.provider, record, warnings, self.model_id))
