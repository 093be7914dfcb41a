"""The command line and environment of one Claude Code turn: jigs' policy as flags.

Policy that every launch carries, whatever the descriptor says:

- ``--permission-mode bypassPermissions``: unattended runs never prompt;
- ``--strict-mcp-config --mcp-config <the step's servers>``: the step's list is the whole MCP
  universe (nothing from ``~/.claude.json``, plugins or the worktree's ``.mcp.json``);
- ``--setting-sources ""``: no settings file is read, neither the user's nor the worktree's
  (``.claude/settings*.json`` could run hooks and ``apiKeyHelper``, inject ``env``, redirect
  ``ANTHROPIC_BASE_URL`` with the key, change ``permissions``); the worktree's ``CLAUDE.md``
  (content, not policy) still loads through ``--add-dir .`` with
  ``CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD=1``;
- ``-p ... --output-format stream-json --verbose``; the prompt after ``--`` (or, when too long for
  one argument, on stdin; or, with a tool-approval callback, as a stream-json user message);
- a fresh turn names its session (``--session-id <uuid>``), a later one continues it
  (``--resume=<id>``);
- the environment is exactly the core-built one plus ``CLAUDE_CODE_ENTRYPOINT``,
  ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` (no telemetry, update checks or other calls
  home), a bounded ``CLAUDE_CODE_MAX_RETRIES``, and for a descriptor key ``ANTHROPIC_BASE_URL``
  set to the step's credential proxy (``ctx.model_endpoint``), the proxy's placeholder in
  ``ANTHROPIC_API_KEY`` (or ``ANTHROPIC_AUTH_TOKEN`` for a bearer gateway), and
  ``CLAUDE_CODE_SHELL_PREFIX`` naming the script that removes those variables from the agent's
  commands and MCP servers (see :mod:`._shell`; with the proxy it hides only the placeholder).
  The real key is never read here: the core keeps it in the worker.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jigs.errors import DescriptorError, InvalidInputError
from jigs.plugin import ModelEndpoint, TurnLaunch, TurnSpec, private_file

from jigs_harness_claude._approval import ApprovalDriver
from jigs_harness_claude._control import StreamInput
from jigs_harness_claude._descriptor import ClaudeDescriptor
from jigs_harness_claude._mcp import disallowed_mcp_tools
from jigs_harness_claude._shell import PREFIX_VAR, SHELL_VAR, shell_env

__all__ = ["ENTRYPOINT", "MAX_ARG", "SETS_ENV", "Prepared", "build_env", "launch"]

#: What Claude Code is told about its host (the value the Python Agent SDK uses).
ENTRYPOINT = "sdk-py"
#: Texts longer than this (bytes) leave the command line: Linux caps one argument at 128 KiB.
MAX_ARG = 100_000

#: Loads ``CLAUDE.md`` from ``--add-dir`` directories (the worktree is one: ``--add-dir .``).
CLAUDE_MD_VAR = "CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD"

#: Every variable a launch sets itself (refused in ``agents.env``).
SETS_ENV = frozenset(
    {
        CLAUDE_MD_VAR,
        SHELL_VAR,
        "CLAUDE_CODE_ENTRYPOINT",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "CLAUDE_CODE_MAX_RETRIES",
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        PREFIX_VAR,
    }
)


@dataclass(frozen=True)
class Prepared:
    """What :meth:`ClaudeHarness.prepare` made once per step: the CLI, the MCP config (a JSON
    string or a 0600 file), the shell prefix (with a descriptor key), the private dir (0700,
    removed when the step closes) for texts too long for the command line, and the step's
    proxied model endpoint (with a descriptor key)."""

    executable: Path
    mcp_config: str
    shell_prefix: Path | None
    private: Path
    endpoint: ModelEndpoint | None = None
    #: The step's skills as a private plugin (``--plugin-dir``), when the descriptor has any.
    plugin_dir: Path | None = None


def build_env(
    descriptor: ClaudeDescriptor,
    *,
    endpoint: ModelEndpoint | None = None,
    max_output_tokens: int | None = None,
    shell_prefix: Path | None = None,
) -> dict[str, str]:
    """The variables jigs adds to the agent's environment (built by the core from empty).

    With a descriptor key, ``endpoint`` (the step's credential proxy, ``ctx.model_endpoint``)
    gives ``ANTHROPIC_BASE_URL`` and the placeholder key, and ``shell_prefix`` (the script from
    :func:`~._shell.write_shell_prefix`) keeps even the placeholder out of the agent's commands.
    Raises :class:`DescriptorError` when either is missing: the real key is never a fallback.
    """
    env = {
        "CLAUDE_CODE_ENTRYPOINT": ENTRYPOINT,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": str(descriptor.max_retries),
        CLAUDE_MD_VAR: "1",
    }
    if max_output_tokens is not None:
        env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(max_output_tokens)
    if shell_prefix is not None:
        # the agent's commands and MCP servers run through jigs' shell scripts: no rc or profile
        # file is read, and a named key is removed from their environment
        env.update(shell_env(shell_prefix))
    name = descriptor.api_key_env
    if name is not None:
        if endpoint is None or shell_prefix is None:
            raise DescriptorError(
                f"the claude descriptor names {name} for its model key, but the step has no "
                f"proxied model endpoint; run the step through jigs (run_agent or "
                f"create_agent_runner), which starts the credential proxy",
                kind="claude",
                key="api_key_env",
            )
        env["ANTHROPIC_BASE_URL"] = endpoint.base_url
        env[
            "ANTHROPIC_AUTH_TOKEN" if descriptor.api_key_header == "bearer" else "ANTHROPIC_API_KEY"
        ] = endpoint.key
    return env


def user_content(turn: TurnSpec[ClaudeDescriptor]) -> str | list[dict[str, Any]]:
    """The turn's user message content: the prompt, then each image as a base64 image block
    (read from the step's private copy: the bytes travel only on the CLI's stdin)."""
    if not turn.images:
        return turn.prompt
    blocks: list[dict[str, Any]] = [{"type": "text", "text": turn.prompt}]
    for image in turn.images:
        data = base64.b64encode(image.path.read_bytes()).decode()
        source = {"type": "base64", "media_type": image.media_type, "data": data}
        blocks.append({"type": "image", "source": source})
    return blocks


def launch(turn: TurnSpec[ClaudeDescriptor], prepared: Prepared) -> TurnLaunch:
    """One turn's :class:`TurnLaunch`. A tool gate (``turn.gate``) switches to stream-json
    input with the approval driver (see :mod:`._approval`); images in the prompt to stream-json
    input with one user message of content blocks."""
    gate = turn.gate
    # a step's turn reads stream-json input, so the step can interrupt and steer it; an ask
    # (tool-free, no runner, no images) keeps the prompt on the command line
    streamed = gate is not None or bool(turn.images) or not turn.tool_free
    argv = [
        *_policy_args(turn, prepared, streamed_input=streamed),
        *_session_args(turn),
        *_descriptor_args(turn.descriptor, tool_free=turn.tool_free),
        *_system_args(turn, prepared),
    ]
    env = build_env(
        turn.descriptor,
        endpoint=prepared.endpoint,
        max_output_tokens=turn.max_output_tokens,
        shell_prefix=prepared.shell_prefix,
    )
    if gate is not None:
        return TurnLaunch(argv, env, driver=ApprovalDriver(gate, user_content(turn)))
    if streamed:
        return TurnLaunch(argv, env, driver=StreamInput(user_content(turn)))
    encoded = turn.prompt.encode("utf-8")
    if len(encoded) > MAX_ARG:
        return TurnLaunch(argv, env, stdin=encoded)
    # "--" ends the options, so a prompt that starts with "-" is never read as a flag
    return TurnLaunch([*argv, "--", turn.prompt], env)


def _policy_args(
    turn: TurnSpec[ClaudeDescriptor], prepared: Prepared, *, streamed_input: bool
) -> list[str]:
    """The CLI in print mode with stream-json output, and jigs' policy: no prompts, the step's
    MCP servers only, no settings file."""
    argv = [str(prepared.executable), "-p", "--output-format", "stream-json", "--verbose"]
    if turn.partial:
        argv.append("--include-partial-messages")
    if streamed_input:
        argv += ["--input-format", "stream-json"]
    return [
        *argv,
        "--permission-mode",
        "bypassPermissions",
        "--strict-mcp-config",
        "--mcp-config",
        prepared.mcp_config,
        # no settings file at all: the worktree's could redirect the endpoint (with the key),
        # run hooks or apiKeyHelper, inject env or change permissions
        "--setting-sources",
        "",
        *(["--plugin-dir", str(prepared.plugin_dir)] if prepared.plugin_dir else []),
    ]


def _session_args(turn: TurnSpec[ClaudeDescriptor]) -> list[str]:
    """A fresh session's id, or the resumed one (forked when the turn says so); a tool-free
    turn (an ask) writes no transcript: nothing resumes it."""
    if turn.tool_free:
        return ["--session-id", str(uuid.uuid4()), "--no-session-persistence"]
    if turn.session_id is None:
        return ["--session-id", str(uuid.uuid4())]
    if turn.fork:
        # a copy under a new id: the resumed transcript stays as its ref names it
        return [f"--resume={turn.session_id}", "--fork-session"]
    return [f"--resume={turn.session_id}"]


def _descriptor_args(d: ClaudeDescriptor, *, tool_free: bool = False) -> list[str]:
    """The descriptor's flags: model, effort, budgets, tools, directories, betas. A tool-free
    turn gets no tool (``--tools ""``: none of Claude Code's built-in tools; the step's MCP
    config is empty, the core refuses servers), no extra directory and no slash command."""
    if tool_free:
        d = d.model_copy(
            update={
                "tools": (),
                "allowed_tools": (),
                "additional_directories": (),
                "disable_slash_commands": True,
            }
        )
    argv: list[str] = []
    _value(argv, "--model", d.model)
    _value(argv, "--fallback-model", d.fallback_model)
    _value(argv, "--effort", d.effort)
    _value(argv, "--max-turns", d.max_turns)
    _value(argv, "--max-budget-usd", None if d.max_budget_usd is None else repr(d.max_budget_usd))
    _value(argv, "--autocompact", d.autocompact)
    _value(argv, "--name", d.name)
    _value(argv, "--system-prompt-snapshot", d.system_prompt_snapshot)
    _value(argv, "--tools", None if d.tools is None else ",".join(d.tools))
    _variadic(argv, "--allowedTools", d.allowed_tools)
    _variadic(
        argv, "--disallowedTools", [*d.disallowed_tools, *disallowed_mcp_tools(d.mcp_servers)]
    )
    # "." (the worktree) first: its CLAUDE.md loads through CLAUDE_MD_VAR, its settings never
    _variadic(argv, "--add-dir", [".", *d.additional_directories])
    _variadic(argv, "--betas", d.betas)
    if d.exclude_dynamic_system_prompt_sections:
        argv.append("--exclude-dynamic-system-prompt-sections")
    if d.disable_slash_commands:
        argv.append("--disable-slash-commands")
    return argv


def _system_args(turn: TurnSpec[ClaudeDescriptor], prepared: Prepared) -> list[str]:
    """The system prompt, the appended one (the descriptor's, then the call's ``system``) and
    the output schema; texts too long for one argument go to files in the private dir."""
    d = turn.descriptor
    argv: list[str] = []
    _text(argv, "--system-prompt", d.system_prompt, prepared.private)
    if turn.system and "\x00" in turn.system:
        raise InvalidInputError(
            "the call's system text holds a NUL byte, which no command line can carry; remove it",
            argument="system",
        )
    appended = "\n\n".join(p for p in (d.append_system_prompt, turn.system) if p)
    _text(argv, "--append-system-prompt", appended or None, prepared.private)
    if turn.output_schema is not None:
        _text(argv, "--json-schema", json.dumps(turn.output_schema, separators=(",", ":")), None)
    return argv


def _value(argv: list[str], flag: str, value: object) -> None:
    # "--flag=value": a value that starts with "-" is never read as another flag
    if value is not None:
        argv.append(f"{flag}={value}")


def _variadic(argv: list[str], flag: str, values: Sequence[str]) -> None:
    if values:
        argv += [flag, *values]


def _text(argv: list[str], flag: str, text: str | None, private: Path | None) -> None:
    """A text flag; a text too long for one argument goes through ``<flag>-file``."""
    if text is None:
        return
    if private is None or len(text.encode("utf-8")) <= MAX_ARG:
        _value(argv, flag, text)
        return
    path = private_file(private / f"{flag.strip('-')}-{uuid.uuid4().hex[:8]}.txt", text.encode())
    _value(argv, f"{flag}-file", path)
