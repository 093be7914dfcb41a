"""Harness descriptors: frozen, JSON-serialisable data that names a harness kind and its settings.

A descriptor holds no function and no secret (credentials are named by environment variable). Keys
that jigs owns as policy are refused with a message that names the key and why; unknown keys are
refused too. :meth:`HarnessDescriptor.describe` is the canonical string session reuse compares.
"""

import functools
import json
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator

from jigs.errors import DescriptorError, JigsError
from jigs.mcp import McpServer, normalise_servers
from jigs.policy._record import OmitDefaults
from jigs.policy._secrets import check_env_name, check_url
from jigs.sandbox._egress import parse_allow

__all__ = [
    "COMMON_POLICY_KEYS",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_TURN_TIMEOUT",
    "LIMITS",
    "DescriptorPart",
    "HarnessDescriptor",
    "LimitEnforcer",
    "ModelEndpointFields",
    "NetworkAllow",
]

#: A record nested in a descriptor (a model source, a price table): frozen, keyword-only,
#: validated when built, its defaults left out of ``model_dump`` and
#: :meth:`HarnessDescriptor.describe`.
DescriptorPart = OmitDefaults

#: Who enforces a limit a kind supports: ``"cli"`` (the CLI stops itself; the core passes the
#: limit on) or ``"core"`` (the core counts it from the turn's events and stops the turn).
LimitEnforcer = Literal["cli", "core"]

#: Seconds a whole turn may take unless the descriptor says otherwise.
DEFAULT_TURN_TIMEOUT = 3600.0
#: Seconds a turn may go without any event from the CLI unless the descriptor says otherwise.
DEFAULT_IDLE_TIMEOUT = 600.0
#: The limit knobs a kind may support, and what each means.
LIMITS: Mapping[str, str] = {
    "max_turns": "the number of model requests in one turn",
    "max_budget_usd": "the cost of one turn, as the CLI reports it",
}

#: Keys no descriptor may set, with the reason shown to the user.
COMMON_POLICY_KEYS: Mapping[str, str] = {
    "cwd": "jigs runs the agent in the step's worktree (pass cwd= to the step)",
    "env": "jigs builds the environment from an allowlist; declare names in agents.env",
    "executable": "jigs resolves the CLI itself (see `jigs doctor`)",
    "executable_path": "jigs resolves the CLI itself (see `jigs doctor`)",
    "path_to_executable": "jigs resolves the CLI itself (see `jigs doctor`)",
    "cli_path": "jigs resolves the CLI itself (see `jigs doctor`)",
    "permission_mode": "unattended runs bypass permission prompts as policy",
    "approval_policy": "unattended runs never ask for approval as policy",
    "resume": "sessions are resumed with resume= on the step, never from a descriptor",
    "session_id": "jigs chooses and records session ids",
    "continue": "sessions are resumed with resume= on the step",
    "fork_session": "sessions are resumed with resume= on the step",
    "extra_args": "raw arguments could undo jigs' policy",
    "args": "raw arguments could undo jigs' policy",
    "settings": "settings files could bring MCP servers, hooks or env from outside the step",
    "setting_sources": "jigs lets the CLI read no settings file, neither the user's nor the "
    'worktree\'s (Claude Code runs with --setting-sources ""), as policy',
    "strict_mcp_config": "the step's mcp_servers are the whole MCP universe, as policy",
    "config_overrides": "config overrides could rewrite the sandbox and MCP tables",
    "plugins": "plugins could bring unprobed MCP servers, hooks or env",
    "home": "jigs gives each invocation a private home",
    "api_key": "a descriptor holds no secret: name the variable with api_key_env",
}


class NetworkAllow(OmitDefaults):
    """``network={"allow": [...]}``: besides what ``"deny"`` gives, the hosts the agent may
    reach through the step's egress proxy (no TLS interception): ``pypi.org``, ``*.github.com``
    (subdomains only), ``10.0.0.5`` or ``[2001:db8::1]``, each optionally with ``:port`` (80 and
    443 otherwise). A name that resolves to a loopback or private address is reached only when
    listed exactly. The agent's ``HTTP_PROXY``/``HTTPS_PROXY`` name the proxy."""

    allow: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.allow:
            raise ValueError('network: "allow" lists no host; use network="deny" for none')
        parse_allow(self.allow)  # ValueError naming the bad entry


class ModelEndpointFields(OmitDefaults):
    """The model endpoint part a descriptor composes: ``base_url`` and ``api_key_env`` (the
    *name* of the variable holding the key). List it first among the bases
    (``class MyDescriptor(ModelEndpointFields, HarnessDescriptor)``, or before an existing
    descriptor class): the core then knows where the key is
    (:meth:`HarnessDescriptor.model_key_env`) and applies the secret rules to it. A kind may
    narrow a field (a URL pattern) by declaring it again."""

    #: The model endpoint's base URL (``https://gateway.example/v1``), without credentials;
    #: None: the CLI's default endpoint.
    base_url: str | None = None
    #: The *name* of the step-side variable that holds the endpoint's key; None: no key.
    api_key_env: str | None = None

    def model_key_env(self) -> str | None:
        return self.api_key_env

    def model_base_url(self) -> str | None:
        return self.base_url


class HarnessDescriptor(OmitDefaults):
    """Base of every kind's descriptor: a pydantic model (a :class:`~jigs.policy._record.Record`:
    frozen, keyword-only, validated when built, ``model_dump``/``model_validate``/
    ``model_json_schema`` as in any pydantic model). Subclasses set ``kind`` as a ``Literal``
    field with its default, add their keys (constraints as ``Annotated[T, Field(...)]``) and
    check the rest in ``__post_init__`` (call ``super().__post_init__()``), raising
    ``ValueError`` with a message that names the key and never echoes the value. Every failure
    is a :class:`DescriptorError`; pydantic's ``ValidationError`` never escapes.
    """

    #: Extra policy keys of the kind, on top of :data:`COMMON_POLICY_KEYS`.
    policy_keys: ClassVar[Mapping[str, str]] = {}
    #: The kind's one declaration of its limits: each of :data:`LIMITS` it can enforce, and who
    #: enforces it (:data:`LimitEnforcer`). Setting a limit not listed is refused, never silently
    #: ignored; the registry checks the table when the kind registers.
    limits: ClassVar[Mapping[str, LimitEnforcer]] = {}
    #: Why the kind cannot enforce a limit it does not support (shown in the refusal).
    unsupported_limit_reason: ClassVar[str] = "the CLI does not report what the limit counts"

    kind: str
    mcp_servers: dict[str, McpServer] = Field(default_factory=dict)
    #: Seconds a whole turn may take (wall clock); jigs stops it then (AgentTimeoutError).
    turn_timeout: Annotated[float, Field(gt=0, le=7 * 86400)] = DEFAULT_TURN_TIMEOUT
    #: Seconds a turn may go without any event from the CLI (a hung endpoint or CLI).
    idle_timeout: Annotated[float, Field(gt=0, le=86400)] = DEFAULT_IDLE_TIMEOUT
    #: Model requests one turn may make (AgentLimitError past it); None: no limit.
    max_turns: Annotated[int, Field(ge=1, le=10_000)] | None = None
    #: Cost one turn may reach (AgentLimitError past it); None: no limit.
    max_budget_usd: Annotated[float, Field(gt=0)] | None = None
    #: ``"on"`` (the default): every process of the step runs in a bubblewrap sandbox of its
    #: own (see :mod:`jigs.sandbox`), and the step refuses to start where the host cannot build
    #: one (:class:`~jigs.errors.SandboxUnavailableError`); ``"off"``: an explicit opt-out to
    #: the process namespace only (the agent sees the host's files and network).
    sandbox: Literal["off", "on"] = "on"
    #: In the sandbox, the agent's network: ``"deny"`` (the default: a network namespace
    #: of its own in which only the step's credential proxy and its declared loopback MCP
    #: servers can be reached) or ``"host"`` (the worker's whole network: an explicit, logged
    #: opt-out).
    network: Literal["deny", "host"] | NetworkAllow = "deny"

    @field_validator("mcp_servers", mode="before")
    @classmethod
    def _typed_servers(cls, servers: Any) -> Any:
        # a server's ``type`` may be omitted (also when the descriptor is a field of a model)
        return normalise_servers(servers) if isinstance(servers, Mapping) else servers

    def __post_init__(self) -> None:
        # the shared rules for the kind's model endpoint, wherever its part keeps it: the key is
        # a variable *name* (the secret-shape test first, never echoed), the URL no credentials
        key = self.model_key_env()
        if key is not None:
            check_env_name(key, "api_key_env")
        url = self.model_base_url()
        if url is not None:
            check_url(url, "base_url")
        for name in LIMITS:
            if getattr(self, name) is not None and name not in self.limits:
                raise ValueError(
                    f"{name}: the {self.kind} kind cannot enforce {name} "
                    f"({self.unsupported_limit_reason}); remove it from the descriptor"
                )

    def model_key_env(self) -> str | None:
        """The name of the step-side variable holding the model key (None: no key). The core
        applies the secret rules to it: refused in the agent's environment when the kind
        declares a :meth:`~jigs.plugin.Harness.model_route`, its value redacted everywhere.
        :class:`ModelEndpointFields` implements it; a kind keeping its key elsewhere (a nested
        model source) overrides it. The default: None."""
        return None

    def model_base_url(self) -> str | None:
        """The model endpoint's base URL the descriptor names (None: the CLI's default)."""
        return None

    def model_id(self) -> str | None:
        """The model the descriptor asks for, for traces and the model object (None: the
        CLI's default). The default: None."""
        return None

    @classmethod
    def _prepare(cls, data: dict[str, Any]) -> dict[str, Any]:
        kind = cls._kind_default()
        for key in data:
            why = cls.policy_keys.get(key) or COMMON_POLICY_KEYS.get(key)
            if why is not None:
                raise DescriptorError(
                    f"a {kind} descriptor may not set {key!r}: {why}", kind=kind, key=key
                )
        return data

    @classmethod
    def _invalid(cls, message: str) -> JigsError:
        kind = cls._kind_default()
        return DescriptorError(f"invalid {kind} descriptor: {message}", kind=kind)

    @classmethod
    def _what(cls) -> str:
        return f"a {cls._kind_default()} descriptor"

    @classmethod
    @functools.cache
    def _kind_default(cls) -> str:
        """The default of the class's ``kind`` field (its kind's name), else the class's name
        (cached per class)."""
        field = cls.model_fields.get("kind")
        default = field.default if field is not None else None
        return default if isinstance(default, str) and default else cls.__name__

    def describe(self) -> str:
        """The canonical string that identifies these settings (sorted keys, defaults omitted),
        with the digests of the files they name (:meth:`content_digests`) under ``contents``."""
        data = self.to_data()
        contents = self.content_digests()
        if contents:
            data["contents"] = contents
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    def content_digests(self) -> dict[str, str]:
        """Digests of files the settings name whose content matters (a kind's ``skills``), so
        a changed file changes :meth:`describe` and a held session is not resumed under other
        settings. The default: none."""
        return {}

    def network_allow(self) -> tuple[str, ...]:
        """The hosts ``network={"allow": [...]}`` names (empty for ``"deny"`` and ``"host"``)."""
        return self.network.allow if isinstance(self.network, NetworkAllow) else ()

    def env_names(self) -> frozenset[str]:
        """Step-side variable names the descriptor references: its model key
        (:meth:`model_key_env`) and MCP credentials.
        A kind need not override this for its key to reach the agent; when the kind declares a
        :meth:`~jigs.plugin.Harness.model_route`, the core proxies the key and removes it from
        the agent's environment instead."""
        names: set[str] = set()
        key = self.model_key_env()
        if key:
            names.add(key)
        for server in self.mcp_servers.values():
            names |= server.env_names()
        return frozenset(names)
