"""The codex descriptor: frozen, JSON-serialisable settings of a Codex step.

Everything jigs owns as policy (the home, the approval policy, the sandbox, raw config overrides,
the executable) is refused with a message naming the key. A model endpoint is named by
``base_url`` and the *name* of the variable holding its key (``api_key_env``); the value only ever
travels in the agent's environment.
"""

from collections.abc import Mapping
from typing import Annotated, ClassVar, Literal

from jigs.descriptors import HarnessDescriptor, LimitEnforcer, ModelEndpointFields
from jigs.plugin.tools import check_skill_path, skills_digest
from pydantic import Field

__all__ = ["DEFAULT_OPENAI_BASE_URL", "CodexDescriptor"]

#: Where ``api_key_env`` alone points (the OpenAI Responses API).
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"

_CODEX_POLICY_KEYS: Mapping[str, str] = {
    "codex_path": "jigs resolves the CLI itself (see `jigs doctor`)",
    "codex_home": "jigs gives each invocation a private CODEX_HOME",
    "sandbox_policy": "the sandbox is policy, set by jigs for unattended runs",
    "sandbox_mode": "the sandbox is policy, set by jigs for unattended runs",
    "auto_approve": "unattended runs answer approvals by policy",
    "thread_mode": "jigs always keeps a durable thread so a later step can resume it",
    "thread_id": "sessions are resumed with resume= on the step, never from a descriptor",
    "persist_extended_history": "jigs owns the session store",
    "config": "raw config could rewrite the sandbox and MCP tables",
    "profile": "profiles could bring MCP servers or a sandbox from the user's config",
    "model_provider": "name the endpoint with base_url and api_key_env",
    "model_providers": "name the endpoint with base_url and api_key_env",
    "shell_environment_policy": "the agent's environment is built by jigs from an allowlist",
}


class CodexDescriptor(ModelEndpointFields, HarnessDescriptor):
    """Settings of a Codex step.

    ``model`` and ``effort`` pick the model; ``base_url`` + ``api_key_env`` select an endpoint
    speaking the OpenAI Responses API (``api_key_env`` alone means OpenAI's own API; neither means
    the operator's Codex login). ``max_retries`` bounds request and stream retries.
    ``startup_timeout`` bounds opening the thread (and, halved, starting each MCP server);
    ``initialize`` gets the smaller of it and ``idle_timeout``. The base keys ``turn_timeout``,
    ``idle_timeout`` and ``max_turns`` apply to every turn (the core enforces them; ``max_turns``
    counts model requests). ``max_budget_usd`` is refused: Codex reports tokens, not cost.

    Where each key goes: ``model``, ``developer_instructions``, ``base_instructions``,
    ``personality`` and ``service_tier`` -> ``thread/start`` (and ``thread/resume``);
    ``effort`` and ``reasoning_summary`` -> ``turn/start``; ``web_search`` and
    ``model_verbosity`` -> the private ``config.toml``.
    """

    policy_keys: ClassVar[Mapping[str, str]] = _CODEX_POLICY_KEYS
    limits: ClassVar[Mapping[str, LimitEnforcer]] = {"max_turns": "core"}
    unsupported_limit_reason: ClassVar[str] = (
        "Codex reports token usage but no cost, so a budget cannot be counted"
    )

    kind: Literal["codex"] = "codex"
    model: Annotated[str, Field(min_length=1)] | None = None
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    reasoning_summary: Literal["auto", "concise", "detailed", "none"] | None = None
    developer_instructions: str | None = None
    #: Replaces Codex's own base instructions (the system prompt).
    base_instructions: str | None = None
    #: Deprecated by Codex (no longer selects a style), passed on as given.
    personality: Literal["none", "friendly", "pragmatic"] | None = None
    service_tier: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")] | None = None
    model_verbosity: Literal["low", "medium", "high"] | None = None
    #: The Responses API's hosted ``web_search`` tool: off, cached results, or live.
    web_search: Literal["disabled", "cached", "live"] | None = None
    base_url: Annotated[str, Field(pattern=r"^https?://[^\s@]+$")] | None = None
    max_retries: Annotated[int, Field(ge=0, le=10)] = 2
    startup_timeout: Annotated[float, Field(gt=0, le=600)] = 60.0
    #: Skills the agent may load: absolute paths, each a directory with ``SKILL.md`` or one
    #: ``.md`` file, copied into the invocation's private ``CODEX_HOME/skills``; nothing of
    #: ``~/.codex`` is read. Their contents are part of :meth:`describe`.
    skills: tuple[str, ...] = ()

    def content_digests(self) -> dict[str, str]:
        return {"skills": skills_digest(self.skills)} if self.skills else {}

    def __post_init__(self) -> None:
        super().__post_init__()  # the endpoint part's shared rules (api_key_env, base_url)
        for skill in self.skills:
            check_skill_path(skill, "skills")
        if (self.base_url or self.api_key_env) and self.model is None:
            raise ValueError("a descriptor that names an endpoint must also name its model")

    @property
    def names_endpoint(self) -> bool:
        """True when the step brings its own endpoint instead of the operator's login."""
        return self.base_url is not None or self.api_key_env is not None

    def model_id(self) -> str | None:
        return self.model
