"""A strict little SSE reader for the tests: every event must be well-formed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class Event:
    name: str | None
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


def parse_sse(text: str) -> list[Event]:
    """Events of an SSE body. Fails on anything but ``event:``/``data:`` lines, on an
    event without data, and on a body that does not end with a blank line."""
    assert text.endswith("\n\n"), f"SSE body must end with a blank line: {text[-80:]!r}"
    events = []
    for block in text.split("\n\n"):
        if not block:
            continue
        name = None
        data = None
        for line in block.split("\n"):
            field, sep, value = line.partition(": ")
            assert sep, f"malformed SSE line {line!r}"
            if field == "event":
                assert name is None, f"two event lines in {block!r}"
                name = value
            elif field == "data":
                assert data is None, f"two data lines in {block!r}"
                data = value
            else:
                raise AssertionError(f"unexpected SSE field {field!r}")
        assert data is not None, f"event without data: {block!r}"
        events.append(Event(name, data))
    return events


async def post_stream(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], **kwargs: Any
) -> tuple[httpx.Response, list[Event]]:
    """POST and read a complete SSE response."""
    response = await client.post(path, json={**body, "stream": True}, **kwargs)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return response, parse_sse(response.text)


def anthropic_body(**extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-test",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "hello"}],
        **extra,
    }


def responses_body(**extra: Any) -> dict[str, Any]:
    return {
        "model": "gpt-test",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
        ],
        **extra,
    }


def chat_body(**extra: Any) -> dict[str, Any]:
    return {"model": "chat-test", "messages": [{"role": "user", "content": "hi"}], **extra}
