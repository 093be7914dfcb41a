"""Shapes checked against the traffic recorded from the real CLIs (``tests/testing/cli_samples``,
copied from the project's shared reference material).

The samples hold what Claude Code 2.1.332, Codex 0.171.0 and Pi 1.6.0 accepted from a fake
server: the raw Anthropic stream events Claude passed through, and the assistant items each CLI
sent back in its next request. Set JIGS_CLI_SAMPLES to the folder if it is elsewhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from jigs_testing import ModelServer, text, tool_call

from ._sse import anthropic_body, chat_body, post_stream, responses_body

pytestmark = pytest.mark.anyio


#: Copies of the recorded traffic (from the project's shared reference material), kept with the
#: tests so the check never depends on a folder outside the repository.
SAMPLES = Path(os.environ.get("JIGS_CLI_SAMPLES") or Path(__file__).with_name("cli_samples"))
needs_samples = pytest.mark.skipif(
    not SAMPLES.is_dir() and not os.environ.get("CI"),
    reason=f"recorded CLI samples not found at {SAMPLES}",
)


def _jsonl(name: str) -> list[dict[str, Any]]:
    with (SAMPLES / name).open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def shape(value: Any) -> Any:
    """Keys all the way down, leaves replaced by their JSON type (null kept apart)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if value is None:
        return None
    return type(value).__name__


@needs_samples
async def test_anthropic_stream_matches_what_claude_passed_through():
    recorded = [
        line["event"]
        for line in _jsonl("claude-resume-partial-messages.jsonl")
        if line["type"] == "stream_event"
    ]
    reply_text = recorded[2]["delta"]["text"]
    async with (
        ModelServer([text(reply_text)]) as server,
        httpx.AsyncClient(base_url=server.url) as c,
    ):
        _, events = await post_stream(c, "/v1/messages?beta=true", anthropic_body())
    ours = [e.json() for e in events if e.name != "ping"]  # Claude does not pass pings on
    deltas = [e for e in ours if e["type"] == "content_block_delta"]
    assert "".join(d["delta"]["text"] for d in deltas) == reply_text
    ours = [e for e in ours if e["type"] != "content_block_delta"]
    ours.insert(2, {**deltas[0], "delta": {**deltas[0]["delta"], "text": reply_text}})
    assert [e["type"] for e in ours] == [e["type"] for e in recorded]
    for mine, theirs in zip(ours, recorded, strict=True):
        assert shape(mine) == shape(theirs), mine["type"]
    assert ours[0]["message"]["id"].startswith("msg_")


@needs_samples
async def test_anthropic_tool_use_block_matches_the_claude_transcript():
    assistant = [
        line["message"]
        for line in _jsonl("claude-p-stream-json.jsonl")
        if line["type"] == "assistant"
    ]
    recorded = next(b for m in assistant for b in m["content"] if b["type"] == "tool_use")
    async with (
        ModelServer([tool_call(recorded["name"], recorded["input"])]) as server,
        httpx.AsyncClient(base_url=server.url) as c,
    ):
        response = await c.post("/v1/messages", json=anthropic_body())
    (block,) = response.json()["content"]
    assert shape(block) == shape(recorded)
    assert block["id"].startswith("toolu_")


@needs_samples
async def test_responses_items_match_what_codex_sent_back():
    history = _jsonl("codex-requests.jsonl")[-1]["body"]["input"]
    recorded_call = next(item for item in history if item["type"] == "function_call")
    recorded_message = next(
        item for item in history if item["type"] == "message" and item["role"] == "assistant"
    )
    script = [
        tool_call(recorded_call["name"], recorded_call["arguments"]),
        text(recorded_message["content"][0]["text"]),
    ]
    async with ModelServer(script) as server, httpx.AsyncClient(base_url=server.url) as c:
        _, call_events = await post_stream(c, "/v1/responses", responses_body())
        _, text_events = await post_stream(c, "/v1/responses", responses_body())
    call = call_events[-2].json()["item"]
    message = text_events[-2].json()["item"]
    assert set(call) == set(recorded_call)
    assert {k: shape(v) for k, v in call.items()} == shape(recorded_call)
    assert call["arguments"] == recorded_call["arguments"]
    assert set(message) == set(recorded_message)
    assert set(recorded_message["content"][0]) <= set(message["content"][0])
    assert call["call_id"].startswith("call_")
    assert call["id"].startswith("fc_")


@needs_samples
async def test_chat_tool_call_matches_what_pi_sent_back():
    history = _jsonl("pi-1.6.0-requests.jsonl")[-1]["body"]["messages"]
    recorded = next(m for m in history if m["role"] == "assistant")["tool_calls"][0]
    arguments = recorded["function"]["arguments"]
    async with (
        ModelServer([tool_call(recorded["function"]["name"], arguments)]) as server,
        httpx.AsyncClient(base_url=server.url) as c,
    ):
        _, events = await post_stream(
            c, "/v1/chat/completions", chat_body(stream_options={"include_usage": True})
        )
    deltas = [
        call
        for e in events[:-1]
        for choice in e.json()["choices"]
        for call in choice["delta"].get("tool_calls", [])
    ]
    assembled = {
        "id": deltas[0]["id"],
        "type": deltas[0]["type"],
        "function": {
            "name": deltas[0]["function"]["name"],
            "arguments": "".join(d["function"]["arguments"] for d in deltas),
        },
    }
    assert shape(assembled) == shape(recorded)
    assert assembled["function"]["arguments"] == arguments
    assert assembled["id"].startswith("call_")


@needs_samples
async def test_message_count_matches_the_recorded_resume_counts():
    """The counts harness-clis.md reports: claude 2 then 6, codex 4 then 10, pi 2 then 4."""
    expected = {
        "claude-requests.jsonl": ("/v1/messages?beta=true", [2, 4, 6]),
        "codex-requests.jsonl": ("/v1/responses", [4, 6, 10]),
        "pi-1.6.0-requests.jsonl": ("/v1/chat/completions", [2, 4]),
    }
    for name, (path, counts) in expected.items():
        bodies = [line["body"] for line in _jsonl(name)]
        async with (
            ModelServer(["x"] * len(bodies)) as server,
            httpx.AsyncClient(base_url=server.url) as c,
        ):
            for body in bodies:
                await c.post(path, json={**body, "stream": False})
        assert [r.message_count for r in server.requests] == counts, name
