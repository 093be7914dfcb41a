"""The claude kind's pure parts: descriptor rules, the command line and environment of a turn,
the MCP config, transcript paths, and decoding recorded stream-json into :mod:`jigs.events`."""

from __future__ import annotations

import json
import stat
import uuid
from pathlib import Path
from typing import Any

import pytest
from jigs import harnesses
from jigs.descriptors import HarnessDescriptor
from jigs.errors import DescriptorError, InvalidInputError
from jigs.events import (
    AgentEvent,
    ModelCallStarted,
    Notice,
    SessionStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnCompleted,
    TurnFailed,
    UsageUpdated,
)
from jigs.mcp import McpHttpServer, McpProbe, McpStdioServer
from jigs.plugin import ModelEndpoint, ModelRoute, ToolGate, TurnLaunch, TurnSpec
from jigs.steps import Allow
from jigs_harness_claude import ClaudeDecoder, ClaudeDescriptor, ClaudeHarness
from jigs_harness_claude._checks import sandbox_ok
from jigs_harness_claude._control import StreamInput
from jigs_harness_claude._launch import Prepared, build_env, launch
from jigs_harness_claude._mcp import mcp_config
from jigs_harness_claude._sessions import project_dir_name

SAMPLES = Path(__file__).parents[2] / "testing" / "cli_samples"
PROBE = McpProbe(tool="ping")
UUID = "11111111-2222-4333-8444-555555555555"


@pytest.mark.parametrize(
    "key",
    [
        "permission_mode",
        "mcp_config",
        "settings",
        "agents",
        "agent",
        "plugin_dir",
        "restricted",
        "no_session_persistence",
        "json_schema",
        "include_partial_messages",
        "session_id",
        "extra_args",
    ],
)
def test_descriptor_refuses_policy_keys_with_their_reason(key: str) -> None:
    with pytest.raises(DescriptorError) as caught:
        harnesses.claude(**{key: "x"})
    assert caught.value.key == key
    assert f"may not set {key!r}: " in str(caught.value)


def test_descriptor_refuses_secrets_and_keeps_the_limits() -> None:
    with pytest.raises(DescriptorError, match="looks like a secret"):
        harnesses.claude(api_key_env="sk-ant-abcdefghijklmnopqrstuvwxyz0123456789")
    with pytest.raises(DescriptorError, match="base_url needs api_key_env"):
        harnesses.claude(base_url="http://127.0.0.1:1")
    d = harnesses.claude(model="sonnet", base_url="http://127.0.0.1:1", api_key_env="K")
    assert isinstance(d, ClaudeDescriptor)
    assert harnesses.loads(d.describe()) == d
    assert "api_key_env" in d.describe()
    assert "sk-" not in d.describe()
    # the limits are the base knobs; Claude Code enforces both itself
    assert ClaudeDescriptor.limits == {"max_turns": "cli", "max_budget_usd": "cli"}
    limited = harnesses.claude(max_turns=3, max_budget_usd=1.5, idle_timeout=30)
    assert (limited.max_turns, limited.max_budget_usd, limited.idle_timeout) == (3, 1.5, 30)


def test_descriptor_refuses_bad_values() -> None:
    for bad in (
        {"autocompact": 5},
        {"effort": "extreme"},
        {"max_turns": 0},
        {"max_budget_usd": -1},
        {"max_budget_usd": float("inf")},  # Claude Code refuses it: a crash at launch
        {"system_prompt_snapshot": "maybe"},
        {"turn_timeout": 0},
        {"idle_timeout": -5},
        {"betas": "not-a-list"},
    ):
        with pytest.raises(DescriptorError):
            harnesses.claude(**bad)


_ENDPOINT = ModelEndpoint(
    base_url="http://127.0.0.1:9/step-token",
    key="jigs-placeholder-0000",
    route=ModelRoute("http://gw.example", "K"),
)


def _launch(tmp_path: Path, d: ClaudeDescriptor, prompt: str = "p", **turn: Any) -> TurnLaunch:
    prefix = tmp_path / "shell-prefix" if d.api_key_env else None
    spec = TurnSpec(descriptor=d, cwd=tmp_path, prompt=prompt, **turn)
    endpoint = _ENDPOINT if d.api_key_env else None
    prepared = Prepared(Path("/x/claude"), '{"mcpServers":{}}', prefix, tmp_path, endpoint)
    return launch(spec, prepared)


def test_argv_carries_the_policy_whatever_the_descriptor(tmp_path: Path) -> None:
    d = ClaudeDescriptor(model="m", allowed_tools=("Bash(git *)",), tools=())
    first = _launch(tmp_path, d, "-looks-like-a-flag")
    argv = list(first.argv)
    # a step's turn takes its prompt on stream-json input (so it can be interrupted, steered)
    assert first.stdin is None
    assert isinstance(first.driver, StreamInput)
    assert argv[argv.index("--input-format") + 1] == "stream-json"
    assert "--" not in argv
    # an ask's turn (tool-free) takes it after "--": never read as a flag
    ask = _launch(tmp_path, d, "-looks-like-a-flag", tool_free=True)
    assert ask.driver is None
    assert list(ask.argv)[-2:] == ["--", "-looks-like-a-flag"]
    for flag in ("--strict-mcp-config", "--verbose", "-p"):
        assert flag in argv
    assert argv[argv.index("--mcp-config") + 1] == '{"mcpServers":{}}'
    assert argv[argv.index("--permission-mode") + 1] == "bypassPermissions"
    # no settings file is read (a worktree's could redirect the key); CLAUDE.md loads via --add-dir
    assert argv[argv.index("--setting-sources") + 1] == ""
    assert argv[argv.index("--add-dir") + 1] == "."
    assert argv[argv.index("--output-format") + 1] == "stream-json"
    assert "--tools=" in argv
    # a fresh turn names a new session (a UUID), each time another one
    chosen = argv[argv.index("--session-id") + 1]
    assert uuid.UUID(chosen)
    again = list(_launch(tmp_path, d).argv)
    assert again[again.index("--session-id") + 1] != chosen
    assert "--include-partial-messages" not in argv
    resumed = list(_launch(tmp_path, d, session_id=UUID, partial=True).argv)
    assert f"--resume={UUID}" in resumed
    assert "--session-id" not in resumed
    assert "--include-partial-messages" in resumed
    big = _launch(tmp_path, d, "x" * 200_000, tool_free=True)
    assert big.stdin == b"x" * 200_000
    assert all(len(a) < 100_000 for a in big.argv)
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    structured = list(_launch(tmp_path, d, output_schema=schema).argv)
    assert json.loads(_flag(structured, "--json-schema")) == schema


def _flag(argv: list[str], flag: str) -> str:
    """The value of ``--flag=value`` in ``argv``."""
    [value] = [a.split("=", 1)[1] for a in argv if a.startswith(f"{flag}=")]
    return value


def test_list_items_and_values_cannot_become_flags(tmp_path: Path) -> None:
    for key in ("allowed_tools", "disallowed_tools", "tools", "additional_directories", "betas"):
        with pytest.raises(DescriptorError, match="read it as a flag"):
            harnesses.claude(**{key: ["Read", "--settings"]})
    with pytest.raises(DescriptorError, match="NUL"):
        harnesses.claude(system_prompt="a\x00b")
    d = ClaudeDescriptor(model="--dangerously-skip-permissions", name="-x")
    argv = list(_launch(tmp_path, d).argv)
    assert "--dangerously-skip-permissions" not in argv
    assert _flag(argv, "--model") == "--dangerously-skip-permissions"
    assert _flag(argv, "--name") == "-x"


#: Each descriptor key with a value, and the arguments it must put on the command line (the
#: real CLI accepts them all: test_claude_options.py).
BREADTH: list[tuple[dict[str, Any], list[str]]] = [
    ({"model": "sonnet"}, ["--model=sonnet"]),
    ({"fallback_model": "haiku,opus"}, ["--fallback-model=haiku,opus"]),
    ({"effort": "high"}, ["--effort=high"]),
    ({"max_turns": 7}, ["--max-turns=7"]),
    ({"max_budget_usd": 0.25}, ["--max-budget-usd=0.25"]),
    ({"allowed_tools": ["Bash(git *)", "Edit"]}, ["--allowedTools", "Bash(git *)", "Edit"]),
    ({"disallowed_tools": ["WebFetch"]}, ["--disallowedTools", "WebFetch"]),
    ({"tools": ["Bash", "Read"]}, ["--tools=Bash,Read"]),
    ({"system_prompt": "You are terse."}, ["--system-prompt=You are terse."]),
    ({"append_system_prompt": "Be kind."}, ["--append-system-prompt=Be kind."]),
    ({"additional_directories": ["/data", "/more"]}, ["--add-dir", ".", "/data", "/more"]),
    ({"betas": ["b-1", "b-2"]}, ["--betas", "b-1", "b-2"]),
    ({"autocompact": "auto"}, ["--autocompact=auto"]),
    ({"autocompact": 200_000}, ["--autocompact=200000"]),
    ({"name": "nightly review"}, ["--name=nightly review"]),
    ({"system_prompt_snapshot": "off"}, ["--system-prompt-snapshot=off"]),
    (
        {"exclude_dynamic_system_prompt_sections": True},
        ["--exclude-dynamic-system-prompt-sections"],
    ),
    ({"disable_slash_commands": True}, ["--disable-slash-commands"]),
]
#: Keys that reach the CLI as files of the step (test_step_skills.py runs them for real).
BY_FILES = {"skills"}


def _contains(argv: list[str], part: list[str]) -> bool:
    return any(argv[i : i + len(part)] == part for i in range(len(argv)))


@pytest.mark.parametrize(("settings", "expected"), BREADTH, ids=lambda v: str(v)[:40])
def test_every_descriptor_key_reaches_the_command_line(
    tmp_path: Path, settings: dict[str, Any], expected: list[str]
) -> None:
    d = harnesses.claude(**settings)
    assert isinstance(d, ClaudeDescriptor)
    assert _contains(list(_launch(tmp_path, d).argv), expected)
    assert not _contains(list(_launch(tmp_path, ClaudeDescriptor()).argv), expected)
    assert harnesses.loads(d.describe()) == d


def _fields(cls: type[HarnessDescriptor]) -> set[str]:
    return set(cls.model_fields)


def test_every_descriptor_key_is_covered() -> None:
    covered = {key for settings, _ in BREADTH for key in settings}
    own = _fields(ClaudeDescriptor) - _fields(HarnessDescriptor)
    # these reach the CLI through its environment (test_env_...)
    by_env = {"base_url", "api_key_env", "api_key_header", "max_retries"}
    assert own - by_env - BY_FILES - covered == set()


def test_long_system_texts_go_through_files(tmp_path: Path) -> None:
    long = "S" * 150_000
    d = ClaudeDescriptor(system_prompt=long, append_system_prompt="short")
    argv = list(_launch(tmp_path, d, system="PER-CALL").argv)
    path = Path(_flag(argv, "--system-prompt-file"))
    assert path.parent == tmp_path
    assert path.read_text() == long
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # the per-call system is appended to the descriptor's text
    assert _flag(argv, "--append-system-prompt") == "short\n\nPER-CALL"
    with pytest.raises(InvalidInputError) as caught:
        _launch(tmp_path, d, system="a\x00b")
    assert caught.value.argument == "system"


def test_a_tool_gate_switches_to_stream_json_input(tmp_path: Path) -> None:
    bridged = _launch(tmp_path, ClaudeDescriptor(), gate=ToolGate(lambda call: Allow()))
    assert bridged.driver is not None
    assert bridged.stdin is None
    argv = list(bridged.argv)
    assert argv[argv.index("--input-format") + 1] == "stream-json"
    assert "--" not in argv, "the prompt goes to the driver, not the command line"


def test_env_adds_only_what_jigs_sets_and_never_the_real_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GW_KEY", "secret-value")
    d = ClaudeDescriptor(base_url="http://gw.example", api_key_env="GW_KEY")
    prefix = Path("/private/shell-prefix")
    env = build_env(d, endpoint=_ENDPOINT, shell_prefix=prefix)
    assert env == {
        "CLAUDE_CODE_ENTRYPOINT": "sdk-py",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "2",
        "CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD": "1",
        "ANTHROPIC_BASE_URL": _ENDPOINT.base_url,
        "ANTHROPIC_API_KEY": _ENDPOINT.key,
        "CLAUDE_CODE_SHELL_PREFIX": "/private/shell-prefix",
    }
    assert set(env) <= ClaudeHarness.sets_env
    bearer = d.replace(api_key_header="bearer", max_retries=0)
    env = build_env(bearer, endpoint=_ENDPOINT, shell_prefix=prefix, max_output_tokens=64)
    assert env["ANTHROPIC_AUTH_TOKEN"] == _ENDPOINT.key
    assert "ANTHROPIC_API_KEY" not in env
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "0"
    assert env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "64"
    # without the step's proxy (or the prefix) a key is refused, never read from the host
    with pytest.raises(DescriptorError, match="GW_KEY"):
        build_env(d, shell_prefix=prefix)
    with pytest.raises(DescriptorError, match="GW_KEY"):
        build_env(d, endpoint=_ENDPOINT)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "leak")
    login = build_env(ClaudeDescriptor())
    assert "ANTHROPIC_API_KEY" not in login
    # the key's own variable is not on the agent's allowlist
    assert "GW_KEY" not in ClaudeHarness().env_allowlist(d)


def test_model_route_names_the_real_endpoint_and_how_the_key_is_sent() -> None:
    harness = ClaudeHarness()
    assert harness.model_route(ClaudeDescriptor()) is None
    assert "~/.claude" in (harness.login_route(ClaudeDescriptor()) or "")
    only_key = harness.model_route(ClaudeDescriptor(api_key_env="K"))
    messages = ("POST /v1/messages",)  # what Claude Code calls, whatever the auth scheme
    assert only_key == ModelRoute("https://api.anthropic.com", "K", "x-api-key", messages)
    gateway = ClaudeDescriptor(
        base_url="http://gw.example/a", api_key_env="K", api_key_header="bearer"
    )
    assert harness.model_route(gateway) == ModelRoute(
        "http://gw.example/a", "K", "bearer", messages
    )


def test_mcp_config_resolves_credentials_by_name() -> None:
    servers: dict[str, McpStdioServer | McpHttpServer] = {
        "files": McpStdioServer(
            command="srv", args=("--x",), env={"TOKEN": "FILES_TOKEN"}, probe=PROBE
        ),
        "web": McpHttpServer(url="https://mcp.example", bearer_token_env="WEB_TOKEN", probe=PROBE),
    }
    config = mcp_config(servers, {"FILES_TOKEN": "t1", "WEB_TOKEN": "t2"})
    assert config == {
        "mcpServers": {
            "files": {"type": "stdio", "command": "srv", "args": ["--x"], "env": {"TOKEN": "t1"}},
            "web": {
                "type": "http",
                "url": "https://mcp.example",
                "headers": {"Authorization": "Bearer t2"},
            },
        }
    }
    assert mcp_config({}, {}) == {"mcpServers": {}}
    with pytest.raises(DescriptorError, match="WEB_TOKEN"):
        mcp_config(servers, {"FILES_TOKEN": "t1"})


def test_project_dir_names_match_claude_code() -> None:
    # values recorded from Claude Code 2.1.332
    assert project_dir_name(Path("/tmp/explore/a_b.c/w")) == "-tmp-explore-a-b-c-w"
    long = Path("/tmp/explore/a_b.c/" + "x" * 120 + "/" + "y" * 100)
    name = project_dir_name(long)
    assert name.endswith("-ymwv6e")
    assert len(name) == 207


def test_sandbox_rule() -> None:
    assert sandbox_ok({}, euid=1000)
    assert not sandbox_ok({}, euid=0)
    assert not sandbox_ok({"IS_SANDBOX": "0"}, euid=0)
    assert not sandbox_ok({"IS_SANDBOX": "yes"}, euid=0)  # Claude Code refuses it too
    assert sandbox_ok({"IS_SANDBOX": "1"}, euid=0)


def _decode(decoder: ClaudeDecoder, messages: list[dict[str, Any]]) -> list[AgentEvent]:
    return [event for message in messages for event in decoder.decode(message)]


def test_recorded_not_logged_in_stream_is_a_turn_failure() -> None:
    events = _decode(
        ClaudeDecoder(partial=False),
        [
            {"type": "system", "subtype": "init", "session_id": "s", "apiKeySource": "none"},
            {
                "type": "assistant",
                "error": "authentication_failed",
                "parent_tool_use_id": None,
                "message": {"content": [{"type": "text", "text": "Not logged in · run /login"}]},
            },
            {"type": "result", "subtype": "success", "is_error": True, "result": "Not logged in"},
        ],
    )
    failed = events[-1]
    assert isinstance(failed, TurnFailed)
    assert failed.reason == "not_logged_in"
    assert not failed.retryable
    assert "/login" in failed.message
    assert "api_key_env" in failed.message
    assert not [e for e in events if isinstance(e, TextDelta)], "error text is not an answer"


_ERR = {"subtype": "success", "is_error": True}


@pytest.mark.parametrize(
    ("result", "reason", "retryable"),
    [
        ({"subtype": "error_max_turns", "is_error": True}, "max_turns", False),
        ({"subtype": "error_max_budget_usd", "is_error": True}, "max_budget_usd", False),
        ({"subtype": "error_max_structured_output_retries"}, "structured_output", False),
        ({**_ERR, "api_error": "connection_failed"}, "api_error", True),
        ({**_ERR, "api_error": "overloaded"}, "api_error", True),
        ({**_ERR, "api_error": "invalid_request"}, "api_error", False),
        ({"subtype": "error_during_execution", "is_error": True}, "other", False),
    ],
)
def test_failed_results_map_to_reasons(
    result: dict[str, Any], reason: str, retryable: bool
) -> None:
    message = {"type": "result", "result": "DETAIL-CANARY", "total_cost_usd": 0.5, **result}
    usage, failed = ClaudeDecoder(partial=False).decode(message)
    assert isinstance(usage, UsageUpdated)
    assert usage.usage.cost_usd == 0.5
    assert isinstance(failed, TurnFailed)
    assert (failed.reason, failed.retryable) == (reason, retryable)
    assert "DETAIL-CANARY" in failed.message


def test_recorded_stream_with_a_tool_call() -> None:
    decoder = ClaudeDecoder(partial=False, options={"on_event": None, "colour": "red"})
    lines = (SAMPLES / "claude-p-stream-json.jsonl").read_text().splitlines()
    events = _decode(decoder, [json.loads(line) for line in lines])
    assert [e.type for e in events] == [
        "notice",
        "session",
        "model-call",
        "tool-call-started",
        "tool-call-finished",
        "model-call",
        "text-delta",
        "usage",
        "turn-completed",
    ]
    notice, session, _, call, result, *_, usage, done = events
    assert isinstance(notice, Notice)
    assert "colour" in notice.message
    assert session == SessionStarted(session_id="22222222-3333-4444-8555-666666666666")
    assert isinstance(call, ToolCallStarted)
    assert call.name == "Bash"
    assert isinstance(result, ToolCallFinished)
    assert (result.name, result.output, result.is_error) == ("Bash", "tool-ran", False)
    assert isinstance(usage, UsageUpdated)
    assert (usage.usage.input_tokens, usage.usage.output_tokens) == (20, 10)
    assert usage.usage.cost_usd is not None
    assert isinstance(done, TurnCompleted)
    assert done.stop_reason == "end_turn"
    assert done.metadata["model"]
    assert done.metadata["api_key_source"]


def test_partial_stream_text_comes_from_deltas_once() -> None:
    lines = (SAMPLES / "claude-resume-partial-messages.jsonl").read_text().splitlines()
    messages = [json.loads(line) for line in lines]
    partial = _decode(ClaudeDecoder(partial=True), messages)
    whole = _decode(ClaudeDecoder(partial=False), messages)
    for events in (partial, whole):
        texts = [e.text for e in events if isinstance(e, TextDelta)]
        assert texts == ["hello from fake (call 57, 6 msgs)"]
        assert sum(isinstance(e, ModelCallStarted) for e in events) == 1
    # in partial mode the delta arrives before the assistant message that repeats it
    kinds = [e.type for e in partial]
    assert kinds.index("text-delta") < kinds.index("model-call")


def test_subagent_messages_are_not_the_turns_own() -> None:
    sub = {
        "type": "assistant",
        "parent_tool_use_id": "toolu_1",
        "message": {"id": "m2", "content": [{"type": "tool_use", "id": "t", "name": "Read"}]},
    }
    assert ClaudeDecoder(partial=False).decode(sub) == []


def test_the_bundled_cli_found_by_spec_is_the_one_the_wheel_lists() -> None:
    """The quick lookup (``find_spec``, no importlib.metadata) agrees with the wheel's RECORD."""
    import importlib.metadata

    from jigs_harness_claude._executable import _bundled_by_spec

    listed = [
        Path(str(f.locate())).resolve()
        for f in importlib.metadata.files("claude-agent-sdk") or ()
        if f.name == "claude" and f.parent.name == "_bundled"
    ]
    assert listed
    assert _bundled_by_spec() == listed[0]
