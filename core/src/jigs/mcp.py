"""MCP server declarations a step hands its agent: data only, credentials by variable name.

A declaration names a *step-side* environment variable wherever a credential goes; jigs resolves it
at launch. A literal that looks like a secret is refused without being echoed. The step's list is
the agent's whole MCP universe: nothing from user config, the worktree or the harness's discovery.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Discriminator,
    Field,
    Tag,
    field_validator,
)

from jigs._safe_model import SafeModel
from jigs._secrets import check_env_name, check_url, looks_like_secret, shown

__all__ = [
    "ENV_NAME_PATTERN",
    "McpHttpServer",
    "McpProbe",
    "McpServer",
    "McpStdioServer",
    "looks_like_secret",
]

ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SERVER_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _check_env_name(value: str, where: str) -> str:
    return check_env_name(value, where)


class McpProbe(SafeModel):
    """A harmless tool call that proves the server is up and answering."""

    tool: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class _McpBase(SafeModel):
    probe: McpProbe
    disabled_tools: tuple[str, ...] = ()

    def env_names(self) -> frozenset[str]:
        raise NotImplementedError


class McpStdioServer(_McpBase):
    """A server jigs starts: ``env`` maps a child variable to the *name* of a step-side one."""

    type: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("env")
    @classmethod
    def _names_only(cls, value: dict[str, str]) -> dict[str, str]:
        for child, source in value.items():
            _check_env_name(child, "an env key")
            _check_env_name(source, f"env[{shown(child)}]")
        return value

    def env_names(self) -> frozenset[str]:
        return frozenset(self.env.values())


class McpHttpServer(_McpBase):
    """A server jigs connects to: header values and the bearer token are variable *names*."""

    type: Literal["http"] = "http"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    bearer_token_env: str | None = None

    @field_validator("headers")
    @classmethod
    def _header_names_only(cls, value: dict[str, str]) -> dict[str, str]:
        for header, source in value.items():
            _check_env_name(source, f"headers[{shown(header)}]")
        return value

    @field_validator("bearer_token_env")
    @classmethod
    def _bearer_name(cls, value: str | None) -> str | None:
        return None if value is None else _check_env_name(value, "bearer_token_env")

    @field_validator("url")
    @classmethod
    def _no_credentials_in_url(cls, value: str) -> str:
        return check_url(value, "url")

    def env_names(self) -> frozenset[str]:
        names = set(self.headers.values())
        if self.bearer_token_env:
            names.add(self.bearer_token_env)
        return frozenset(names)


def _server_type(value: Any) -> str:
    if isinstance(value, BaseModel):
        return str(getattr(value, "type", "stdio"))
    if isinstance(value, dict):
        return str(value.get("type") or ("http" if "url" in value else "stdio"))
    return "stdio"


#: One declared server; ``type`` may be omitted (``url`` means HTTP, otherwise stdio).
McpServer = Annotated[
    Annotated[McpStdioServer, Tag("stdio")] | Annotated[McpHttpServer, Tag("http")],
    Discriminator(_server_type),
]
