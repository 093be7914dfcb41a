"""``GET /v1/models`` bodies.

The list is the OpenAI shape (``{"object": "list", "data": [{"id", "object": "model", ...}]}``)
with the Anthropic fields merged in (``type``, ``display_name``, ``created_at`` per model;
``has_more``, ``first_id``, ``last_id`` at the top), so either kind of client can read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["model_list", "model_object"]

_CREATED = 1_700_000_000
_CREATED_AT = "2023-11-14T22:13:20Z"


def model_object(model_id: str) -> dict[str, Any]:
    """One model entry."""
    return {
        "id": model_id,
        "object": "model",
        "created": _CREATED,
        "owned_by": "jigs-testing",
        "type": "model",
        "display_name": model_id,
        "created_at": _CREATED_AT,
    }


def model_list(model_ids: Sequence[str]) -> dict[str, Any]:
    """The list body for ``model_ids`` (in order, duplicates dropped)."""
    unique = list(dict.fromkeys(model_ids))
    return {
        "object": "list",
        "data": [model_object(model_id) for model_id in unique],
        "has_more": False,
        "first_id": unique[0] if unique else None,
        "last_id": unique[-1] if unique else None,
    }
