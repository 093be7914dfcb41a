"""Records (``jigs._record.Record``): what a step takes in and the events it emits are validated
when built, frozen, JSON-ready, and never echo a refused value; pydantic models and pickle carry
them unchanged."""

from __future__ import annotations

import json
import pickle
from typing import Any

import msgspec
import pytest
from jigs import AgentSessionRef, RunMetadata, harnesses
from jigs.errors import DescriptorError, InvalidInputError, JigsError
from jigs.events import (
    AgentEvent,
    ModelCallStarted,
    Notice,
    ReasoningDelta,
    SessionStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnCompleted,
    TurnFailed,
    UsageUpdated,
    event_from_data,
)
from jigs.mcp import McpHttpServer, McpStdioServer
from jigs.models import Usage
from jigs_harness_claude import ClaudeDescriptor

SECRET = "sk-ant-api03-" + "Zq7" * 12

EVENTS: list[AgentEvent] = [
    SessionStarted(session_id="s"),
    ModelCallStarted(),
    TextDelta(text="a"),
    ReasoningDelta(text="r"),
    ToolCallStarted(id="1", name="bash", arguments={"cmd": ["ls", 1]}),
    ToolCallFinished(id="1", name="bash", output="ok", is_error=True),
    UsageUpdated(usage=Usage(input_tokens=3, cost_usd=0.5)),
    Notice(message="careful"),
    TurnCompleted(text="done", stop_reason="end", output={"a": 1}, metadata={"k": [1]}),
    TurnFailed(reason="api_error", message="boom", retryable=True),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.type)
def test_every_event_round_trips_through_json_by_its_type(event: AgentEvent) -> None:
    data = json.loads(json.dumps(event.to_data()))
    assert data["type"] == event.type
    assert event_from_data(data) == event


@pytest.mark.parametrize(
    "data",
    [
        {"type": "no-such-event"},
        {"type": "text-delta"},
        {"type": "text-delta", "text": 3},
        {"type": "text-delta", "text": "x", SECRET: 1},
        {"text": "x"},
    ],
    ids=["unknown-type", "missing-field", "wrong-type", "unknown-key", "no-type"],
)
def test_bad_event_data_is_an_input_error_without_the_value(data: dict[str, Any]) -> None:
    with pytest.raises(InvalidInputError, match="invalid event") as caught:
        event_from_data({k: (SECRET if v == "x" else v) for k, v in data.items()})
    assert SECRET not in str(caught.value)
    assert caught.value.__context__ is None
    assert caught.value.__cause__ is None


def test_events_are_validated_when_built_and_frozen() -> None:
    with pytest.raises(DescriptorError, match=r"text: Expected `str`, got `int`"):
        TextDelta(text=3)  # type: ignore[arg-type]
    with pytest.raises(DescriptorError, match="unknown key"):
        TextDelta(text="a", extra=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="keyword arguments only"):
        TextDelta("a")
    event = TextDelta(text="a")
    with pytest.raises(AttributeError):
        event.text = "b"


def test_run_metadata_and_session_refs_refuse_bad_data_as_input_errors() -> None:
    cases: list[tuple[type[Any], dict[str, Any], str]] = [
        (RunMetadata, {"workflow_run_id": ""}, "workflow_run_id"),
        (RunMetadata, {"workflow_run_id": "r", "attempt": 0}, "attempt"),
        (RunMetadata, {"workflow_run_id": SECRET, "attempt": SECRET}, "attempt"),
        (
            AgentSessionRef,
            {"harness": "h", "id": "i", "descriptor": "d", "digest": SECRET},
            "digest",
        ),
        (AgentSessionRef, {"harness": "h", "id": "", "descriptor": "d"}, "id"),
    ]
    for cls, data, field in cases:
        with pytest.raises(InvalidInputError) as caught:
            cls(**data)
        assert field in str(caught.value), caught.value
        assert SECRET not in str(caught.value)
        assert caught.value.argument == cls.__name__


@pytest.mark.parametrize(
    ("settings", "where"),
    [
        ({"effort": SECRET}, "effort: not one of the allowed values"),
        ({"max_retries": SECRET}, "max_retries: Expected `int`, got `str`"),
        ({"base_url": SECRET}, "base_url"),
        ({"allowed_tools": SECRET}, "allowed_tools: Expected `array`"),
        ({SECRET: 1}, "<key not shown>: unknown key for a claude descriptor"),
        ({"mcp_servers": {"s": {"command": SECRET, "probe": {"tool": 1}}}}, "probe.tool"),
        ({"api_key_env": SECRET}, "api_key_env"),
    ],
    ids=["literal", "int", "pattern", "tuple", "key", "nested", "rule"],
)
def test_a_descriptor_names_the_bad_key_and_never_the_secret(
    settings: dict[str, Any], where: str
) -> None:
    with pytest.raises(DescriptorError) as caught:
        harnesses.claude(**settings)
    assert where in str(caught.value)
    assert SECRET not in str(caught.value)
    assert SECRET not in repr(caught.value.args)
    assert caught.value.kind == "claude"
    assert caught.value.__context__ is None


def test_a_descriptor_pickles_and_rebuilds_validated() -> None:
    d = harnesses.claude(
        model="m",
        allowed_tools=["Read"],
        mcp_servers={"web": {"url": "https://mcp.example/x", "probe": {"tool": "ping"}}},
    )
    assert isinstance(d, ClaudeDescriptor)
    assert isinstance(d.mcp_servers["web"], McpHttpServer)
    assert d.mcp_servers["web"].type == "http"
    assert d.allowed_tools == ("Read",)
    assert pickle.loads(pickle.dumps(d)) == d
    data = json.loads(d.describe())
    assert type(d).from_data(data) == d
    # defaults are left out of the canonical string; the server keeps its type
    assert "turn_timeout" not in data
    assert data["mcp_servers"]["web"]["type"] == "http"
    assert d.replace(model="other") == ClaudeDescriptor.from_data({**d.to_data(), "model": "other"})
    with pytest.raises(DescriptorError, match="max_retries"):
        d.replace(max_retries=99)


def test_an_mcp_server_without_a_type_is_stdio_unless_it_has_a_url() -> None:
    d = harnesses.echo(mcp_servers={"a": {"command": "srv", "probe": {"tool": "t"}}})
    assert isinstance(d.mcp_servers["a"], McpStdioServer)
    with pytest.raises(DescriptorError, match="env"):
        harnesses.echo(mcp_servers={"a": {"command": "s", "probe": {"tool": "t"}, "env": SECRET}})


def test_records_are_fields_of_pydantic_models() -> None:
    from pydantic import BaseModel

    class Payload(BaseModel):
        run: RunMetadata
        usage: Usage
        event: TextDelta

    payload = Payload.model_validate(
        {"run": {"workflow_run_id": "r", "attempt": 2}, "usage": {}, "event": {"text": "t"}}
    )
    assert payload.run == RunMetadata(workflow_run_id="r", attempt=2)
    assert isinstance(payload.event, TextDelta)
    dumped = payload.model_dump(mode="json")
    assert dumped["run"]["attempt"] == 2
    assert dumped["event"]["type"] == "text-delta"
    assert Payload.model_validate_json(payload.model_dump_json()) == payload


def test_msgspec_json_and_records_agree() -> None:
    ref = AgentSessionRef(harness="echo", id="i", descriptor="{}", digest="sha256:" + "0" * 64)
    assert msgspec.json.decode(msgspec.json.encode(ref), type=AgentSessionRef) == ref
    assert AgentSessionRef.from_data(ref.to_data()) == ref
    with pytest.raises(JigsError):
        AgentSessionRef.from_data([1, 2])  # type: ignore[arg-type]


def test_the_step_token_and_raw_usage_stay_out_of_every_repr() -> None:
    """``ModelEndpoint`` holds the step's token in its URL: neither ``repr`` nor rich (which
    renders tracebacks' locals, e.g. structlog's console renderer) shows it; ``TokenUsage``
    leaves its bulky ``raw`` out of both."""
    import rich.pretty
    from jigs.plugin import ModelEndpoint, ModelRoute
    from jigs.proxy._usage import TokenUsage

    token = "Zq3tokenOfTheStep9x"
    endpoint = ModelEndpoint(
        base_url=f"http://127.0.0.1:1/{token}",
        key="jigs-placeholder-0a1b2c",
        route=ModelRoute(upstream="https://api.anthropic.com", key_env="ANTHROPIC_API_KEY"),
    )
    for shown in (repr(endpoint), rich.pretty.pretty_repr(endpoint)):
        assert token not in shown, shown
        assert "jigs-placeholder" not in shown, shown
        assert "api.anthropic.com" in shown, shown
    usage = TokenUsage.from_raw({"input_tokens": 3, "output_tokens": 4, "secret_blob": "x" * 50})
    for shown in (repr(usage), rich.pretty.pretty_repr(usage)):
        assert "secret_blob" not in shown, shown
        assert "input_tokens=3" in shown.replace(" ", ""), shown


def test_check_outcomes_are_equal_whatever_they_took() -> None:
    from jigs.checks import CheckOutcome

    fast = CheckOutcome("a", "A", ok=False, reason="r", repair="f", seconds=0.001)
    slow = CheckOutcome("a", "A", ok=False, reason="r", repair="f", seconds=9.0)
    assert fast == slow
    assert hash(fast) == hash(slow)
    assert fast != CheckOutcome("a", "A", ok=False, reason="r", repair="f", unanswered=True)
    assert fast != CheckOutcome("a", "A", ok=False, reason="other", repair="f")
