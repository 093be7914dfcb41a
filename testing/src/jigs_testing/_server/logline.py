"""One-line log records for requests. They name headers never, and mask query values that
look like credentials."""

from __future__ import annotations

import logging
from urllib.parse import parse_qsl

from .record import RecordedRequest

__all__ = ["LOGGER_NAME", "logger", "request_line", "safe_query", "strip_userinfo"]

LOGGER_NAME = "jigs_testing.model_server"
logger = logging.getLogger(LOGGER_NAME)
logger.addHandler(logging.NullHandler())  # a library logs nowhere until the application says

_SECRET_WORDS = ("key", "token", "secret", "auth", "sig", "password", "credential")


def safe_query(query: str) -> str:
    """``query`` with the values of credential-like parameters replaced by ``***``."""
    if not query:
        return ""
    parts = []
    for name, value in parse_qsl(query, keep_blank_values=True):
        masked = any(word in name.lower() for word in _SECRET_WORDS)
        parts.append(f"{name}={'***' if masked else value}")
    return "&".join(parts)


def strip_userinfo(authority: str) -> str:
    """``host:port`` without any ``user:password@`` part."""
    return authority.rpartition("@")[2]


def request_line(recorded: RecordedRequest, outcome: str) -> str:
    """``#3 POST /v1/messages?beta=true anthropic model=m msgs=4 stream reply=#2 -> outcome``."""
    query = safe_query(recorded.query)
    target = f"{recorded.path}?{query}" if query else recorded.path
    parts = [f"#{recorded.index}", recorded.method, target, recorded.wire]
    if recorded.model:
        parts.append(f"model={recorded.model}")
    if recorded.is_model_request:
        parts.append(f"msgs={recorded.message_count}")
        parts.append("stream" if recorded.stream else "json")
        parts.append(
            f"reply=#{recorded.reply_index}" if recorded.reply_index is not None else "reply=none"
        )
    parts.append(f"-> {outcome}")
    return " ".join(parts)
