"""OpenAI Chat Completions: chunks, tool_calls deltas, usage chunk, [DONE], plain JSON."""

from __future__ import annotations

import json

import httpx
import pytest
from jigs_testing import ModelServer, error, text, tool_call, tool_calls

from ._sse import chat_body, post_stream

pytestmark = pytest.mark.anyio

LONG = "Chat completions stream their content in many small chunks. " * 2


async def _chunks(reply, **body):
    async with ModelServer([reply]) as server, httpx.AsyncClient(base_url=server.url) as c:
        _, events = await post_stream(c, "/v1/chat/completions", chat_body(**body))
    assert all(event.name is None for event in events), "chat streams have no event names"
    assert events[-1].data == "[DONE]"
    chunks = [event.json() for event in events[:-1]]
    assert len({chunk["id"] for chunk in chunks}) == 1
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    assert all(chunk["id"].startswith("chatcmpl-") for chunk in chunks)
    return chunks


async def test_text_stream_with_usage():
    chunks = await _chunks(text(LONG), stream_options={"include_usage": True})
    *choices, usage_chunk = chunks
    first = choices[0]["choices"][0]
    assert first["index"] == 0
    assert first["delta"]["role"] == "assistant"
    assert first["finish_reason"] is None
    contents = [c["choices"][0]["delta"].get("content") for c in choices[1:-1]]
    assert len(contents) > 1
    assert "".join(contents) == LONG
    last = choices[-1]["choices"][0]
    assert last["delta"] == {}
    assert last["finish_reason"] == "stop"
    assert all(c["usage"] is None for c in choices), "include_usage puts usage: null on chunks"
    assert usage_chunk["choices"] == []
    usage = usage_chunk["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["prompt_tokens"] > 0
    assert usage["completion_tokens"] > 0
    assert all(c["model"] == "chat-test" for c in chunks)


async def test_no_usage_chunk_unless_asked():
    chunks = await _chunks(text("hi"))
    assert all("usage" not in c for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


async def test_tool_call_deltas():
    args = {"command": "echo tool-ran; echo and some more text to split"}
    chunks = await _chunks(tool_call("bash", args), stream_options={"include_usage": True})
    choices = [c["choices"][0] for c in chunks if c["choices"]]
    assert choices[0]["delta"] == {"role": "assistant", "content": None, "refusal": None}
    calls = [c["delta"]["tool_calls"] for c in choices if "tool_calls" in c["delta"]]
    assert all(len(group) == 1 for group in calls)
    opening = calls[0][0]
    assert opening["index"] == 0
    assert opening["id"].startswith("call_")
    assert opening["type"] == "function"
    assert opening["function"] == {"name": "bash", "arguments": ""}
    rest = [group[0] for group in calls[1:]]
    assert len(rest) > 1
    assert all(set(d) == {"index", "function"} and d["index"] == 0 for d in rest)
    assert json.loads("".join(d["function"]["arguments"] for d in rest)) == args
    assert choices[-1]["finish_reason"] == "tool_calls"


async def test_parallel_tool_calls_have_their_own_index():
    chunks = await _chunks(tool_calls([("read", {"path": "a"}), ("mcp__s__t", {})], text="two"))
    openings = [
        c["choices"][0]["delta"]["tool_calls"][0]
        for c in chunks
        if "tool_calls" in c["choices"][0]["delta"]
        and "id" in c["choices"][0]["delta"]["tool_calls"][0]
    ]
    assert [(o["index"], o["function"]["name"]) for o in openings] == [
        (0, "read"),
        (1, "mcp__s__t"),
    ]
    assert chunks[0]["choices"][0]["delta"]["content"] == ""


async def test_plain_json_completion():
    async with (
        ModelServer([text("plain"), tool_call("bash", {"command": "ls"})]) as server,
        httpx.AsyncClient(base_url=server.url) as c,
    ):
        first = await c.post("/v1/chat/completions", json=chat_body())
        second = await c.post("/v1/chat/completions", json=chat_body(stream=False))
    body = first.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["role"] == "assistant"
    assert body["choices"][0]["message"]["content"] == "plain"
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["total_tokens"] > 0
    message = second.json()["choices"][0]["message"]
    assert message["content"] is None
    (call,) = message["tool_calls"]
    assert call["type"] == "function"
    assert call["function"]["name"] == "bash"
    assert json.loads(call["function"]["arguments"]) == {"command": "ls"}
    assert second.json()["choices"][0]["finish_reason"] == "tool_calls"


async def test_error_reply_and_in_stream_error():
    script = [error(503, "unavailable"), error(500, "mid-stream", in_stream=True)]
    async with ModelServer(script) as server, httpx.AsyncClient(base_url=server.url) as c:
        plain = await c.post("/v1/chat/completions", json=chat_body(stream=True))
        _, events = await post_stream(c, "/v1/chat/completions", chat_body())
    assert plain.status_code == 503
    assert plain.json()["error"]["message"] == "unavailable"
    assert plain.json()["error"]["type"] == "server_error"
    assert len(events) == 2
    assert events[0].json()["choices"][0]["delta"]["role"] == "assistant"
    assert events[1].json()["error"]["message"] == "mid-stream"
    assert all(event.data != "[DONE]" for event in events)
