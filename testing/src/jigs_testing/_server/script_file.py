"""Scripts as JSON or YAML files, for ``jigs model-server --script FILE``.

The file holds a list; each entry is one reply::

    - "plain text reply"
    - {"text": "hi", "delay": 0.5}
    - {"tool_call": {"name": "Bash", "arguments": {"command": "ls"}}, "text": "Let me look."}
    - {"tool_calls": [{"name": "Read", "arguments": {"file_path": "a"}}, {"name": "Read"}]}
    - {"error": {"status": 500, "message": "boom"}, "delay": 1}
    - {"text": "partial", "cut_after": 3, "model": "fake-model"}

A tool call may also carry ``id`` and ``namespace``; an error ``type``, ``code`` and
``in_stream``. Invalid files raise :class:`ScriptError` naming the file and the entry.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .replies import Reply, error, text, tool_calls

__all__ = ["ScriptError", "load_script", "parse_script"]


class ScriptError(ValueError):
    """A script file that cannot be read or does not describe valid replies."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _ToolCallEntry(_Strict):
    name: str = Field(min_length=1)
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None
    namespace: str | None = None


class _ErrorEntry(_Strict):
    status: int = Field(default=500, ge=400, le=599)
    message: str = "error scripted by jigs_testing.ModelServer"
    type: str | None = None
    code: str | None = None
    in_stream: bool = False


class _Entry(_Strict):
    text: str | None = None
    tool_call: _ToolCallEntry | None = None
    tool_calls: list[_ToolCallEntry] | None = Field(default=None, min_length=1)
    error: _ErrorEntry | None = None
    delay: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    cut_after: int | None = Field(default=None, ge=0)
    model: str | None = None

    @model_validator(mode="after")
    def _one_shape(self) -> _Entry:
        calls = self.tool_call is not None or self.tool_calls is not None
        if self.tool_call is not None and self.tool_calls is not None:
            raise ValueError("give either tool_call or tool_calls, not both")
        if self.error is not None and (calls or self.text is not None):
            raise ValueError("an error entry cannot also have text or tool calls")
        if self.error is not None and self.model is not None:
            raise ValueError("an error entry has no model")
        if self.error is None and not calls and self.text is None:
            raise ValueError("an entry needs text, tool_call, tool_calls or error")
        return self

    def to_reply(self) -> Reply:
        if self.error is not None:
            spec = self.error
            return error(
                spec.status,
                spec.message,
                type=spec.type,
                code=spec.code,
                in_stream=spec.in_stream,
                delay=self.delay,
                cut_after=self.cut_after,
            )
        calls = [self.tool_call] if self.tool_call is not None else self.tool_calls
        if calls:
            return tool_calls(
                [call.model_dump() for call in calls],
                text=self.text,
                delay=self.delay,
                cut_after=self.cut_after,
                model=self.model,
            )
        return text(self.text or "", delay=self.delay, cut_after=self.cut_after, model=self.model)


def _describe(errors: ValidationError) -> str:
    parts = []
    for problem in errors.errors(include_url=False):
        where = ".".join(str(part) for part in problem["loc"])
        parts.append(f"{where}: {problem['msg']}" if where else problem["msg"])
    return "; ".join(parts)


def parse_script(data: Any, source: str = "script") -> list[Reply]:
    """Replies from already-parsed JSON/YAML data (a list of entries).

    Raises :class:`ScriptError` naming ``source`` and the 0-based index of a bad entry.
    """
    if not isinstance(data, list):
        raise ScriptError(
            f"{source}: a script must be a list of replies, not {type(data).__name__}"
        )
    replies: list[Reply] = []
    for index, raw in enumerate(data):
        if isinstance(raw, str):
            replies.append(text(raw))
            continue
        if not isinstance(raw, dict):
            raise ScriptError(
                f"{source}: entry #{index} must be a string or a mapping, not {type(raw).__name__}"
            )
        try:
            replies.append(_Entry.model_validate(raw).to_reply())
        except ValidationError as exc:
            raise ScriptError(f"{source}: entry #{index} {_short(raw)}: {_describe(exc)}") from exc
        except (TypeError, ValueError) as exc:
            raise ScriptError(f"{source}: entry #{index} {_short(raw)}: {exc}") from exc
    return replies


def _short(raw: Any) -> str:
    shown = json.dumps(raw, ensure_ascii=False, default=str)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def load_script(path: str | Path) -> list[Reply]:
    """Read a JSON (``.json``) or YAML (``.yaml``/``.yml``) script file into replies.

    YAML needs PyYAML (``pip install 'jigs-core[yaml]'``). Raises :class:`ScriptError` for an
    unreadable file, a syntax error, or an invalid entry (named by its index).
    """
    file = Path(path)
    try:
        content = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScriptError(f"{file}: cannot read the script: {exc}") from exc
    if file.suffix.lower() in (".yaml", ".yml"):
        data = _load_yaml(content, file)
    else:
        try:
            data = json.loads(content)
        except ValueError as exc:
            raise ScriptError(f"{file}: not valid JSON: {exc}") from exc
    return parse_script(data, str(file))


def _load_yaml(content: str, file: Path) -> Any:
    try:
        import yaml
    except ImportError as exc:
        raise ScriptError(
            f"{file}: YAML scripts need PyYAML; install it with `pip install 'jigs-core[yaml]'` "
            "or write the script as JSON"
        ) from exc
    try:
        return yaml.safe_load(content)
    except yaml.YAMLError as exc:
        raise ScriptError(f"{file}: not valid YAML: {exc}") from exc
