"""Random identifiers shaped like the real APIs' (``msg_…``, ``toolu_…``, ``call_…``)."""

from __future__ import annotations

import secrets

__all__ = ["new_id"]


def new_id(prefix: str, nbytes: int = 12) -> str:
    """``prefix`` followed by ``2 * nbytes`` random hex digits, unique in practice."""
    return prefix + secrets.token_hex(nbytes)
