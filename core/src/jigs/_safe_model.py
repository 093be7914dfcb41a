"""A pydantic base whose validation errors never carry an input value.

A raw :class:`pydantic.ValidationError` prints every refused input (``input_value='sk-...'``), so
none may escape jigs: :class:`SafeModel` turns it into :class:`~jigs.errors.DescriptorError` with
one line per problem, naming the key (keys that look like secrets are hidden too), and raises it
outside the ``except`` block so the original is not even kept as ``__context__``.
"""

from __future__ import annotations

import re
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError

from jigs._secrets import looks_like_secret
from jigs.errors import DescriptorError

__all__ = ["SafeModel", "safe_validation_message"]

_LOC_CHARS = re.compile(r"^[A-Za-z0-9_.\-\[\](), ]{1,80}$")


def _loc_part(part: object) -> str:
    text = str(part)
    if isinstance(part, int) or (_LOC_CHARS.fullmatch(text) and not looks_like_secret(text)):
        return text
    return "<key not shown>"


def safe_validation_message(exc: ValidationError, kind: str) -> str:
    """One line per problem, naming the key, never an input value."""
    lines = []
    for err in exc.errors(include_url=False, include_input=False, include_context=False):
        loc = ".".join(_loc_part(p) for p in err["loc"]) or "(descriptor)"
        if err["type"] == "extra_forbidden":
            lines.append(f"{loc}: unknown key for a {kind} descriptor")
        else:
            lines.append(f"{loc}: {err['msg']}")
    return "; ".join(lines)


class SafeModel(BaseModel):
    """Frozen, extra-forbidding data whose construction raises :class:`DescriptorError`
    (never a raw ``ValidationError``), whether built directly or through ``model_validate``."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    def __init__(self, /, **data: Any) -> None:
        message = None
        try:
            super().__init__(**data)
        except ValidationError as exc:
            message = safe_validation_message(exc, type(self).__name__)
        if message is not None:
            raise DescriptorError(f"invalid {type(self).__name__}: {message}")

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        message = None
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as exc:
            message = safe_validation_message(exc, cls.__name__)
        raise DescriptorError(f"invalid {cls.__name__}: {message}")
