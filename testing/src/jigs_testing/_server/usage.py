"""Token counts for usage fields: a deterministic estimate, not a tokenizer."""

from __future__ import annotations

__all__ = ["estimate_tokens"]

_CHARS_PER_TOKEN = 4


def estimate_tokens(size: int) -> int:
    """About one token per four characters (or bytes), at least one."""
    return max(1, size // _CHARS_PER_TOKEN)
