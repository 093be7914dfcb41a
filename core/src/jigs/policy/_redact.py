"""Keeping secret values out of error messages and relayed bodies (the rules live in
:mod:`jigs.policy._secrets`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from jigs.policy._secrets import (
    REDACTED,
    SECRET_NAME,
    current_secrets,
    looks_like_secret,
    proxy_passwords,
    redact,
    redact_known,
)

__all__ = [
    "SECRET_NAME",
    "StreamRedactor",
    "redact",
    "redact_bytes",
    "redact_known",
    "secret_values",
]

_MIN_LENGTH = 4


def secret_values(env: Mapping[str, str], extra: Iterable[str] = ()) -> list[str]:
    """The secret values of ``env``, whatever the names: values whose name or shape is secret,
    values the step registered as secrets (:mod:`jigs.policy._secrets`), proxy passwords, plus
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


def _mask(length: int) -> bytes:
    """What replaces a secret of ``length`` bytes in a relayed body: :data:`REDACTED` cut or
    padded to the same length, so a ``Content-Length`` the upstream sent stays true."""
    return (REDACTED.encode("ascii") + b"*" * length)[:length]


def redact_bytes(data: bytes, secrets: Sequence[bytes]) -> bytes:
    """``data`` with every occurrence of ``secrets`` masked, longest first, length kept."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret in data:
            data = data.replace(secret, _mask(len(secret)))
    return data


class StreamRedactor:
    """Masks secret byte strings in a body relayed chunk by chunk, a secret that straddles
    chunks included, without delaying what cannot be one.

    :meth:`feed` returns what may be sent now: the chunk (with what was held back before it),
    every whole secret masked, minus the longest tail that is the start of a secret (held until
    the next chunk shows whether it is one). A chunk that ends like no secret starts (an SSE
    event's blank line, a JSON brace) is sent whole at once. :meth:`flush` returns what is held
    at the end of the body. Secrets are masked to their own length (:func:`redact_bytes`).
    """

    def __init__(self, secrets: Iterable[bytes]) -> None:
        self._secrets = sorted({s for s in secrets if len(s) >= _MIN_LENGTH}, key=len, reverse=True)
        self._longest = len(self._secrets[0]) if self._secrets else 0
        #: the secrets by their first byte: only a tail starting with one can start a secret
        self._by_first: dict[bytes, list[bytes]] = {}
        for secret in self._secrets:
            self._by_first.setdefault(secret[:1], []).append(secret)
        self._held = b""

    def feed(self, chunk: bytes) -> bytes:
        data = redact_bytes(self._held + chunk, self._secrets) if self._secrets else chunk
        keep = self._partial_tail(data)
        self._held = data[len(data) - keep :] if keep else b""
        return data[: len(data) - keep] if keep else data

    def flush(self) -> bytes:
        """What was held back (a secret's start that the body ended on: not a secret)."""
        held, self._held = self._held, b""
        return held

    def _partial_tail(self, data: bytes) -> int:
        """The length of the longest tail of ``data`` that is a proper prefix of a secret.

        Only the last ``longest - 1`` bytes can be one, and only from a byte some secret starts
        with (found with ``bytes.find``): a few checks per chunk, not one per tail length (that
        cost ~100 us an SSE event)."""
        start = max(0, len(data) - self._longest + 1)
        best = 0
        for first, secrets in self._by_first.items():
            at = data.find(first, start)
            while at >= 0 and len(data) - at > best:
                tail = data[at:]
                if any(len(s) > len(tail) and s.startswith(tail) for s in secrets):
                    best = len(tail)  # the earliest start is the longest tail
                    break
                at = data.find(first, at + 1)
        return best
