"""The OpenAI error body, shared by the Responses and Chat Completions renderers."""

from __future__ import annotations

from typing import Any

__all__ = ["openai_error_code", "openai_error_payload", "openai_error_type"]


def openai_error_type(status: int) -> str:
    """The OpenAI error ``type`` for an HTTP status."""
    if status == 429:
        return "requests"
    return "server_error" if status >= 500 else "invalid_request_error"


def openai_error_code(status: int) -> str | None:
    """The default OpenAI error ``code`` for an HTTP status (mostly ``None``)."""
    return {401: "invalid_api_key", 404: "not_found", 429: "rate_limit_exceeded"}.get(status)


def openai_error_payload(
    status: int, message: str, type_: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """``{"error": {"message": ..., "type": ..., "param": null, "code": ...}}``."""
    return {
        "error": {
            "message": message,
            "type": type_ or openai_error_type(status),
            "param": None,
            "code": code if code is not None else openai_error_code(status),
        }
    }
