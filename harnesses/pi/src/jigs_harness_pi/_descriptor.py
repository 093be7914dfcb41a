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

import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from jigs.descriptors import DescriptorPart, HarnessDescriptor, LimitEnforcer
from jigs.plugin.tools import check_env_name, check_url, shown
from pydantic import Field

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


def _no_nul(values: Any, where: str) -> None:
    for value in (values,) if isinstance(values, str) else values or ():
        if "\x00" in value:
            raise ValueError(f"{where}: must not hold a NUL byte (no command line can carry one)")


#: Text that goes to Pi's command line or into a file Pi reads (no NUL byte: checked by the
#: descriptor).
Text = Annotated[str, Field(min_length=1, max_length=1_000_000)]
#: A short name (the session's display name).
Name = Annotated[str, Field(min_length=1, max_length=200)]
#: A path (skill, prompt template) Pi loads; relative paths are read from the worktree.
PathText = Annotated[str, Field(min_length=1, max_length=4096)]


def _env_name(value: str, where: str) -> str:
    # the shared rule: the secret-shape test first, the value never echoed
    return check_env_name(value, where)


class ModelPrice(DescriptorPart):
    """The model's price in USD per million tokens (Pi's ``models.json`` ``cost``), so Pi
    reports each turn's cost and ``max_budget_usd`` can stop a turn. Unset: cost 0."""

    input: Annotated[float, Field(ge=0)] = 0.0
    output: Annotated[float, Field(ge=0)] = 0.0
    cache_read: Annotated[float, Field(ge=0)] = 0.0
    cache_write: Annotated[float, Field(ge=0)] = 0.0


class _Source(DescriptorPart):
    """Built directly (``OpenAICompatible(...)``) or inside a descriptor, a refused value is
    never echoed: failures are :class:`~jigs.errors.DescriptorError` (see
    :data:`~jigs.descriptors.DescriptorPart`). The data's ``type`` key picks the class."""

    #: The model id sent to the API.
    model: Annotated[str, Field(min_length=1, max_length=200)]
    #: Prices for Pi's cost figures; None: 0 (no cost reported, max_budget_usd never trips).
    price: ModelPrice | None = None

    def key_env(self) -> str | None:
        raise NotImplementedError


class _Endpoint(_Source):
    #: Pi's provider id for this endpoint (``--model <name>/<model>``).
    name: str = "jigs"
    #: The API base URL (``http(s)://...``), without credentials.
    base_url: Annotated[str, Field(pattern=r"^https?://")]
    #: The step-side variable holding the API key; None for endpoints without auth.
    api_key_env: str | None = None

    def __post_init__(self) -> None:
        if not _PROVIDER_NAME.fullmatch(self.name):
            raise ValueError(
                f"name: provider name {shown(self.name)} must match {_PROVIDER_NAME.pattern}"
            )
        if self.name in _BUILTIN_PROVIDERS:
            raise ValueError(
                f"name: provider name {self.name!r} is one of Pi's built-in providers; choose "
                f"another name"
            )
        if self.api_key_env is not None:
            _env_name(self.api_key_env, "api_key_env")
        check_url(self.base_url, "base_url")

    def key_env(self) -> str | None:
        return self.api_key_env


class OpenAICompatible(_Endpoint):
    """An OpenAI-compatible endpoint (Chat Completions or Responses)."""

    #: The source's ``type`` key (the union's tag).
    type: Literal["openai-compatible"] = "openai-compatible"

    #: Which OpenAI wire format the endpoint speaks.
    api: Literal["chat-completions", "responses"] = "chat-completions"
    #: Pi ``compat`` hints (see Pi's models.json reference), e.g. ``{"supportsStore": False}``.
    compat: dict[str, CompatValue] = Field(default_factory=dict)
    context_window: Annotated[int, Field(gt=0)] | None = None
    max_tokens: Annotated[int, Field(gt=0)] | None = None
    reasoning: bool = False


class AnthropicCompatible(_Endpoint):
    """An endpoint speaking the Anthropic Messages API."""

    #: The source's ``type`` key (the union's tag).
    type: Literal["anthropic-compatible"] = "anthropic-compatible"

    compat: dict[str, CompatValue] = Field(default_factory=dict)
    context_window: Annotated[int, Field(gt=0)] | None = None
    max_tokens: Annotated[int, Field(gt=0)] | None = None
    reasoning: bool = False


class OpenRouter(_Source):
    """OpenRouter through Pi's built-in ``openrouter`` provider."""

    api_key_env: str = "OPENROUTER_API_KEY"

    #: The source's ``type`` key (the union's tag).
    type: Literal["openrouter"] = "openrouter"

    def __post_init__(self) -> None:
        _env_name(self.api_key_env, "api_key_env")

    def key_env(self) -> str | None:
        return self.api_key_env


#: Where a Pi step's model runs; the data's ``type`` key picks the class.
ModelSource = Annotated[
    OpenAICompatible | AnthropicCompatible | OpenRouter, Field(discriminator="type")
]


class PiDescriptor(HarnessDescriptor):
    """Settings of the ``pi`` kind (Pi coding agent 1.x, run as ``pi --mode json``)."""

    limits: ClassVar[Mapping[str, LimitEnforcer]] = {"max_turns": "core", "max_budget_usd": "core"}

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
    retries: Annotated[int, Field(ge=0, le=10)] = 0
    #: Load AGENTS.md / CLAUDE.md context files from the worktree (off by default).
    context_files: bool = False
    #: Skill files or directories to load (``--skill``); discovery stays off.
    skills: tuple[PathText, ...] = ()
    #: Prompt template files or directories to load (``--prompt-template``); discovery stays
    #: off. A prompt ``/name`` then expands the template.
    prompt_templates: tuple[PathText, ...] = ()

    @classmethod
    def _prepare(cls, data: dict[str, Any]) -> dict[str, Any]:
        data = super()._prepare(data)
        model = data.get("model")
        # pydantic alone says "unable to extract tag using discriminator": say what
        # a Pi model is, since a bare model name (as claude and codex take) is the usual slip
        if isinstance(model, str) or (isinstance(model, Mapping) and "type" not in model):
            raise cls._invalid(
                'model: a Pi model is an object whose "type" says where it runs: '
                '{"type": "openai-compatible", "model": "...", "base_url": "https://.../v1", '
                '"api_key_env": "MY_KEY"}, or "type": "anthropic-compatible" (same keys), or '
                '{"type": "openrouter", "model": "...", "api_key_env": "MY_KEY"}'
            )
        return data

    def __post_init__(self) -> None:
        super().__post_init__()
        for key in ("tools", "exclude_tools"):
            for name in getattr(self, key) or ():
                if not _TOOL_NAME.fullmatch(name):
                    raise ValueError(f"{key}: tool name {shown(name)} is not a Pi tool name")
        for key in ("system_prompt", "append_system_prompt", "session_name", "skills"):
            _no_nul(getattr(self, key), key)
        _no_nul(self.prompt_templates, "prompt_templates")

    def model_key_env(self) -> str | None:
        """The model source's key variable (the endpoint part is the source, not top-level)."""
        return self.model.key_env()

    def model_base_url(self) -> str | None:
        return self.model.base_url if isinstance(self.model, _Endpoint) else None

    def model_id(self) -> str | None:
        return self.model.model
