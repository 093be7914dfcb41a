"""The ``pi`` descriptor and its model sources: plain data, credentials named by variable.

A Pi descriptor says which model endpoint Pi talks to (:class:`OpenAICompatible`,
:class:`AnthropicCompatible` or :class:`OpenRouter`, with optional :class:`ModelPrice` so Pi
reports a cost), and Pi's data-valued options: thinking level, tool allow- and denylists, built-in
tools, system prompt and appended system prompts, skills, prompt templates, session name,
retries and context-file discovery. It never holds a key: ``api_key_env`` names the step-side
variable, and the generated ``models.json`` refers to that name (``"$NAME"``), never its value.
Pi enforces no limit itself; ``max_turns`` and ``max_budget_usd`` are counted by the core from
the turn's events (model requests, and the cost Pi computes from the model's prices).

``mcp_servers`` (stdio or HTTP, credentials by variable name) run through Pi's built-in MCP
support; they are the agent's whole MCP universe (see :mod:`jigs_harness_pi._mcp`).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from jigs._safe_model import SafeModel
from jigs._secrets import check_env_name, check_url, shown
from jigs.descriptors import HarnessDescriptor
from pydantic import AfterValidator, Field, field_validator

__all__ = [
    "AnthropicCompatible",
    "ModelPrice",
    "ModelSource",
    "OpenAICompatible",
    "OpenRouter",
    "PiDescriptor",
    "ThinkingLevel",
]

ThinkingLevel = Literal["off", "minimal", "low", "medium", "high", "xhigh", "max"]

_PROVIDER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_*+-][A-Za-z0-9_.*:-]{0,127}$")
#: Provider ids Pi ships; a custom endpoint must not silently change one of them.
_BUILTIN_PROVIDERS = frozenset(
    {"anthropic", "openai", "openrouter", "google", "openai-codex", "groq", "xai", "mistral"}
)
#: A compat hint is a flat value (Pi's ``compat`` fields are booleans, strings and numbers).
CompatValue = bool | int | float | str


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain a NUL byte (no command line can carry one)")
    return value


#: Text that goes to Pi's command line or into a file Pi reads.
Text = Annotated[str, Field(min_length=1, max_length=1_000_000), AfterValidator(_no_nul)]
#: A short name (the session's display name).
Name = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_no_nul)]
#: A path (skill, prompt template) Pi loads; relative paths are read from the worktree.
PathText = Annotated[str, Field(min_length=1, max_length=4096), AfterValidator(_no_nul)]


def _env_name(value: str, where: str) -> str:
    # the shared rule: the secret-shape test first, the value never echoed
    return check_env_name(value, where)


class ModelPrice(SafeModel):
    """The model's price in USD per million tokens (Pi's ``models.json`` ``cost``), so Pi
    reports each turn's cost and ``max_budget_usd`` can stop a turn. Unset: cost 0."""

    input: float = Field(default=0.0, ge=0)
    output: float = Field(default=0.0, ge=0)
    cache_read: float = Field(default=0.0, ge=0)
    cache_write: float = Field(default=0.0, ge=0)


class _Source(SafeModel):
    """Built directly (``OpenAICompatible(...)``) or inside a descriptor, a refused value is
    never echoed: failures are :class:`~jigs.errors.DescriptorError` (see :class:`SafeModel`)."""

    #: The model id sent to the API.
    model: str = Field(min_length=1, max_length=200)
    #: Prices for Pi's cost figures; None: 0 (no cost reported, max_budget_usd never trips).
    price: ModelPrice | None = None

    def key_env(self) -> str | None:
        raise NotImplementedError


class _Endpoint(_Source):
    #: Pi's provider id for this endpoint (``--model <name>/<model>``).
    name: str = "jigs"
    #: The API base URL (``http(s)://...``), without credentials.
    base_url: str = Field(pattern=r"^https?://")
    #: The step-side variable holding the API key; None for endpoints without auth.
    api_key_env: str | None = None

    @field_validator("name")
    @classmethod
    def _provider_name(cls, value: str) -> str:
        if not _PROVIDER_NAME.fullmatch(value):
            raise ValueError(f"provider name {shown(value)} must match {_PROVIDER_NAME.pattern}")
        if value in _BUILTIN_PROVIDERS:
            raise ValueError(
                f"provider name {value!r} is one of Pi's built-in providers; choose another name"
            )
        return value

    @field_validator("api_key_env")
    @classmethod
    def _key_name(cls, value: str | None) -> str | None:
        return None if value is None else _env_name(value, "api_key_env")

    @field_validator("base_url")
    @classmethod
    def _no_userinfo(cls, value: str) -> str:
        return check_url(value, "base_url")

    def key_env(self) -> str | None:
        return self.api_key_env


class OpenAICompatible(_Endpoint):
    """An OpenAI-compatible endpoint (Chat Completions or Responses)."""

    type: Literal["openai-compatible"] = "openai-compatible"
    #: Which OpenAI wire format the endpoint speaks.
    api: Literal["chat-completions", "responses"] = "chat-completions"
    #: Pi ``compat`` hints (see Pi's models.json reference), e.g. ``{"supportsStore": False}``.
    compat: dict[str, CompatValue] = Field(default_factory=dict)
    context_window: int | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, gt=0)
    reasoning: bool = False


class AnthropicCompatible(_Endpoint):
    """An endpoint speaking the Anthropic Messages API."""

    type: Literal["anthropic-compatible"] = "anthropic-compatible"
    compat: dict[str, CompatValue] = Field(default_factory=dict)
    context_window: int | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, gt=0)
    reasoning: bool = False


class OpenRouter(_Source):
    """OpenRouter through Pi's built-in ``openrouter`` provider."""

    type: Literal["openrouter"] = "openrouter"
    api_key_env: str = "OPENROUTER_API_KEY"

    @field_validator("api_key_env")
    @classmethod
    def _key_name(cls, value: str) -> str:
        return _env_name(value, "api_key_env")

    def key_env(self) -> str | None:
        return self.api_key_env


ModelSource = Annotated[
    OpenAICompatible | AnthropicCompatible | OpenRouter, Field(discriminator="type")
]


class PiDescriptor(HarnessDescriptor):
    """Settings of the ``pi`` kind (Pi coding agent 1.x, run as ``pi --mode json``)."""

    supported_limits: ClassVar[frozenset[str]] = frozenset({"max_turns", "max_budget_usd"})

    policy_keys: ClassVar[dict[str, str]] = {
        "extensions": "extensions run code inside Pi and could bring tools, env or MCP servers "
        "from outside the step",
        "packages": "Pi packages could bring extensions, skills or MCP servers from outside "
        "the step",
        "approve": "project-local Pi files are ignored as policy (--no-approve)",
        "session_dir": "jigs keeps Pi sessions in the run's state directory",
        "agent_dir": "jigs gives each invocation a private PI_CODING_AGENT_DIR",
        "no_session": "jigs keeps every Pi session so a later step can resume it",
        "fork": "sessions are resumed with resume= on the step",
    }

    kind: Literal["pi"] = "pi"
    #: Where the model runs.
    model: ModelSource
    #: Pi's thinking level (``--thinking``); None keeps Pi's default for the model.
    thinking: ThinkingLevel | None = None
    #: Tool allowlist (``--tools``); None keeps Pi's defaults (read, bash, edit, write).
    tools: tuple[str, ...] | None = None
    #: Tool denylist (``--exclude-tools``), added to the MCP tools the step disables.
    exclude_tools: tuple[str, ...] = ()
    #: False: no built-in tools (``--no-builtin-tools``); the step's MCP tools stay.
    builtin_tools: bool = True
    #: Replaces Pi's system prompt (``--system-prompt``; passed as a file, so the text is
    #: never read as a path).
    system_prompt: Text | None = None
    #: Texts appended to the system prompt (``--append-system-prompt``, each as a file).
    append_system_prompt: tuple[Text, ...] = ()
    #: The session's display name (``--name``).
    session_name: Name | None = None
    #: Agent-level retries of transient provider failures (0: off, so failures are fast).
    retries: int = Field(default=0, ge=0, le=10)
    #: Load AGENTS.md / CLAUDE.md context files from the worktree (off by default).
    context_files: bool = False
    #: Skill files or directories to load (``--skill``); discovery stays off.
    skills: tuple[PathText, ...] = ()
    #: Prompt template files or directories to load (``--prompt-template``); discovery stays
    #: off. A prompt ``/name`` then expands the template.
    prompt_templates: tuple[PathText, ...] = ()

    @field_validator("tools", "exclude_tools")
    @classmethod
    def _tool_names(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for name in value or ():
            if not _TOOL_NAME.fullmatch(name):
                raise ValueError(f"tool name {shown(name)} is not a Pi tool name")
        return value

    def to_data(self) -> dict[str, Any]:
        """Plain JSON-ready data; the model source keeps its ``type`` (it picks the class)."""
        data = super().to_data()
        data["model"] = self.model.model_dump(mode="json", exclude_defaults=True) | {
            "type": self.model.type
        }
        return data

    def env_names(self) -> frozenset[str]:
        """The model key's variable name and the MCP servers' credential names."""
        names = set(super().env_names())
        key = self.model.key_env()
        if key:
            names.add(key)
        return frozenset(names)
