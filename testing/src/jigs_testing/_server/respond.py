"""Sending a rendered reply: plain JSON, an SSE stream flushed per event, or a cut-off one.

Each response ends with one log line for the request (never a header value).
"""

from __future__ import annotations

from typing import Any

from .http import ClientGone, HttpConnection
from .ids import new_id
from .logline import logger, request_line
from .record import RecordedRequest
from .render import EventStream, JsonBody, Rendered
from .sse import dumps

__all__ = ["send_json", "send_rendered"]

_JSON = ("content-type", "application/json")
_SSE = ("content-type", "text/event-stream; charset=utf-8")


def _headers(content: tuple[str, str]) -> list[tuple[str, str]]:
    request_id = new_id("req_")
    return [content, ("request-id", request_id), ("x-request-id", request_id)]


async def send_json(
    conn: HttpConnection, recorded: RecordedRequest, status: int, payload: Any
) -> None:
    """A complete JSON response."""
    await conn.send_response(status, _headers(_JSON), dumps(payload).encode())
    logger.info("%s", request_line(recorded, str(status)))


async def send_rendered(
    conn: HttpConnection,
    recorded: RecordedRequest,
    rendered: Rendered,
    *,
    kind: str,
    cut_after: int | None,
) -> None:
    """Send a renderer's output; ``cut_after`` cuts it off (see ``Reply.cut_after``).

    Raises :class:`ClientGone` if the client disconnects on the way.
    """
    if isinstance(rendered, EventStream):
        await _stream(conn, recorded, rendered, kind, cut_after)
        return
    assert isinstance(rendered, JsonBody)
    body = dumps(rendered.payload).encode()
    if cut_after is None:
        await conn.send_response(rendered.status, _headers(_JSON), body)
        outcome = str(rendered.status)
    else:
        half = len(body) // 2
        await conn.send_partial_response(rendered.status, _headers(_JSON), body, half)
        outcome = f"{rendered.status} cut after {half} of {len(body)} bytes"
    logger.info("%s", request_line(recorded, f"{outcome} ({kind})"))


async def _stream(
    conn: HttpConnection,
    recorded: RecordedRequest,
    rendered: EventStream,
    kind: str,
    cut_after: int | None,
) -> None:
    events = rendered.events
    count = len(events) if cut_after is None else min(cut_after, len(events) - 1)
    sent = 0
    try:
        await conn.start_stream(200, [*_headers(_SSE), ("cache-control", "no-cache")])
        for event in events[:count]:
            await conn.send_data(event.encode())
            sent += 1
    except ClientGone:
        outcome = f"200 stream, client gone after {sent} of {len(events)} events"
        logger.info("%s", request_line(recorded, f"{outcome} ({kind})"))
        raise
    if cut_after is None:
        await conn.end_stream()
        outcome = f"200 stream of {count} events"
    else:
        await conn.close()
        outcome = f"200 stream cut after {count} of {len(events)} events"
    logger.info("%s", request_line(recorded, f"{outcome} ({kind})"))
