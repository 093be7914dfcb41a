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
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

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
_SECRET_PREFIXES = re.compile(
    r"^(sk-|sk_|ghp_|gho_|ghs_|ghu_|github_pat_|xox[abposr]-|glpat-|eyJ[A-Za-z0-9_-]{8})"
    r"|^(AKIA|ASIA)[0-9A-Z]{16}$|^AIza[0-9A-Za-z_-]{35}$"
)
_LONG_TOKEN = re.compile(r"^[A-Za-z0-9+/_=.-]{24,}$")


def looks_like_secret(value: str) -> bool:
    """True when ``value`` has the shape of a credential rather than a variable name: a known
    token prefix, or a long run mixing lower case, upper case and digits."""
    if _SECRET_PREFIXES.search(value):
        return True
    return bool(
        _LONG_TOKEN.fullmatch(value)
        and re.search(r"[a-z]", value)
        and re.search(r"[A-Z]", value)
        and re.search(r"[0-9]", value)
    )


def _check_env_name(value: str, where: str) -> str:
    if looks_like_secret(value):
        raise ValueError(
            f"{where} looks like a secret value; name the step-side environment variable that "
            f"holds it instead (the value is not shown)"
        )
    if ENV_NAME_PATTERN.fullmatch(value):
        return value
    raise ValueError(f"{where} must name a step-side environment variable, got {value!r}")


class McpProbe(BaseModel):
    """A harmless tool call that proves the server is up and answering."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class _McpBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

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
            _check_env_name(child, f"env key {child!r}")
            _check_env_name(source, f"env[{child!r}]")
        return value

    def env_names(self) -> frozenset[str]:
        return frozenset(self.env.values())


class McpHttpServer(_McpBase):
    """A server jigs connects to: header values and the bearer token are variable *names*."""

    type: Literal["http"] = "http"
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    bearer_token_env: str | None = None

    @field_validator("headers")
    @classmethod
    def _header_names_only(cls, value: dict[str, str]) -> dict[str, str]:
        for header, source in value.items():
            _check_env_name(source, f"headers[{header!r}]")
        return value

    @field_validator("bearer_token_env")
    @classmethod
    def _bearer_name(cls, value: str | None) -> str | None:
        return None if value is None else _check_env_name(value, "bearer_token_env")

    @model_validator(mode="after")
    def _no_credentials_in_url(self) -> McpHttpServer:
        if "@" in self.url.split("//", 1)[1].split("/", 1)[0]:
            raise ValueError("url must not embed credentials; use headers or bearer_token_env")
        return self

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
