"""The claude descriptor: Claude Code's own settings minus what jigs holds as policy.

Plain, frozen, JSON-serialisable data. It holds no secret: an Anthropic-compatible endpoint is a
``base_url`` plus the *name* of the step-side variable that holds its key (``api_key_env``); the
value is read from the host environment when the CLI is launched and never stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from jigs._secrets import check_env_name, check_url
from jigs.descriptors import HarnessDescriptor
from pydantic import Field, field_validator, model_validator

__all__ = ["ClaudeDescriptor", "Effort"]

Effort = Literal["low", "medium", "high", "xhigh", "max"]

_CLAUDE_POLICY_KEYS: Mapping[str, str] = {
    "mcp_config": "the step's mcp_servers are the whole MCP universe, as policy",
    "dangerously_skip_permissions": "unattended runs bypass permission prompts as policy",
    "allow_dangerously_skip_permissions": "unattended runs bypass permission prompts as policy",
    "agents": "custom agents could bring unprobed MCP servers, hooks or env",
    "plugin_dirs": "plugins could bring unprobed MCP servers, hooks or env",
    "output_format": "jigs reads Claude Code's stream-json output itself",
    "input_format": "jigs drives Claude Code's input itself",
    "bare": "bare mode changes how Claude Code authenticates and skips project settings",
    "config_dir": "jigs uses the operator's Claude Code config (CLAUDE_CONFIG_DIR or ~/.claude)",
    "base_url_env": "set base_url on the descriptor (an address is not a secret)",
}


class ClaudeDescriptor(HarnessDescriptor):
    """Settings of a Claude Code step.

    ``model`` is passed as ``--model`` (an alias such as ``"sonnet"`` or a full name; None keeps
    Claude Code's default). Without ``base_url``/``api_key_env`` the operator's Claude Code login
    is used; with them, Claude Code talks to that Anthropic-compatible endpoint (a gateway, or
    the local test server) with the key read from the named variable at launch.
    """

    policy_keys: ClassVar[Mapping[str, str]] = _CLAUDE_POLICY_KEYS

    kind: Literal["claude"] = "claude"
    model: str | None = None
    fallback_model: str | None = None
    effort: Effort | None = None
    #: Anthropic-compatible endpoint (``https://gateway.example/anthropic``); needs ``api_key_env``.
    base_url: str | None = Field(default=None, pattern=r"^https?://[^\s@]+$")
    #: The *name* of the step-side variable that holds the key for the endpoint (or for the
    #: Anthropic API itself when ``base_url`` is not set).
    api_key_env: str | None = None
    #: How the key is sent: ``x-api-key`` (``ANTHROPIC_API_KEY``) or a bearer token
    #: (``ANTHROPIC_AUTH_TOKEN``, what most gateways expect).
    api_key_header: Literal["x-api-key", "bearer"] = "x-api-key"
    #: Retries of a failed model request (Claude Code's own default would retry for minutes).
    max_retries: int = Field(default=2, ge=0, le=10)
    #: Seconds one turn may take before jigs stops it (None: no limit; cancel the step instead).
    turn_timeout: float | None = Field(default=None, gt=0)
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    #: Built-in tools offered at all (None: Claude Code's default set; () : none).
    tools: tuple[str, ...] | None = None
    append_system_prompt: str | None = None
    max_budget_usd: float | None = Field(default=None, gt=0)
    additional_directories: tuple[str, ...] = ()

    @field_validator("api_key_env")
    @classmethod
    def _key_is_a_name(cls, value: str | None) -> str | None:
        # the shared rule: the secret-shape test first, the value never echoed
        return None if value is None else check_env_name(value, "api_key_env")

    @field_validator("base_url")
    @classmethod
    def _url_without_credentials(cls, value: str | None) -> str | None:
        return None if value is None else check_url(value, "base_url")

    @model_validator(mode="after")
    def _endpoint_has_key(self) -> ClaudeDescriptor:
        if self.base_url is not None and self.api_key_env is None:
            raise ValueError(
                "base_url needs api_key_env: name the variable that holds the endpoint's key"
            )
        return self
