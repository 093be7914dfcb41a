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
- ``-p ... --output-format stream-json --verbose`` with stdin closed (or, for a prompt too long for
  one argument, the prompt written to stdin and stdin closed);
- the environment is exactly the core-built one plus ``CLAUDE_CODE_ENTRYPOINT``,
  ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` (no telemetry, update checks or other calls
  home), a bounded ``CLAUDE_CODE_MAX_RETRIES``, and for a descriptor endpoint
  ``ANTHROPIC_BASE_URL``, the key copied from the variable the descriptor names, and
  ``CLAUDE_CODE_SHELL_PREFIX`` naming the script that removes the key from the environment of the
  agent's commands and MCP servers (see :mod:`._shell`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jigs._secrets import remember
from jigs.errors import JigsError

from jigs_harness_claude._descriptor import ClaudeDescriptor
from jigs_harness_claude._mcp import disallowed_mcp_tools
from jigs_harness_claude._shell import PREFIX_VAR, SHELL_VAR, shell_env

__all__ = ["ENTRYPOINT", "MAX_PROMPT_ARG", "SETS_ENV", "Launch", "build_argv", "build_env"]

#: What Claude Code is told about its host (the value the Python Agent SDK uses).
ENTRYPOINT = "sdk-py"
#: Prompts longer than this (bytes) go through stdin: Linux caps one argument at 128 KiB.
MAX_PROMPT_ARG = 100_000

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


@dataclass(frozen=True, slots=True)
class Launch:
    """One turn's argv, and the prompt bytes to write to stdin (None: stdin closed)."""

    argv: list[str]
    stdin_prompt: bytes | None


def build_env(
    descriptor: ClaudeDescriptor,
    agent_env: Mapping[str, str],
    *,
    host_env: Mapping[str, str] | None = None,
    max_output_tokens: int | None = None,
    shell_prefix: Path | None = None,
) -> dict[str, str]:
    """The CLI's environment: ``agent_env`` (built by the core from empty) plus what jigs sets.

    The endpoint key is read from ``host_env`` (default ``os.environ``) by the name the
    descriptor gives, at launch; it is never stored. ``shell_prefix`` (the script from
    :func:`~._shell.write_shell_prefix`) is required with a key, so the key never reaches the
    agent's commands. Raises :class:`JigsError` when the key variable is not set, ValueError
    when a key is named and no ``shell_prefix`` is given.
    """
    host = os.environ if host_env is None else host_env
    env = dict(agent_env)
    env["CLAUDE_CODE_ENTRYPOINT"] = ENTRYPOINT
    env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
    env["CLAUDE_CODE_MAX_RETRIES"] = str(descriptor.max_retries)
    env[CLAUDE_MD_VAR] = "1"
    if max_output_tokens is not None:
        env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(max_output_tokens)
    if descriptor.api_key_env is not None:
        key = host.get(descriptor.api_key_env)
        if not key:
            raise JigsError(
                f"the claude descriptor names {descriptor.api_key_env} for its model key, but "
                f"it is not set in the step's environment; set it where the service runs"
            )
        if shell_prefix is None:
            raise ValueError("a descriptor with api_key_env needs a shell_prefix")
        remember([key])  # read here, not through the core's build_env: register it for redaction
        env.update(shell_env(shell_prefix))
        if descriptor.base_url is not None:
            env["ANTHROPIC_BASE_URL"] = descriptor.base_url
        if descriptor.api_key_header == "bearer":
            env["ANTHROPIC_AUTH_TOKEN"] = key
        else:
            env["ANTHROPIC_API_KEY"] = key
    return env


def build_argv(
    executable: Path,
    descriptor: ClaudeDescriptor,
    *,
    prompt: str,
    mcp_config: str,
    session_id: str | None = None,
    resume_id: str | None = None,
    partial: bool = False,
    output_schema: Mapping[str, Any] | None = None,
    system: str | None = None,
    stream_input: bool = False,
) -> Launch:
    """The command line of one turn. ``mcp_config`` is a JSON string or a file path; exactly one
    of ``session_id`` (a fresh session with this id) and ``resume_id`` is given. With
    ``stream_input`` the prompt is not on the command line: the caller speaks stream-json on
    stdin (the tool-approval bridge)."""
    if (session_id is None) == (resume_id is None):
        raise ValueError("give exactly one of session_id and resume_id")
    argv = [str(executable), "-p", "--output-format", "stream-json", "--verbose"]
    if partial:
        argv.append("--include-partial-messages")
    if stream_input:
        argv += ["--input-format", "stream-json"]
    argv += [
        "--permission-mode",
        "bypassPermissions",
        "--strict-mcp-config",
        "--mcp-config",
        mcp_config,
        # no settings file at all: the worktree's could redirect the endpoint (with the key),
        # run hooks or apiKeyHelper, inject env or change permissions
        "--setting-sources",
        "",
    ]
    argv += (
        [f"--resume={resume_id}"] if resume_id is not None else ["--session-id", str(session_id)]
    )
    d = descriptor
    if d.model:
        argv += ["--model", d.model]
    if d.fallback_model:
        argv += ["--fallback-model", d.fallback_model]
    if d.effort:
        argv += ["--effort", d.effort]
    if d.max_budget_usd is not None:
        argv += ["--max-budget-usd", repr(d.max_budget_usd)]
    if d.tools is not None:
        argv += ["--tools", ",".join(d.tools)]
    _variadic(argv, "--allowedTools", d.allowed_tools)
    _variadic(
        argv, "--disallowedTools", [*d.disallowed_tools, *disallowed_mcp_tools(d.mcp_servers)]
    )
    # "." (the worktree) first: its CLAUDE.md loads through CLAUDE_MD_VAR, its settings never
    _variadic(argv, "--add-dir", [".", *d.additional_directories])
    appended = "\n\n".join(p for p in (d.append_system_prompt, system) if p)
    if appended:
        argv += ["--append-system-prompt", appended]
    if output_schema is not None:
        argv += ["--json-schema", json.dumps(output_schema, separators=(",", ":"))]
    if stream_input:
        return Launch(argv, None)
    encoded = prompt.encode("utf-8")
    if len(encoded) > MAX_PROMPT_ARG:
        return Launch(argv, encoded)
    # "--" ends the options, so a prompt that starts with "-" is never read as a flag
    return Launch([*argv, "--", prompt], None)


def _variadic(argv: list[str], flag: str, values: Sequence[str]) -> None:
    if values:
        argv += [flag, *values]
