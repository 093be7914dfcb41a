"""OpenAI Responses API: event order, sequence numbers, function calls, Codex MCP namespaces."""

from __future__ import annotations

import json

import httpx
import pytest
from jigs_testing import ModelServer, error, text, tool_call, tool_calls

from ._sse import post_stream, responses_body

pytestmark = pytest.mark.anyio

LONG = "Streaming several deltas of output text for the Responses API. " * 2


async def _events(reply, **body):
    async with ModelServer([reply]) as server, httpx.AsyncClient(base_url=server.url) as c:
        _, events = await post_stream(c, "/v1/responses", responses_body(**body))
    payloads = [event.json() for event in events]
    for event, payload in zip(events, payloads, strict=True):
        assert event.name == payload["type"], "the SSE event name must repeat the type"
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
    return payloads


async def test_text_stream_event_order_and_fields():
    payloads = await _events(text(LONG))
    types = [p["type"] for p in payloads]
    n = types.count("response.output_text.delta")
    assert n > 1
    assert types == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * n,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    created, in_progress = payloads[0]["response"], payloads[1]["response"]
    completed = payloads[-1]["response"]
    assert created["id"].startswith("resp_")
    assert created["id"] == in_progress["id"] == completed["id"]
    assert created["object"] == "response"
    assert created["status"] == "in_progress"
    assert created["output"] == []
    assert created["model"] == "gpt-test"
    added = payloads[2]
    assert added["output_index"] == 0
    item = added["item"]
    assert item["type"] == "message"
    assert item["role"] == "assistant"
    assert item["status"] == "in_progress"
    assert item["content"] == []
    item_id = item["id"]
    part_added = payloads[3]
    assert part_added["item_id"] == item_id
    assert part_added["content_index"] == 0
    assert part_added["part"]["type"] == "output_text"
    assert part_added["part"]["text"] == ""
    deltas = [p for p in payloads if p["type"] == "response.output_text.delta"]
    assert all(d["item_id"] == item_id and d["output_index"] == 0 for d in deltas)
    assert "".join(d["delta"] for d in deltas) == LONG
    assert payloads[-4]["text"] == LONG
    assert payloads[-3]["part"]["text"] == LONG
    done_item = payloads[-2]["item"]
    assert done_item["status"] == "completed"
    assert done_item["content"] == [
        {"type": "output_text", "annotations": [], "logprobs": [], "text": LONG}
    ]
    assert completed["status"] == "completed"
    assert completed["output"] == [done_item]
    usage = completed["usage"]
    assert set(usage) == {
        "input_tokens",
        "input_tokens_details",
        "output_tokens",
        "output_tokens_details",
        "total_tokens",
    }
    assert usage["input_tokens_details"] == {"cached_tokens": 0}
    assert usage["output_tokens_details"] == {"reasoning_tokens": 0}
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"] > 0


async def test_function_call_stream():
    args = {"cmd": "echo tool-ran && ls -la /tmp/some/long/path"}
    payloads = await _events(tool_call("exec_command", args))
    types = [p["type"] for p in payloads]
    n = types.count("response.function_call_arguments.delta")
    assert n > 1
    assert types == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        *["response.function_call_arguments.delta"] * n,
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    added = payloads[2]["item"]
    assert added["type"] == "function_call"
    assert added["status"] == "in_progress"
    assert added["arguments"] == ""
    assert added["name"] == "exec_command"
    assert added["call_id"].startswith("call_")
    assert added["id"].startswith("fc_")
    assert "namespace" not in added
    deltas = [p for p in payloads if p["type"] == "response.function_call_arguments.delta"]
    assert all(d["item_id"] == added["id"] and d["output_index"] == 0 for d in deltas)
    joined = "".join(d["delta"] for d in deltas)
    assert json.loads(joined) == args
    assert payloads[-3]["arguments"] == joined
    done = payloads[-2]["item"]
    assert done == {**added, "status": "completed", "arguments": joined}
    assert payloads[-1]["response"]["output"] == [done]


async def test_text_and_parallel_calls_get_output_indexes():
    reply = tool_calls([("a", {}), ("b", {"x": 1})], text="Two calls.")
    payloads = await _events(reply)
    added = [p for p in payloads if p["type"] == "response.output_item.added"]
    assert [(p["output_index"], p["item"]["type"]) for p in added] == [
        (0, "message"),
        (1, "function_call"),
        (2, "function_call"),
    ]
    output = payloads[-1]["response"]["output"]
    assert [item.get("name") for item in output] == [None, "a", "b"]
    assert len({item["call_id"] for item in output[1:]}) == 2


@pytest.mark.parametrize(
    "reply",
    [
        tool_call("mcp__fake__echo", {"text": "x"}),
        tool_call("echo", {"text": "x"}, namespace="mcp__fake"),
    ],
)
async def test_mcp_tool_is_sent_with_a_namespace(reply):
    payloads = await _events(reply)
    done = payloads[-2]["item"]
    assert done["namespace"] == "mcp__fake"
    assert done["name"] == "echo"
    assert payloads[-3]["name"] == "echo"


async def test_mcp_namespace_follows_the_tools_the_request_offered():
    namespace_tool = {
        "type": "namespace",
        "name": "mcp__my__srv",
        "tools": [{"type": "function", "name": "do_it"}],
    }
    payloads = await _events(tool_call("mcp__my__srv__do_it"), tools=[namespace_tool])
    done = payloads[-2]["item"]
    assert (done["namespace"], done["name"]) == ("mcp__my__srv", "do_it")

    flat_tool = {"type": "function", "name": "mcp__fake__echo", "parameters": {}}
    payloads = await _events(tool_call("mcp__fake__echo"), tools=[flat_tool])
    done = payloads[-2]["item"]
    assert "namespace" not in done
    assert done["name"] == "mcp__fake__echo"


async def test_response_echoes_request_settings():
    payloads = await _events(
        text("ok"),
        instructions="be brief",
        store=False,
        tools=[{"type": "function", "name": "t"}],
        reasoning={"effort": "low"},
    )
    created = payloads[0]["response"]
    assert created["instructions"] == "be brief"
    assert created["store"] is False
    assert created["tools"] == [{"type": "function", "name": "t"}]
    assert created["reasoning"]["effort"] == "low"


async def test_plain_json_response():
    async with (
        ModelServer([tool_call("f", {"a": 1}, text="calling")]) as server,
        httpx.AsyncClient(base_url=server.url) as c,
    ):
        response = await c.post("/v1/responses", json=responses_body())
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "response"
    assert body["status"] == "completed"
    message, call = body["output"]
    assert message["content"][0]["text"] == "calling"
    assert call["type"] == "function_call"
    assert json.loads(call["arguments"]) == {"a": 1}
    assert body["usage"]["total_tokens"] > 0


async def test_error_reply_uses_the_openai_error_shape():
    script = [error(500, "boom"), error(429, "slow", code="rate_limit_exceeded")]
    async with ModelServer(script) as server, httpx.AsyncClient(base_url=server.url) as c:
        first = await c.post("/v1/responses", json=responses_body(stream=True))
        second = await c.post("/v1/responses", json=responses_body())
    assert first.status_code == 500
    assert first.json() == {
        "error": {"message": "boom", "type": "server_error", "param": None, "code": None}
    }
    assert second.status_code == 429
    assert second.json()["error"]["code"] == "rate_limit_exceeded"


async def test_in_stream_failure_is_response_failed():
    reply = error(500, "context too long", code="context_length_exceeded", in_stream=True)
    payloads = await _events(reply)
    assert [p["type"] for p in payloads] == [
        "response.created",
        "response.in_progress",
        "response.failed",
    ]
    failed = payloads[-1]["response"]
    assert failed["status"] == "failed"
    assert failed["error"] == {"code": "context_length_exceeded", "message": "context too long"}
