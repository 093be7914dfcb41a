"""Anthropic Messages API: streamed and plain replies, count_tokens, errors."""

from __future__ import annotations

import json

import httpx
import pytest
from jigs_testing import ModelServer, error, text, tool_call, tool_calls

from ._sse import anthropic_body, post_stream

pytestmark = pytest.mark.anyio

LONG = "The quick brown fox jumps over the lazy dog. " * 3


def _names(events):
    return [event.name for event in events]


async def test_text_stream_has_the_real_event_sequence():
    async with ModelServer([text(LONG)]) as server, httpx.AsyncClient(base_url=server.url) as c:
        _, events = await post_stream(c, "/v1/messages?beta=true", anthropic_body())
    payloads = [event.json() for event in events]
    for event, payload in zip(events, payloads, strict=True):
        assert payload["type"] == event.name
    names = _names(events)
    deltas = [p for p in payloads if p["type"] == "content_block_delta"]
    assert len(deltas) > 1, "a long text must be streamed in several deltas"
    assert names == [
        "message_start",
        "content_block_start",
        "ping",
        *["content_block_delta"] * len(deltas),
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    message = payloads[0]["message"]
    assert message["id"].startswith("msg_")
    assert message["type"] == "message"
    assert message["role"] == "assistant"
    assert message["model"] == "claude-test"
    assert message["content"] == []
    assert message["stop_reason"] is None
    assert message["stop_sequence"] is None
    assert set(message["usage"]) == {
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    }
    assert payloads[1] == {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    assert all(d["index"] == 0 and d["delta"]["type"] == "text_delta" for d in deltas)
    assert "".join(d["delta"]["text"] for d in deltas) == LONG
    assert payloads[-3] == {"type": "content_block_stop", "index": 0}
    delta = payloads[-2]
    assert delta["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert delta["usage"]["output_tokens"] >= 1
    assert payloads[-1] == {"type": "message_stop"}


async def test_tool_use_stream_streams_input_json():
    args = {"file_path": "notes/x.txt", "content": "y" * 60}
    async with (
        ModelServer([tool_call("Write", args)]) as server,
        httpx.AsyncClient(base_url=server.url) as c,
    ):
        _, events = await post_stream(c, "/v1/messages", anthropic_body())
    payloads = [event.json() for event in events]
    start = payloads[1]
    assert start["type"] == "content_block_start"
    block = start["content_block"]
    assert block["type"] == "tool_use"
    assert block["id"].startswith("toolu_")
    assert block["name"] == "Write"
    assert block["input"] == {}
    assert payloads[2] == {"type": "ping"}
    deltas = [p["delta"] for p in payloads if p["type"] == "content_block_delta"]
    assert len(deltas) > 1
    assert all(d["type"] == "input_json_delta" for d in deltas)
    assert json.loads("".join(d["partial_json"] for d in deltas)) == args
    assert payloads[-2]["delta"]["stop_reason"] == "tool_use"


async def test_text_then_several_tool_calls_get_consecutive_blocks():
    reply = tool_calls(
        [("Read", {"file_path": "a"}), ("Read", {"file_path": "b"})], text="Reading both."
    )
    async with ModelServer([reply]) as server, httpx.AsyncClient(base_url=server.url) as c:
        _, events = await post_stream(c, "/v1/messages", anthropic_body())
    starts = [e.json() for e in events if e.name == "content_block_start"]
    assert [s["index"] for s in starts] == [0, 1, 2]
    assert [s["content_block"]["type"] for s in starts] == ["text", "tool_use", "tool_use"]
    ids = [s["content_block"]["id"] for s in starts[1:]]
    assert len(set(ids)) == 2
    assert _names(events).count("ping") == 1


async def test_explicit_tool_id_and_mcp_name_are_kept_flat():
    reply = tool_call("echo", {"text": "x"}, id="toolu_fixed", namespace="mcp__fake")
    async with ModelServer([reply]) as server, httpx.AsyncClient(base_url=server.url) as c:
        _, events = await post_stream(c, "/v1/messages", anthropic_body())
    block = events[1].json()["content_block"]
    assert block["id"] == "toolu_fixed"
    assert block["name"] == "mcp__fake__echo"


async def test_plain_json_message():
    reply = tool_calls([("Bash", {"command": "ls"})], text="Listing.")
    async with (
        ModelServer([text("hi there"), reply]) as server,
        httpx.AsyncClient(base_url=server.url) as c,
    ):
        first = await c.post("/v1/messages", json=anthropic_body())
        second = await c.post("/v1/messages", json=anthropic_body(stream=False))
    assert first.status_code == 200
    assert first.headers["content-type"] == "application/json"
    body = first.json()
    assert body["type"] == "message"
    assert body["role"] == "assistant"
    assert body["model"] == "claude-test"
    assert body["content"] == [{"type": "text", "text": "hi there"}]
    assert body["stop_reason"] == "end_turn"
    assert body["usage"]["output_tokens"] >= 1
    content = second.json()["content"]
    assert content[0] == {"type": "text", "text": "Listing."}
    assert content[1]["type"] == "tool_use"
    assert content[1]["input"] == {"command": "ls"}
    assert second.json()["stop_reason"] == "tool_use"


async def test_count_tokens_answers_without_using_the_script():
    async with (
        ModelServer([text("kept")]) as server,
        httpx.AsyncClient(base_url=server.url) as c,
    ):
        counted = await c.post("/v1/messages/count_tokens?beta=true", json=anthropic_body())
        reply = await c.post("/v1/messages", json=anthropic_body())
    assert counted.status_code == 200
    assert set(counted.json()) == {"input_tokens"}
    assert counted.json()["input_tokens"] > 0
    assert reply.json()["content"][0]["text"] == "kept"
    assert [r.wire for r in server.requests] == ["count_tokens", "anthropic"]
    assert server.requests[0].reply_index is None
    assert server.requests[1].reply_index == 0


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (500, "api_error"),
        (529, "overloaded_error"),
        (429, "rate_limit_error"),
        (400, "invalid_request_error"),
    ],
)
async def test_error_reply_uses_the_anthropic_error_shape(status, kind):
    async with (
        ModelServer([error(status, "boom")]) as server,
        httpx.AsyncClient(base_url=server.url) as c,
    ):
        response = await c.post("/v1/messages", json=anthropic_body(stream=True))
    assert response.status_code == status
    body = response.json()
    assert body["type"] == "error"
    assert body["error"] == {"type": kind, "message": "boom"}


async def test_error_reply_type_override():
    async with (
        ModelServer([error(400, "too long", type="request_too_large")]) as server,
        httpx.AsyncClient(base_url=server.url) as c,
    ):
        response = await c.post("/v1/messages", json=anthropic_body())
    assert response.json()["error"]["type"] == "request_too_large"


async def test_in_stream_error_event():
    async with (
        ModelServer([error(529, "Overloaded", in_stream=True)]) as server,
        httpx.AsyncClient(base_url=server.url) as c,
    ):
        _, events = await post_stream(c, "/v1/messages", anthropic_body())
    assert _names(events) == ["message_start", "ping", "error"]
    assert events[-1].json() == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }
