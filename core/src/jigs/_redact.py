"""Keeping secret values out of error messages (the rules live in :mod:`jigs._secrets`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from jigs._secrets import (
    SECRET_NAME,
    current_secrets,
    looks_like_secret,
    proxy_passwords,
    redact,
    redact_known,
)

__all__ = ["SECRET_NAME", "redact", "redact_known", "secret_values"]

_MIN_LENGTH = 4


def secret_values(env: Mapping[str, str], extra: Iterable[str] = ()) -> list[str]:
    """The secret values of ``env``, whatever the names: values whose name or shape is secret,
    values the step registered as secrets (:mod:`jigs._secrets`), proxy passwords, plus
    ``extra``. Longest first."""
    known = current_secrets()
    values: list[str] = []
    for name, value in env.items():
        if name.upper().endswith("_PROXY"):
            values.extend(proxy_passwords(value))
        elif SECRET_NAME.search(name) or looks_like_secret(value) or value in known:
            values.append(value)
    values.extend(extra)
    return sorted({v for v in values if len(v) >= _MIN_LENGTH}, key=len, reverse=True)
