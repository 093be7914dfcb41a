"""Keeping secret values out of error messages."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["SECRET_NAME", "redact", "secret_values"]

#: Environment names whose values are treated as secrets.
SECRET_NAME = re.compile(r"TOKEN|SECRET|KEY|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE", re.IGNORECASE)
_MIN_LENGTH = 4


def secret_values(env: Mapping[str, str], extra: Iterable[str] = ()) -> list[str]:
    """The values in ``env`` whose names look secret, plus ``extra`` values."""
    values = [v for k, v in env.items() if SECRET_NAME.search(k)]
    values.extend(extra)
    return sorted({v for v in values if len(v) >= _MIN_LENGTH}, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret value replaced by ``[redacted]`` (longest first)."""
    for value in secrets:
        if len(value) >= _MIN_LENGTH:
            text = text.replace(value, "[redacted]")
    return text
