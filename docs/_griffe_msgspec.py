"""A griffe extension for the API reference: the constructor of every ``msgspec.Struct``.

griffe writes an ``__init__`` for a ``@dataclass`` from its fields; it knows nothing of msgspec,
so a Struct (the plugin contract's data classes, every :class:`jigs._record.Record`: descriptors,
events, run metadata) showed no signature. This does for Structs what griffe's own dataclasses
extension does: one parameter per annotated field, the base classes' fields first, keyword-only
when the class (or a base, as ``Record`` does) says ``kw_only=True``, defaults as written
(``msgspec.field(default_factory=f)`` shown as ``f()``). Class variables are not fields.
"""

from __future__ import annotations

from typing import Any

import griffe

_STRUCT_BASES = frozenset({"msgspec.Struct", "msgspec._core.Struct"})
_KW_ONLY_BASES = frozenset({"jigs._record.Record"})


def _is_struct(cls: griffe.Class) -> bool:
    try:
        chain = [cls, *cls.mro()]
    except ValueError:  # a base griffe cannot resolve
        chain = [cls]
    return any(
        getattr(base, "canonical_path", str(base)) in _STRUCT_BASES
        for parent in chain
        for base in parent.bases
    )


def _keywords(cls: griffe.Class) -> dict[str, str]:
    """The class keywords (``frozen=True, kw_only=True``) as written."""
    return {k: str(v) for k, v in getattr(cls, "keywords", {}).items()}


def _kw_only(cls: griffe.Class) -> bool:
    try:
        chain = [cls, *cls.mro()]
    except ValueError:
        chain = [cls]
    for parent in chain:
        if parent.canonical_path in _KW_ONLY_BASES or _keywords(parent).get("kw_only") == "True":
            return True
    return False


def _default(attribute: griffe.Attribute) -> str | griffe.Expr | None:
    value = attribute.value
    if isinstance(value, griffe.ExprCall) and value.canonical_path in (
        "msgspec.field",
        "msgspec._core.field",
    ):
        for argument in value.arguments:
            name = getattr(argument, "name", None)
            if name == "default_factory":
                return griffe.ExprCall(function=argument.value, arguments=[])
            if name == "default":
                return argument.value  # type: ignore[no-any-return]
        return None
    return value


def _fields(cls: griffe.Class) -> list[griffe.Attribute]:
    """The class's own fields: annotated attributes griffe sees as instance attributes (a
    ``ClassVar`` is labelled a class attribute only)."""
    return [
        member  # type: ignore[misc]
        for member in cls.members.values()
        if not member.is_alias
        and member.is_attribute
        and member.annotation is not None
        and "instance-attribute" in member.labels
        and "property" not in member.labels
    ]


def _set_init(cls: griffe.Class) -> None:
    if "__init__" in cls.members or not _is_struct(cls):
        return
    try:
        chain = [*reversed(cls.mro()), cls]
    except ValueError:
        chain = [cls]
    kw_only = _kw_only(cls)
    by_name: dict[str, griffe.Parameter] = {}
    for parent in chain:
        for attribute in _fields(parent):
            by_name[attribute.name] = griffe.Parameter(
                attribute.name,
                annotation=attribute.annotation,
                kind=griffe.ParameterKind.keyword_only
                if kw_only
                else griffe.ParameterKind.positional_or_keyword,
                default=_default(attribute),
                docstring=attribute.docstring,
            )
    cls.set_member(
        "__init__",
        griffe.Function(
            "__init__",
            lineno=0,
            endlineno=0,
            parent=cls,
            parameters=griffe.Parameters(
                griffe.Parameter(
                    "self", kind=griffe.ParameterKind.positional_or_keyword, default=None
                ),
                *by_name.values(),
            ),
            returns="None",
        ),
    )


def _walk(obj: griffe.Module | griffe.Class, seen: set[str]) -> None:
    if obj.canonical_path in seen:
        return
    seen.add(obj.canonical_path)
    if isinstance(obj, griffe.Class):
        _set_init(obj)
    for member in obj.members.values():
        if not member.is_alias and (member.is_module or member.is_class):
            _walk(member, seen)  # type: ignore[arg-type]


class MsgspecStructs(griffe.Extension):
    """Give every ``msgspec.Struct`` subclass the ``__init__`` msgspec generates."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        _walk(pkg, set())
