"""The claude descriptor: Claude Code's own settings minus what jigs holds as policy.

Plain, frozen, JSON-serialisable data. It holds no secret: an Anthropic-compatible endpoint is a
``base_url`` plus the *name* of the step-side variable that holds its key (``api_key_env``); the
value is read from the host environment when the CLI is launched and never stored.

Every key maps to one ``claude`` flag or variable (see :mod:`._launch`). ``max_turns`` and
``max_budget_usd`` (base keys) are enforced by Claude Code itself (``--max-turns``,
``--max-budget-usd``); ``turn_timeout`` / ``idle_timeout`` by the core.
"""

import math
from collections.abc import Mapping
from typing import Annotated, ClassVar, Literal

from jigs.descriptors import HarnessDescriptor, LimitEnforcer, ModelEndpointFields
from jigs.plugin.tools import check_skill_path, skills_digest
from pydantic import Field

__all__ = ["ClaudeDescriptor", "Effort"]

Effort = Literal["low", "medium", "high", "xhigh", "max"]

_AGENTS = "custom agents could bring unprobed MCP servers, hooks or env"
_PERMISSIONS = "unattended runs bypass permission prompts as policy"
_CLAUDE_POLICY_KEYS: Mapping[str, str] = {
    "mcp_config": "the step's mcp_servers are the whole MCP universe, as policy",
    "dangerously_skip_permissions": _PERMISSIONS,
    "allow_dangerously_skip_permissions": _PERMISSIONS,
    "permission_prompts": _PERMISSIONS,
    "permission_prompt_tool": _PERMISSIONS,
    "restricted": "restricted mode refuses bypassPermissions, which unattended runs use as policy",
    "agents": _AGENTS,
    "agent": "a named agent's definition could bring unprobed MCP servers, hooks or env",
    "plugin_dirs": "plugins could bring unprobed MCP servers, hooks or env",
    "plugin_dir": "plugins could bring unprobed MCP servers, hooks or env",
    "plugin_url": "plugins could bring unprobed MCP servers, hooks or env",
    "output_format": "jigs reads Claude Code's stream-json output itself",
    "input_format": "jigs drives Claude Code's input itself",
    "include_partial_messages": "jigs asks for partial messages on streamed calls itself",
    "json_schema": "pass output= (or a schema) to the step; jigs hands it to Claude Code",
    "no_session_persistence": "jigs resumes sessions from their transcripts",
    "bare": "bare mode changes how Claude Code authenticates and skips project settings",
    "config_dir": "jigs uses the operator's Claude Code config (CLAUDE_CONFIG_DIR or ~/.claude)",
    "base_url_env": "set base_url on the descriptor (an address is not a secret)",
    "debug_file": "a debug log could record the conversation outside jigs' control",
    "worktree": "jigs runs the agent in the step's worktree (pass cwd= to the step)",
}


class ClaudeDescriptor(ModelEndpointFields, HarnessDescriptor):
    """Settings of a Claude Code step.

    ``model`` is passed as ``--model`` (an alias such as ``"sonnet"`` or a full name; None keeps
    Claude Code's default). Without ``base_url``/``api_key_env`` the operator's Claude Code login
    is used; with them, Claude Code talks to that Anthropic-compatible endpoint (a gateway, or
    the local test server) with the key read from the named variable at launch.
    """

    policy_keys: ClassVar[Mapping[str, str]] = _CLAUDE_POLICY_KEYS
    limits: ClassVar[Mapping[str, LimitEnforcer]] = {"max_turns": "cli", "max_budget_usd": "cli"}

    kind: Literal["claude"] = "claude"
    #: ``--model``.
    model: str | None = None
    #: ``--fallback-model``: models to fall back to when the main one is busy (comma-separated).
    fallback_model: str | None = None
    #: ``--effort``.
    effort: Effort | None = None
    #: Anthropic-compatible endpoint (``https://gateway.example/anthropic``); needs ``api_key_env``.
    base_url: Annotated[str, Field(pattern=r"^https?://[^\s@]+$")] | None = None
    #: The *name* of the step-side variable that holds the key for the endpoint (or for the
    #: Anthropic API itself when ``base_url`` is not set).
    #: How the key is sent: ``x-api-key`` (``ANTHROPIC_API_KEY``) or a bearer token
    #: (``ANTHROPIC_AUTH_TOKEN``, what most gateways expect).
    api_key_header: Literal["x-api-key", "bearer"] = "x-api-key"
    #: Retries of a failed model request (Claude Code's own default would retry for minutes).
    max_retries: Annotated[int, Field(ge=0, le=10)] = 2
    #: ``--allowedTools`` / ``--disallowedTools`` rules (``"Bash(git *)"``).
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    #: ``--tools``: built-in tools offered at all (None: Claude Code's default set; () : none).
    tools: tuple[str, ...] | None = None
    #: ``--system-prompt``: replaces Claude Code's system prompt.
    system_prompt: str | None = None
    #: ``--append-system-prompt``: added to the end of the system prompt.
    append_system_prompt: str | None = None
    #: ``--add-dir``: more directories the agent's tools may use.
    additional_directories: tuple[str, ...] = ()
    #: ``--betas``: beta headers sent with every model request (API key users only).
    betas: tuple[str, ...] = ()
    #: ``--autocompact``: ``"auto"`` or a window of at least 100k tokens.
    autocompact: Literal["auto"] | int | None = None
    #: ``--name``: the session's display name (``claude --resume`` lists it).
    name: str | None = None
    #: ``--system-prompt-snapshot``.
    system_prompt_snapshot: Literal["on", "off"] | None = None
    #: ``--exclude-dynamic-system-prompt-sections``.
    exclude_dynamic_system_prompt_sections: bool = False
    #: ``--disable-slash-commands``: no skills or custom commands.
    disable_slash_commands: bool = False
    #: Skills the agent may load: absolute paths, each a directory with ``SKILL.md`` or one
    #: ``.md`` file, copied into the step's private plugin (``--plugin-dir``); nothing of
    #: ``~/.claude`` or the worktree's ``.claude/skills`` is loaded. Their contents are part of
    #: :meth:`describe`.
    skills: tuple[str, ...] = ()

    def model_id(self) -> str | None:
        return self.model

    def content_digests(self) -> dict[str, str]:
        return {"skills": skills_digest(self.skills)} if self.skills else {}

    def __post_init__(self) -> None:
        super().__post_init__()  # the endpoint part's shared rules (api_key_env, base_url)
        for skill in self.skills:
            check_skill_path(skill, "skills")
        flags = ("allowed_tools", "disallowed_tools", "tools", "additional_directories", "betas")
        for key in flags:
            for item in getattr(self, key) or ():
                if item.startswith("-") or "\x00" in item:
                    raise ValueError(
                        f"{key}: {item[:40]!r} starts with '-' or holds a NUL byte, so Claude "
                        f"Code would read it as a flag (write a directory as ./{item[:20]})"
                    )
        for key in ("model", "fallback_model", "system_prompt", "append_system_prompt", "name"):
            value = getattr(self, key)
            if value is not None and "\x00" in value:
                raise ValueError(f"{key}: a NUL byte cannot be passed to Claude Code; remove it")
        if self.max_budget_usd is not None and not math.isfinite(self.max_budget_usd):
            raise ValueError(
                "max_budget_usd: Claude Code needs a finite budget; leave max_budget_usd unset"
            )
        if isinstance(self.autocompact, int) and self.autocompact < 100_000:
            raise ValueError("autocompact: must be 'auto' or at least 100000 tokens")
        if self.base_url is not None and self.api_key_env is None:
            raise ValueError(
                "base_url needs api_key_env: name the variable that holds the endpoint's key"
            )
