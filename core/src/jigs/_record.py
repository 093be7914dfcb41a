"""Frozen, validated records: the data a step builds (descriptors, MCP servers, run metadata,
session references, events, usage, the model protocol's requests and results).

A record is a :class:`msgspec.Struct` (frozen, keyword-only, unknown keys refused) whose
construction validates. ``Record(**data)`` and :meth:`Record.from_data` check every field's type
and constraints (``Annotated[T, msgspec.Meta(...)]``), then run ``__post_init__``, where a record
checks what a type cannot say and raises ``ValueError`` (or :class:`~jigs._secrets.SecretRuleError`)
with a message that names the key and never the value.

Why msgspec and not pydantic: a step may run in a fresh process, and what it takes in is built
before its CLI starts. Importing msgspec and defining every record costs a few milliseconds;
importing pydantic and building one model costs more than the whole import budget of a step
(``benchmarks/bench_core.py``). Only a user's ``output=`` model is a pydantic model.

Failure modes: a bad record raises the class's :meth:`Record._invalid` error
(:class:`~jigs.errors.DescriptorError` unless the class says otherwise) with one line per problem,
naming the key, never an input value (a key shaped like a secret is not shown either), raised
outside the ``except`` block so msgspec's error is not kept as ``__context__``. Positional
arguments are a ``TypeError``, as for any keyword-only call.

Pydantic interop: a record is a valid field type of a pydantic model, so it travels through
Temporal's pydantic data converter and appears in users' models (validated with
:meth:`~Record.from_data`, serialised with :meth:`~Record.to_data`).
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, cast, dataclass_transform

import msgspec
from msgspec import inspect
from pydantic_core import SchemaSerializer, core_schema

from jigs._secrets import looks_like_secret
from jigs.errors import DescriptorError

if TYPE_CHECKING:
    from jigs.errors import JigsError

__all__ = ["Record", "RecordMeta", "record_error_message"]

_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<loc>[^`]*)`)?$", re.DOTALL)
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<key>.*)`$", re.DOTALL)
_KEY_CHARS = re.compile(r"^[A-Za-z0-9_.\-]{1,80}$")


def _shown_key(key: str) -> str:
    return key if _KEY_CHARS.fullmatch(key) and not looks_like_secret(key) else "<key not shown>"


def record_error_message(
    exc: msgspec.ValidationError,
    what: str,
    record: type | None = None,
    data: Any = None,
) -> str:
    """One line for msgspec's error: where (``mcp_servers['gh'].probe.tool``) and what is wrong,
    never the refused value. ``what`` names the record for an unknown key ("a claude
    descriptor"). With the ``record`` type and the ``data`` it refused, a ``[...]`` (msgspec
    hides mapping keys) names the entry that failed, and an unknown key is answered with the
    valid keys there (the nearest first, as "did you mean")."""
    match = _AT.match(str(exc))
    msg, loc = (match["msg"], (match["loc"] or "").lstrip(".")) if match else (str(exc), "")
    where: Any = None
    if record is not None:
        try:
            loc, where = _locate(loc, record, data)
        except Exception:  # a better message is optional: never hide the real one
            where = None
    unknown = _UNKNOWN.match(msg)
    if unknown is not None:
        key = _shown_key(unknown["key"])
        line = f"{loc + '.' if loc else ''}{key}: unknown key for {what}"
        return line + _valid_keys(unknown["key"], where)
    if msg.startswith("Invalid enum value"):
        msg = "not one of the allowed values (the value is not shown)"
    return f"{loc}: {msg}" if loc else msg


_STEP = re.compile(r"([^.\[]+)|\[(\.\.\.|\d+)\]")


def _locate(loc: str, record: type, data: Any) -> tuple[str, Any]:
    """``loc`` with each ``[...]`` replaced by the key of the entry that fails to convert, and
    the struct type the location's last step is in (None if not a struct)."""
    info: Any = inspect.type_info(record)
    out = ""
    for step in _STEP.finditer(loc):
        name, index = step.group(1), step.group(2)
        info = _struct_of(info, data)
        if name is not None:
            field = next(f for f in info.fields if f.encode_name == name)
            info, data = field.type, data.get(name) if isinstance(data, Mapping) else None
            out += ("." if out else "") + name
        elif index == "...":
            info = info.value_type
            key, data = _failing_entry(data, info)
            shown = _shown_key(key) if key is not None else "..."
            out += f"[{shown!r}]" if shown == key else f"[{shown}]"
        else:
            info = info.item_type
            data = data[int(index)] if isinstance(data, list) else None
            out += f"[{index}]"
    return out, _struct_of(info, data)


def _struct_of(info: Any, data: Any) -> Any:
    """The struct behind a type: the one struct of an optional, or the member of a tagged union
    that ``data``'s tag picks; else the type itself."""
    if isinstance(info, inspect.UnionType):
        structs = [t for t in info.types if isinstance(t, inspect.StructType)]
        if len(structs) == 1:
            return structs[0]
        tagged = [
            t
            for t in structs
            if isinstance(data, Mapping) and t.tag_field and data.get(t.tag_field) == t.tag
        ]
        return tagged[0] if len(tagged) == 1 else info
    return info


def _failing_entry(data: Any, info: Any) -> tuple[str | None, Any]:
    """The first key of mapping ``data`` whose value does not convert to ``info``'s type."""
    if not isinstance(data, Mapping):
        return None, None
    members: tuple[Any, ...] = info.types if isinstance(info, inspect.UnionType) else (info,)
    target: Any = functools.reduce(lambda a, b: a | b, [m.cls for m in members])
    for key, value in data.items():
        try:
            msgspec.convert(value, target)
        except msgspec.ValidationError:
            return str(key), value
    return None, None


def _valid_keys(refused: str, where: Any) -> str:
    """ " (did you mean 'model'? valid keys: ...)" for an unknown key in a struct, else ""."""
    if not isinstance(where, inspect.StructType):
        return ""
    keys = sorted(f.encode_name for f in where.fields)
    near = difflib.get_close_matches(refused, keys, n=1)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return f" ({hint}valid keys: {', '.join(keys)})"


class _PydanticSerializer:
    """``Record.__pydantic_serializer__``: what ``pydantic_core.to_json(record)`` (Temporal's
    pydantic converter) serialises a record with, built on first use (pydantic stays unimported
    until then): the record's :meth:`Record.to_data`."""

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        return _serializer()


def _to_data(record: Record) -> dict[str, Any]:
    return record.to_data()


@functools.cache
def _serializer() -> Any:
    return SchemaSerializer(
        core_schema.any_schema(
            serialization=core_schema.plain_serializer_function_ser_schema(_to_data)
        )
    )


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(msgspec.field,))
class RecordMeta(msgspec.StructMeta):
    """Makes ``Record(**data)`` validate, as :meth:`Record.from_data` does, and every record
    class keyword-only (msgspec applies ``kw_only`` per class body, so a subclass would
    otherwise have to repeat it)."""

    def __new__(
        mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **options: Any
    ) -> RecordMeta:
        options.setdefault("kw_only", True)
        return super().__new__(mcls, name, bases, namespace, **options)

    def __call__(cls, /, *args: Any, **data: Any) -> Any:
        if args:
            raise TypeError(f"{cls.__name__} takes keyword arguments only")
        return cast("type[Record]", cls).from_data(data)


class Record(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    metaclass=RecordMeta,
):
    """Base of jigs' input records (see the module docstring for the contract)."""

    # unannotated: a class attribute, not a field (msgspec reads annotations only)
    __pydantic_serializer__ = _PydanticSerializer()

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
    def from_data(cls, data: Mapping[str, Any]) -> Self:
        """Validate plain data (as :meth:`to_data` or JSON gives it) into this record."""
        if not isinstance(data, Mapping):
            raise cls._invalid(f"expected a mapping of keys to values, got {type(data).__name__}")
        prepared = cls._prepare(dict(data))
        message = None
        try:
            return msgspec.convert(prepared, cls)
        except msgspec.ValidationError as exc:
            message = record_error_message(exc, cls._what(), cls, prepared)
        raise cls._invalid(message)

    def to_data(self) -> dict[str, Any]:
        """Plain JSON-ready data (``from_data`` rebuilds the record from it)."""
        return cast("dict[str, Any]", msgspec.to_builtins(self))

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied, validated like a new record."""
        return type(self).from_data(msgspec.to_builtins(self) | changes)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        def validate(value: Any) -> Any:
            return value if isinstance(value, cls) else cls.from_data(value)

        return core_schema.no_info_plain_validator_function(
            validate, serialization=core_schema.plain_serializer_function_ser_schema(_to_data)
        )
