"""The request log: header names only, text search, helpers; secrets never logged."""

from __future__ import annotations

import json
import logging

import httpx
import pytest
from jigs_testing import ModelServer, text

from ._sse import anthropic_body, chat_body, responses_body

pytestmark = pytest.mark.anyio

CANARY = "sk-secret-canary"


async def test_header_names_are_kept_and_values_never(caplog):
    caplog.set_level(logging.DEBUG, logger="jigs_testing.model_server")
    headers = {
        "x-api-key": CANARY,
        "Authorization": f"Bearer {CANARY}-bearer",
        "User-Agent": "claude-cli/2.1.332 (external, sdk-cli)",
        "X-Custom-Thing": "v",
    }
    async with ModelServer([text("ok")]) as server, httpx.AsyncClient(base_url=server.url) as c:
        await c.post(
            "/v1/messages?beta=true&api_key=sk-query-canary",
            json=anthropic_body(),
            headers=headers,
        )
    (recorded,) = server.requests
    assert {"x-api-key", "authorization", "user-agent", "x-custom-thing", "host"} <= set(
        recorded.header_names
    )
    assert recorded.has_header("X-API-Key")
    assert not recorded.has_header("x-other")
    assert recorded.user_agent == "claude-cli/2.1.332 (external, sdk-cli)"
    assert CANARY not in repr(recorded)
    assert CANARY not in json.dumps(recorded.summary())
    assert CANARY not in caplog.text, "a header value reached the server log"
    assert "sk-query-canary" not in caplog.text, "a credential-like query value was logged"
    assert "#0 POST /v1/messages?beta=true&api_key=*** anthropic" in caplog.text


async def test_record_fields():
    body = anthropic_body(
        model="claude-x",
        stream=True,
        messages=[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
    )
    async with ModelServer(["ok"]) as server, httpx.AsyncClient(base_url=server.url) as c:
        await c.post("/v1/messages?beta=true", json=body)
        await c.get("/v1/models")
    first, second = server.requests
    assert (first.index, first.method, first.path, first.query) == (
        0,
        "POST",
        "/v1/messages",
        "beta=true",
    )
    assert first.target == "/v1/messages?beta=true"
    assert first.wire == "anthropic"
    assert first.model == "claude-x"
    assert first.message_count == 2
    assert first.stream is True
    assert first.body == body
    assert first.is_model_request
    assert first.received_at > 0
    assert (second.wire, second.body, second.is_model_request) == ("models", None, False)
    assert server.model_requests == [first]


async def test_text_finds_every_kind_of_content():
    anthropic = anthropic_body(
        system=[{"type": "text", "text": "SYSTEM-CANARY"}],
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "USER-CANARY"}]},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "Bash",
                        "input": {"command": "ARG-CANARY"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "RESULT-CANARY"}
                ],
            },
        ],
    )
    responses = responses_body(
        instructions="INSTRUCTIONS-CANARY",
        input=[
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "DEV-CANARY"}],
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "OUTPUT-CANARY"},
        ],
    )
    chat = chat_body(
        messages=[
            {"role": "system", "content": "CHAT-SYSTEM-CANARY"},
            {"role": "tool", "tool_call_id": "call_1", "content": "TOOL-CANARY"},
        ]
    )
    async with ModelServer(["a", "b", "c"]) as server, httpx.AsyncClient(base_url=server.url) as c:
        await c.post("/v1/messages", json=anthropic)
        await c.post("/v1/responses", json=responses)
        await c.post("/v1/chat/completions", json=chat)
    first, second, third = (r.text() for r in server.requests)
    for canary in ("SYSTEM", "USER", "ARG", "RESULT"):
        assert f"{canary}-CANARY" in first
    assert "toolu_1" not in first, "ids are structure, not text"
    for canary in ("INSTRUCTIONS", "DEV", "OUTPUT"):
        assert f"{canary}-CANARY" in second
    assert "CHAT-SYSTEM-CANARY" in third
    assert "TOOL-CANARY" in third


async def test_tool_names_flatten_namespaces():
    tools = [
        {"type": "function", "name": "exec_command"},
        {"type": "namespace", "name": "mcp__fake", "tools": [{"type": "function", "name": "echo"}]},
        {"type": "function", "function": {"name": "chat_style"}},
        {"name": "Bash", "input_schema": {}},
    ]
    async with ModelServer(["ok"]) as server, httpx.AsyncClient(base_url=server.url) as c:
        await c.post("/v1/responses", json=responses_body(tools=tools))
    assert server.requests[0].tool_names() == [
        "exec_command",
        "mcp__fake__echo",
        "chat_style",
        "Bash",
    ]


async def test_clear_log_forgets_what_was_recorded_and_indexes_go_on() -> None:
    """A long-lived server (a soak) drops its record of request bodies; nothing else changes."""
    async with ModelServer(["one", "two"]) as server:
        client = httpx.AsyncClient(base_url=server.url)
        async with client:
            await client.post("/v1/messages", json=anthropic_body())
            assert [r.index for r in server.requests] == [0]
            server.clear_log()
            assert server.requests == []
            assert server.failures == []
            await client.post("/v1/messages", json=anthropic_body())
    assert [(r.index, r.reply_index) for r in server.requests] == [(1, 1)]
    server.assert_script_used_up()


async def test_a_server_that_keeps_n_requests_forgets_the_oldest() -> None:
    """``keep=N`` (``jigs model-server`` keeps 1000): the log holds the newest N; ``served``
    counts them all."""
    with pytest.raises(ValueError, match="keep"):
        ModelServer(keep=0)
    async with (
        ModelServer(["a", "b", "c"], keep=2) as server,
        httpx.AsyncClient(base_url=server.url) as client,
    ):
        for _ in range(3):
            await client.post("/v1/messages", json=anthropic_body())
    assert [r.index for r in server.requests] == [1, 2]
    assert server.served == 3
