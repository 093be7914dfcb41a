"""Frozen, validated records: the data a step builds (descriptors, MCP servers, run metadata,
session references, events, usage, the model protocol's requests and results).

A record is a pydantic v2 model (frozen, keyword-only, unknown keys refused) whose construction
validates. ``Record(**data)``, :meth:`~pydantic.BaseModel.model_validate`,
:meth:`~pydantic.BaseModel.model_validate_json` and :meth:`Record.from_data` check every field's
type and constraints (``Annotated[T, Field(...)]``), then run ``__post_init__``, where a record
checks what a type cannot say and raises ``ValueError`` (or
:class:`~jigs.policy._secrets.SecretRuleError`) with a message that names the key and never the
value. ``model_dump``, ``model_dump_json`` and ``model_json_schema`` are pydantic's own.

Failure modes: a bad record raises the class's :meth:`Record._invalid` error
(:class:`~jigs.errors.DescriptorError` unless the class says otherwise) with one line per problem,
naming the key and what is wrong, never an input value (pydantic's ``input_value=`` is dropped; a
key shaped like a secret is not shown either), raised outside the ``except`` block so pydantic's
:class:`~pydantic.ValidationError` is not kept as ``__context__`` and never escapes. Positional
arguments are a ``TypeError``; setting an attribute is an ``AttributeError``.

Schemas are built on first use (``defer_build``): defining the records costs an import little.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError, model_serializer, model_validator

from jigs.errors import DescriptorError, JigsError
from jigs.policy._secrets import looks_like_secret

if TYPE_CHECKING:
    from pydantic import SerializerFunctionWrapHandler

__all__ = ["OmitDefaults", "Record", "record_error_message"]

_KEY_CHARS = re.compile(r"^[A-Za-z0-9_.\-]{1,80}$")


def _shown_key(key: object) -> str:
    text = str(key)
    return text if _KEY_CHARS.fullmatch(text) and not looks_like_secret(text) else "<key not shown>"


def record_error_message(exc: ValidationError, what: str, record: Any = None) -> str:
    """One line per problem of pydantic's error: where (``mcp_servers['gh'].probe.tool``) and
    what is wrong, never the refused value. ``what`` names the record for an unknown key ("a
    claude descriptor"); with the ``record`` type, an unknown key is answered with the valid keys
    there (the nearest first, as "did you mean")."""
    lines: list[str] = []
    for error in exc.errors(include_url=False, include_input=False):
        loc, where = _locate(error["loc"], record)
        if error["type"] == "extra_forbidden":
            lines.append(f"{loc}: unknown key for {what}{_valid_keys(error['loc'][-1], where)}")
            continue
        message = _message(error)
        line = f"{loc}: {message}" if loc else message
        if line not in lines:
            lines.append(line)
    return "; ".join(lines)


def _message(error: Any) -> str:
    """pydantic's message without anything taken from the input."""
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind in ("value_error", "assertion_error") and isinstance(ctx.get("error"), Exception):
        return str(ctx["error"])
    if kind == "union_tag_invalid":  # pydantic's message repeats the refused tag
        return f"{ctx.get('discriminator')} is not one of {ctx.get('expected_tags')}"
    return str(error["msg"])


def _unwrap(tp: Any) -> Any:
    """The type behind ``Annotated`` and ``Optional``."""
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(members) != 1:
                return tp
            tp = members[0]
        else:
            return tp


def _member(union: Any, label: str) -> Any:
    """The member of ``union`` that pydantic's location step ``label`` names (a tag, a class
    name, or a schema label like ``function-after[check(), NetworkAllow]``), else None."""
    for arg in typing.get_args(union):
        member = _unwrap(arg)
        if isinstance(member, type) and issubclass(member, BaseModel):
            tag = member.model_fields.get("type")
            if label == member.__name__ or re.search(rf"\b{member.__name__}\]$", label):
                return member
            if tag is not None and tag.default == label:
                return member
    return None


def _locate(loc: tuple[int | str, ...], record: Any) -> tuple[str, Any]:
    """``loc`` as ``mcp_servers['gh'].probe.tool`` (union members skipped, keys shaped like a
    secret hidden), and the model its last step is in (None when not known)."""
    out, tp, container = "", _unwrap(record), None
    for step in loc:
        container = tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None
        tp, shown = _step(tp, step)
        out += "." + shown if shown and shown[0] != "[" and out else shown
    return out, container


def _step(tp: Any, step: int | str) -> tuple[Any, str]:
    """The type one location step leads to from ``tp`` (None when not known), and the step as
    shown (``name``, ``['key']``, ``[0]``, or "" for the member of a union)."""
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        field = tp.model_fields.get(str(step))
        return (_unwrap(field.annotation) if field is not None else None), _shown_key(step)
    if origin in (typing.Union, types.UnionType):
        return _unwrap(_member(tp, str(step))), ""
    if isinstance(origin, type) and issubclass(origin, Mapping):
        shown = _shown_key(step)
        return _unwrap(typing.get_args(tp)[1]), f"[{shown!r}]" if shown == str(
            step
        ) else f"[{shown}]"
    args = typing.get_args(tp)
    if isinstance(step, int):
        return (_unwrap(args[0]) if args else None), f"[{step}]"
    return None, _shown_key(step)


def _valid_keys(refused: object, where: Any) -> str:
    """ " (did you mean 'model'? valid keys: ...)" for an unknown key in a model, else ""."""
    if where is None:
        return ""
    keys = sorted(where.model_fields)
    near = difflib.get_close_matches(str(refused), keys, n=1)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return f" ({hint}valid keys: {', '.join(keys)})"


def _cause(exc: ValidationError) -> JigsError | None:
    """A jigs error a validator raised (a policy key's refusal), kept as it is."""
    for error in exc.errors(include_url=False, include_input=False):
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, JigsError):
            return cause
    return None


class Record(BaseModel):
    """Base of jigs' public records (see the module docstring for the contract)."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        defer_build=True,
        hide_input_in_errors=True,
        protected_namespaces=(),
    )

    def __init__(self, /, *args: Any, **data: Any) -> None:
        if args:
            raise TypeError(f"{type(self).__name__} takes keyword arguments only")
        try:
            self.__pydantic_validator__.validate_python(data, self_instance=self)
            return
        except ValidationError as exc:
            error = type(self)._from_validation(exc)
        raise error

    # pydantic calls this __init__ as its own (no second validation pass through it)
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable (use .replace(...))")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    @model_validator(mode="before")
    @classmethod
    def _prepare_data(cls, data: Any) -> Any:
        return cls._prepare(dict(data)) if isinstance(data, Mapping) else data

    @model_validator(mode="after")
    def _post_init(self) -> Self:
        self.__post_init__()
        return self

    def __post_init__(self) -> None:
        """Check what the field types cannot say; raise ``ValueError`` naming the key."""

    @classmethod
    def _invalid(cls, message: str) -> JigsError:
        """The error a bad record raises (override for another class or wording)."""
        return DescriptorError(f"invalid {cls.__name__}: {message}")

    @classmethod
    def _what(cls) -> str:
        """How an unknown-key message names the record."""
        return f"a {cls.__name__}"

    @classmethod
    def _prepare(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Look at (or normalise) raw data before validation; may raise the class's error."""
        return data

    @classmethod
    def _from_validation(cls, exc: ValidationError) -> JigsError:
        return _cause(exc) or cls._invalid(record_error_message(exc, cls._what(), cls))

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        """pydantic's, with a bad input as the class's jigs error (never the value)."""
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as exc:
            error = cls._from_validation(exc)
        raise error

    @classmethod
    def model_validate_json(cls, json_data: Any, *args: Any, **kwargs: Any) -> Self:
        """pydantic's, with a bad input as the class's jigs error (never the value)."""
        try:
            return super().model_validate_json(json_data, *args, **kwargs)
        except ValidationError as exc:
            error = cls._from_validation(exc)
        raise error

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Self:
        """Validate plain data (as :meth:`to_data` or JSON gives it) into this record."""
        if not isinstance(data, Mapping):
            raise cls._invalid(f"expected a mapping of keys to values, got {type(data).__name__}")
        return cls.model_validate(dict(data))

    def to_data(self) -> dict[str, Any]:
        """Plain JSON-ready data (``from_data`` rebuilds the record from it)."""
        return self.model_dump(mode="json")

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied, validated like a new record."""
        return type(self).model_validate(self.model_dump() | changes)


class OmitDefaults(Record):
    """A record whose dump leaves out fields at their defaults (its canonical form), except
    the fields named in ``_always`` (a tag such as ``kind`` or ``type``)."""

    _always: ClassVar[frozenset[str]] = frozenset({"kind", "type"})

    @model_serializer(mode="wrap")
    def _omit_defaults(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if not isinstance(data, dict):
            return data
        fields = type(self).model_fields
        for name in list(data):
            field = fields.get(name)
            if field is None or name in self._always or field.is_required():
                continue
            if getattr(self, name) == field.get_default(call_default_factory=True):
                del data[name]
        return data
