"""Descriptor, generated files and the stream decoder (no process)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jigs import harnesses
from jigs.errors import AgentOutputError, AgentSessionError, DescriptorError
from jigs.events import (
    ModelCallStarted,
    ReasoningDelta,
    SessionStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnCompleted,
    TurnFailed,
    UsageUpdated,
)
from jigs_harness_pi import OpenRouter, PiDescriptor
from jigs_harness_pi._home import PiHome, model_flag, models_json, settings_json
from jigs_harness_pi._stream import PiDecoder

SOURCE = {
    "type": "openai-compatible",
    "name": "local",
    "base_url": "http://127.0.0.1:1/v1",
    "model": "m",
    "api_key_env": "MY_KEY",
}


def _pi(**settings: Any) -> PiDescriptor:
    descriptor = harnesses.pi(**settings)
    assert isinstance(descriptor, PiDescriptor)
    return descriptor


def test_descriptor_round_trip_and_env_names() -> None:
    d = _pi(model=SOURCE, thinking="high")
    assert harnesses.load(json.loads(d.describe())) == d
    assert d.env_names() == {"MY_KEY"}
    assert model_flag(d) == "local/m"


def test_mcp_servers_are_accepted_and_their_names_join_the_allowlist() -> None:
    server = {"command": "srv", "env": {"TOKEN": "DOCS_TOKEN"}, "probe": {"tool": "ping"}}
    d = harnesses.pi(model=SOURCE, mcp_servers={"docs": server})
    assert d.env_names() == {"MY_KEY", "DOCS_TOKEN"}
    assert harnesses.load(json.loads(d.describe())) == d


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"extensions": ["x.ts"]}, "may not set 'extensions'"),
        ({"api_key": "sk-abc"}, "may not set 'api_key'"),
        ({"model": {**SOURCE, "api_key_env": "sk-live-0123456789abcdef"}}, "looks like a secret"),
        ({"model": {**SOURCE, "name": "openai"}}, "built-in providers"),
        ({"model": {**SOURCE, "base_url": "http://u:p@h/v1"}}, "credentials"),
        ({"retries": 99}, "retries"),
        ({"no_session": True}, "may not set 'no_session'"),
        ({"system_prompt": "a\x00b"}, "NUL"),
        ({"skills": ["ok", "bad\x00"]}, "NUL"),
        ({"exclude_tools": ["no spaces"]}, "not a Pi tool name"),
        ({"max_turns": 0}, "max_turns"),
        ({"model": {**SOURCE, "price": {"input": -1}}}, "price"),
    ],
)
def test_bad_descriptors(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(DescriptorError, match=message) as info:
        harnesses.pi(**{"model": SOURCE, **settings})
    assert "sk-live-0123456789abcdef" not in str(info.value)


def test_generated_files_name_the_key_never_its_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-secret-value-xyz")
    d = _pi(model=SOURCE, retries=2)
    provider = models_json(d)["providers"]["local"]
    assert provider["apiKey"] == "$MY_KEY"
    assert provider["api"] == "openai-completions"
    settings = settings_json(d)
    assert settings["retry"] == {"enabled": True, "maxRetries": 2}
    assert settings["packages"] == []
    assert settings["shellCommandPrefix"] == "unset MY_KEY"
    home = PiHome(d)
    try:
        for path in home.path.iterdir():
            assert "sk-secret-value-xyz" not in path.read_text()
    finally:
        home.remove()
    assert not home.path.exists()


def test_other_sources() -> None:
    anthropic = _pi(
        model={**SOURCE, "type": "anthropic-compatible", "base_url": "http://127.0.0.1:1"}
    )
    assert models_json(anthropic)["providers"]["local"]["api"] == "anthropic-messages"
    responses = _pi(model={**SOURCE, "api": "responses", "compat": {"supportsStore": False}})
    provider = models_json(responses)["providers"]["local"]
    assert provider["api"] == "openai-responses"
    assert provider["compat"] == {"supportsStore": False}
    router = _pi(model={"type": "openrouter", "model": "qwen/qwen3-coder"})
    assert isinstance(router.model, OpenRouter)
    assert model_flag(router) == "openrouter/qwen/qwen3-coder"
    assert models_json(router)["providers"]["openrouter"]["apiKey"] == "$OPENROUTER_API_KEY"
    assert settings_json(_pi(model=SOURCE))["retry"] == {"enabled": False}


def test_limits_are_supported_and_prices_reach_models_json() -> None:
    d = _pi(
        model={**SOURCE, "price": {"input": 3, "output": 15, "cache_read": 0.3}},
        max_turns=5,
        max_budget_usd=1.5,
    )
    assert (d.max_turns, d.max_budget_usd) == (5, 1.5)
    (model,) = models_json(d)["providers"]["local"]["models"]
    assert model["cost"] == {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 0}
    assert harnesses.load(json.loads(d.describe())) == d
    (free,) = models_json(_pi(model=SOURCE))["providers"]["local"]["models"]
    assert free["cost"] == {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}


def _decode(*messages: dict[str, Any], expected: str | None = "s-1") -> list[Any]:
    decoder = PiDecoder(expected)
    return [event for message in messages for event in decoder.decode(message)]


def _assistant(stop: str, text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {
        "type": "message_end",
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "stopReason": stop,
            "usage": {"input": 2, "output": 1, "cost": {"total": 0.5}},
            **extra,
        },
    }


HEADER = {"type": "session", "version": 3, "id": "s-1"}
SETTLED = {"type": "agent_settled", "aborted": False}
START = {"type": "message_start", "message": {"role": "assistant", "content": []}}


def test_decoder_events_of_a_turn() -> None:
    events = _decode(
        HEADER,
        {"type": "message_start", "message": {"role": "user", "content": "hi"}},
        START,
        {
            "type": "message_update",
            "assistantMessageEvent": {"type": "thinking_delta", "delta": "hm"},
        },
        {"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "delta": "h"}},
        {"type": "tool_execution_start", "toolCallId": "c1", "toolName": "bash", "args": {"a": 1}},
        {
            "type": "tool_execution_end",
            "toolCallId": "c1",
            "toolName": "bash",
            "result": {"content": [{"type": "text", "text": "out"}]},
            "isError": True,
        },
        _assistant("stop"),
        SETTLED,
    )
    assert events == [
        SessionStarted(session_id="s-1"),
        ModelCallStarted(),
        ReasoningDelta(text="hm"),
        TextDelta(text="h"),
        ToolCallStarted(id="c1", name="bash", arguments={"a": 1}),
        ToolCallFinished(id="c1", name="bash", output="out", is_error=True),
        UsageUpdated(usage=events[6].usage),
        TurnCompleted(
            text="hi",
            stop_reason="stop",
            metadata={"tool_calls": 1, "cli": None, "model": None, "provider": None},
        ),
    ]
    assert events[6].usage.input_tokens == 2
    assert events[6].usage.cost_usd == 0.5


def test_a_retried_error_does_not_fail_the_turn_and_usage_adds_up() -> None:
    events = _decode(
        HEADER,
        START,
        _assistant("error", "", errorMessage="overloaded"),
        START,
        _assistant("stop", "ok"),
        SETTLED,
    )
    usage = [e.usage for e in events if isinstance(e, UsageUpdated)]
    assert [u.input_tokens for u in usage] == [2, 4]
    assert usage[-1].cost_usd == 1.0
    assert events[-1] == TurnCompleted(text="ok", stop_reason="stop", metadata=events[-1].metadata)


@pytest.mark.parametrize(
    ("final", "reason", "retryable", "message"),
    [
        (_assistant("error", errorMessage="boom"), "api_error", True, "boom"),
        (_assistant("length"), "length", False, "truncated"),
        (_assistant("aborted"), "aborted", False, "aborted"),
        (_assistant("toolUse"), "other", False, "toolUse"),
    ],
)
def test_decoder_failures(
    final: dict[str, Any], reason: str, retryable: bool, message: str
) -> None:
    failed = _decode(HEADER, final, SETTLED)[-1]
    assert isinstance(failed, TurnFailed)
    assert (failed.reason, failed.retryable) == (reason, retryable)
    assert message in failed.message


def test_a_settled_abort_fails_the_turn() -> None:
    failed = _decode(HEADER, _assistant("stop"), {"type": "agent_settled", "aborted": True})[-1]
    assert isinstance(failed, TurnFailed)
    assert failed.reason == "aborted"


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        ([HEADER, SETTLED], "without an assistant message"),
        ([_assistant("stop"), SETTLED], "session header"),
    ],
)
def test_unreadable_streams(messages: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(AgentOutputError, match=message):
        _decode(*messages)


def test_a_session_other_than_the_one_asked_for_is_refused() -> None:
    with pytest.raises(AgentSessionError, match="asked for 's-2'"):
        _decode(HEADER, expected="s-2")
    assert _decode(HEADER, expected=None) == [SessionStarted(session_id="s-1")]


def test_model_route_and_the_proxied_models_json() -> None:
    from jigs.plugin import ModelRoute
    from jigs_harness_pi import PiHarness

    harness = PiHarness()
    d = _pi(model=SOURCE)
    key = d.model.key_env()
    assert key is not None
    chat = ("POST /chat/completions",)  # the one call Pi makes of each source's api
    assert harness.model_route(d) == ModelRoute("http://127.0.0.1:1/v1", key, "bearer", chat)
    responses = _pi(model={**SOURCE, "api": "responses"})
    assert harness.model_route(responses) == ModelRoute(
        "http://127.0.0.1:1/v1", key, "bearer", ("POST /responses",)
    )
    provider = models_json(d, base_url="http://127.0.0.1:7/tok")["providers"]["local"]
    assert provider["baseUrl"] == "http://127.0.0.1:7/tok"
    assert provider["apiKey"] == f"${key}"
    anthropic = _pi(model={**SOURCE, "type": "anthropic-compatible"})
    assert harness.model_route(anthropic) == ModelRoute(
        "http://127.0.0.1:1/v1", key, "x-api-key", ("POST /v1/messages",)
    )
    router = _pi(model={"type": "openrouter", "model": "x"})
    assert harness.model_route(router) == ModelRoute(
        "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", "bearer", chat
    )
    routed = models_json(router, base_url="http://127.0.0.1:7/tok")["providers"]["openrouter"]
    assert routed["baseUrl"] == "http://127.0.0.1:7/tok"
    no_key = _pi(model={k: v for k, v in SOURCE.items() if k != "api_key_env"})
    assert harness.model_route(no_key) is None
