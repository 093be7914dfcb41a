"""The ``opencode`` descriptor: a model behind an OpenAI-compatible endpoint, and data options.

jigs writes opencode's whole configuration for each step (see :mod:`._config`): one provider
(``@ai-sdk/openai-compatible``) at ``base_url`` with the model ``model``, the key behind the
step's credential proxy. What a user may choose is data; what jigs decides (permissions,
providers, plugins, MCP from config files, sharing, updates, language servers, formatters) is
refused with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar, Literal

from jigs.descriptors import HarnessDescriptor, LimitEnforcer, ModelEndpointFields
from pydantic import Field

__all__ = ["OpencodeDescriptor"]

_TOOL_NAME = r"^[A-Za-z0-9_*-]{1,64}$"


class OpencodeDescriptor(ModelEndpointFields, HarnessDescriptor):
    """Settings of the ``opencode`` kind (``opencode run --format json``)."""

    #: ``max_turns`` is counted by the core from opencode's ``step_start`` events.
    limits: ClassVar[Mapping[str, LimitEnforcer]] = {"max_turns": "core"}
    unsupported_limit_reason: ClassVar[str] = (
        "opencode reports a cost only for models with a price in its catalogue, which jigs "
        "keeps offline"
    )
    policy_keys: ClassVar[Mapping[str, str]] = {
        "permission": "unattended runs approve what the descriptor leaves enabled (--auto); "
        "turn a tool off with disabled_tools",
        "provider": "jigs writes the one provider, from base_url, model and api_key_env",
        "plugin": "plugins could bring unprobed MCP servers, hooks or env",
        "mcp": "declare MCP servers in mcp_servers (the step's whole MCP universe)",
        "share": "sessions are never shared: they stay in the run's state dir",
        "autoupdate": "the CLI is the one jigs resolved (`jigs install opencode` pins it)",
        "lsp": "language servers are programs jigs did not launch (and would be downloaded)",
        "formatter": "formatters are commands jigs did not launch",
        "small_model": "jigs runs no side request (the session title is set, never generated)",
        "agent": "jigs runs opencode's build agent; choose the model and tools here",
    }

    kind: Literal["opencode"] = "opencode"
    #: The model id at the endpoint (sent as ``model`` in each Chat Completions request).
    model: Annotated[str, Field(min_length=1, max_length=200)] = "gpt-5-mini"
    #: The OpenAI-compatible endpoint (``api_key_env`` names the variable holding its key).
    base_url: str | None = "https://api.openai.com/v1"
    #: Extra instructions appended to opencode's system prompt, one text each (written to
    #: private files and given to opencode as its ``instructions``).
    instructions: tuple[str, ...] = ()
    #: opencode tools the agent may not use (``bash``, ``webfetch``, ...; ``*`` patterns).
    disabled_tools: tuple[Annotated[str, Field(pattern=_TOOL_NAME)], ...] = ()
    #: Sampling temperature for the model (None: the provider's default).
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    #: The model's context window and largest answer, in tokens (opencode compacts by them).
    context_tokens: Annotated[int, Field(ge=1024)] = 128_000
    output_tokens: Annotated[int, Field(ge=1)] = 16_384

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.base_url is None:
            raise ValueError("base_url: the opencode kind needs the endpoint's base URL")

    def model_id(self) -> str | None:
        return self.model
