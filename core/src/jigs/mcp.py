"""MCP server declarations a step hands its agent: data only, credentials by variable name.

A declaration names a *step-side* environment variable wherever a credential goes; jigs resolves it
at launch. A literal that looks like a secret is refused without being echoed. The step's list is
the agent's whole MCP universe: nothing from user config, the worktree or the harness's discovery.
"""

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field

from jigs.policy._record import OmitDefaults, Record
from jigs.policy._secrets import check_env_name, check_url, looks_like_secret, shown

__all__ = [
    "ENV_NAME_PATTERN",
    "McpHttpServer",
    "McpProbe",
    "McpServer",
    "McpStdioServer",
    "looks_like_secret",
    "normalise_servers",
]

ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SERVER_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class McpProbe(Record):
    """A harmless tool call that proves the server is up and answering."""

    tool: Annotated[str, Field(min_length=1)]
    arguments: dict[str, Any] = Field(default_factory=dict)


class _McpBase(OmitDefaults):
    probe: McpProbe
    disabled_tools: tuple[str, ...] = ()

    def env_names(self) -> frozenset[str]:
        raise NotImplementedError


class McpStdioServer(_McpBase):
    """A server jigs starts: ``env`` maps a child variable to the *name* of a step-side one."""

    #: The server's transport (the union's tag).
    type: Literal["stdio"] = "stdio"
    command: Annotated[str, Field(min_length=1)]
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)

    def __post_init__(self) -> None:
        for child, source in self.env.items():
            check_env_name(child, "an env key")
            check_env_name(source, f"env[{shown(child)}]")

    def env_names(self) -> frozenset[str]:
        return frozenset(self.env.values())


class McpHttpServer(_McpBase):
    """A server jigs connects to: header values and the bearer token are variable *names*."""

    #: The server's transport (the union's tag).
    type: Literal["http"] = "http"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    bearer_token_env: str | None = None

    def __post_init__(self) -> None:
        for header, source in self.headers.items():
            check_env_name(source, f"headers[{shown(header)}]")
        if self.bearer_token_env is not None:
            check_env_name(self.bearer_token_env, "bearer_token_env")
        check_url(self.url, "url")

    def env_names(self) -> frozenset[str]:
        names = set(self.headers.values())
        if self.bearer_token_env:
            names.add(self.bearer_token_env)
        return frozenset(names)


#: One declared server, picked by its ``type`` (in a descriptor ``type`` may be omitted: ``url``
#: means HTTP, otherwise stdio).
McpServer = Annotated[McpStdioServer | McpHttpServer, Field(discriminator="type")]


def normalise_servers(servers: Mapping[str, Any]) -> dict[str, Any]:
    """Give each server's data its ``type`` when it was omitted (``url`` means HTTP, otherwise
    stdio); servers that are records already pass through."""
    out: dict[str, Any] = {}
    for name, value in servers.items():
        if isinstance(value, Mapping) and "type" not in value:
            out[name] = {**value, "type": "http" if "url" in value else "stdio"}
        else:
            out[name] = value
    return out
