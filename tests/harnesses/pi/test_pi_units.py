"""Descriptor, generated files, stream reader and structured-output helpers (no process)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jigs import harnesses
from jigs.errors import AgentOutputError, AgentTurnError, DescriptorError
from jigs_harness_pi import OpenRouter, PiDescriptor
from jigs_harness_pi._home import PiHome, model_flag, models_json, settings_json
from jigs_harness_pi._stream import PiStream
from jigs_harness_pi._structured import extract

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


def _events(*events: dict[str, Any]) -> PiStream:
    stream = PiStream()
    for event in events:
        stream.feed(json.dumps(event).encode())
    return stream


def _assistant(stop: str, text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {
        "type": "message_end",
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "stopReason": stop,
            "usage": {"input": 2, "output": 1},
            **extra,
        },
    }


HEADER = {"type": "session", "version": 3, "id": "s-1"}
SETTLED = {"type": "agent_settled", "aborted": False}


def test_stream_outcome() -> None:
    outcome = _events(HEADER, {"type": "agent_start"}, _assistant("stop"), SETTLED).outcome()
    assert (outcome.text, outcome.session_id, outcome.usage.input_tokens) == ("hi", "s-1", 2)


def test_a_retried_error_does_not_fail_the_turn() -> None:
    stream = _events(
        HEADER,
        _assistant("error", "", errorMessage="overloaded"),
        _assistant("stop", "ok"),
        SETTLED,
    )
    assert stream.outcome().text == "ok"
    assert stream.outcome().usage.input_tokens == 4


@pytest.mark.parametrize(
    ("events", "error", "message"),
    [
        ([HEADER, _assistant("error", errorMessage="boom"), SETTLED], AgentTurnError, "boom"),
        ([HEADER, _assistant("length"), SETTLED], AgentTurnError, "truncated"),
        ([HEADER, _assistant("aborted"), SETTLED], AgentTurnError, "aborted"),
        ([HEADER, _assistant("toolUse"), SETTLED], AgentTurnError, "toolUse"),
        ([HEADER, _assistant("stop")], AgentOutputError, "before agent_settled"),
        ([HEADER, SETTLED], AgentOutputError, "without an assistant message"),
        ([_assistant("stop"), SETTLED], AgentOutputError, "session header"),
    ],
)
def test_stream_failures(
    events: list[dict[str, Any]], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        _events(*events).outcome()


def test_invalid_lines_name_their_number() -> None:
    stream = _events(HEADER)
    with pytest.raises(AgentOutputError, match="line 2") as info:
        stream.feed(b"{not json")
    assert info.value.line == 2
    with pytest.raises(AgentOutputError, match="line 3"):
        stream.feed(b"[1, 2]")


SCHEMA = {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}


@pytest.mark.parametrize(
    ("text", "value", "problem"),
    [
        ('{"a": 1}', {"a": 1}, None),
        ('Here:\n```json\n{"a": 2}\n```', {"a": 2}, None),
        ('Result: {"a": 3} done', {"a": 3}, None),
        ("no json here", None, "not JSON"),
        ('{"b": 1}', None, "required key(s) a"),
        ("[1]", None, "not a JSON object"),
    ],
)
def test_extract(text: str, value: Any, problem: str | None) -> None:
    got, why = extract(text, SCHEMA)
    assert got == value
    assert (why is None) if problem is None else (why is not None and problem in why)
