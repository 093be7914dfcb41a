"""The agent environment, built from empty.

Nothing from the host environment reaches an agent unless its name is on the base list, is one of
the kind's own names, or is declared once per factory in ``agents.env``. Declarations are names,
never values. Reserved names (model credentials, names jigs sets itself) are refused in
``agents.env``: a model credential is named on the descriptor's model source instead.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from jigs.errors import EnvPolicyError
from jigs.policy._secrets import SecretRuleError, check_env_name, remember_env

__all__ = [
    "BASE_ENV",
    "LOCALE_ENV",
    "RESERVED_AGENT_ENV",
    "AgentsConfig",
    "agents_config_for_worktree",
    "build_env",
    "find_agents_config",
    "validate_agents_env",
]

#: Names every agent gets when the host has them set.
BASE_ENV: tuple[str, ...] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
)
#: The POSIX and glibc locale categories. Only these ``LC_*`` names pass: SSH forwards any
#: ``LC_*`` by default, and people carry tokens in made-up ones.
LOCALE_ENV: frozenset[str] = frozenset(
    {
        "LC_ALL",
        "LC_CTYPE",
        "LC_COLLATE",
        "LC_MESSAGES",
        "LC_NUMERIC",
        "LC_TIME",
        "LC_MONETARY",
        "LC_PAPER",
        "LC_NAME",
        "LC_ADDRESS",
        "LC_TELEPHONE",
        "LC_MEASUREMENT",
        "LC_IDENTIFICATION",
    }
)

#: Names ``agents.env`` may not declare, with where they belong instead.
RESERVED_AGENT_ENV: Mapping[str, str] = {
    "ANTHROPIC_API_KEY": "selects a model credential; name it on the descriptor's model source",
    "ANTHROPIC_AUTH_TOKEN": "selects a model credential; name it on the descriptor's model source",
    "CLAUDE_CODE_OAUTH_TOKEN": "selects a model credential; name it on the descriptor",
    "OPENAI_API_KEY": "selects a model credential; name it on the descriptor's model source",
    "CODEX_API_KEY": "selects a model credential; name it on the descriptor's model source",
    "OPENROUTER_API_KEY": "selects a model credential; name it on the descriptor's model source",
    "ANTHROPIC_BASE_URL": "selects a model endpoint; set base_url on the descriptor",
    "OPENAI_BASE_URL": "selects a model endpoint; set base_url on the descriptor",
    "CLAUDE_CONFIG_DIR": "is passed to the claude kind by the kind itself (the operator's login)",
    "CODEX_HOME": "is set by jigs: every Codex invocation gets a private home",
    "PI_CODING_AGENT_DIR": "is set by jigs: every Pi invocation gets a private agent dir",
}


@dataclass(frozen=True)
class AgentsConfig:
    """The factory's ``agents`` settings and where they were read from."""

    env: tuple[str, ...] = ()
    source: str = "default"


def validate_agents_env(
    names: Iterable[object], *, source: str, reserved: Mapping[str, str] = RESERVED_AGENT_ENV
) -> tuple[str, ...]:
    """Check ``agents.env`` entries: names only, none reserved. Raises :class:`EnvPolicyError`."""
    result: list[str] = []
    for name in names:
        try:
            check_env_name(name, "an entry")
        except SecretRuleError as exc:
            raise EnvPolicyError(
                f"agents.env in {source}: {exc}; agents.env lists variable names (like "
                f"SSH_AUTH_SOCK), never values",
                name=None,
                source=source,
            ) from None
        assert isinstance(name, str)
        why = reserved.get(name)
        if why is not None:
            raise EnvPolicyError(
                f"agents.env in {source}: {name} {why}; remove it from agents.env",
                name=name,
                source=source,
            )
        result.append(name)
    return tuple(dict.fromkeys(result))


def _read_table(path: Path) -> tuple[object, str] | None:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise EnvPolicyError(f"cannot read {path}: {exc}", source=str(path)) from exc
    except tomllib.TOMLDecodeError as exc:
        raise EnvPolicyError(
            f"{path} is not valid TOML ({exc}); fix it so jigs can read agents.env",
            source=str(path),
        ) from exc
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("jigs", {}).get("agents")
        where = f"{path} [tool.jigs.agents]"
    else:
        table = data.get("agents")
        where = f"{path} [agents]"
    if table is None:
        return None
    return table, where


def agents_config_for_worktree(worktree: Path) -> AgentsConfig:
    """The factory's ``agents.env`` for a step in ``worktree``: found from the worktree's
    *parent* upward. Files inside the worktree never count: it holds the code under edit, which
    an agent (or the repository's authors) can write, and ``agents.env`` decides which host
    secrets an agent gets."""
    return find_agents_config(worktree.resolve().parent)


def find_agents_config(start: Path) -> AgentsConfig:
    """Find ``agents.env`` from ``start`` upward: ``jigs.toml`` ``[agents]`` or
    ``pyproject.toml`` ``[tool.jigs.agents]``; the nearest file that has the table wins."""
    for directory in (start, *start.parents):
        for filename in ("jigs.toml", "pyproject.toml"):
            path = directory / filename
            if not path.is_file():
                continue
            found = _read_table(path)
            if found is None:
                continue
            table, where = found
            if not isinstance(table, dict):
                raise EnvPolicyError(f"{where} must be a table", source=where)
            unknown = set(table) - {"env"}
            if unknown:
                raise EnvPolicyError(
                    f"{where} has unknown keys {sorted(unknown)}; only 'env' is allowed",
                    source=where,
                )
            env = table.get("env", [])
            if not isinstance(env, list):
                raise EnvPolicyError(f"{where} env must be a list of names", source=where)
            return AgentsConfig(validate_agents_env(env, source=where), where)
    return AgentsConfig()


def build_env(names: Iterable[str], *, source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for an agent: the base list, the locale categories, and ``names``, from
    ``source`` (default ``os.environ``) when set. Nothing else passes.

    Every secret value it hands over (the values of ``names`` — the model key, MCP credentials,
    ``agents.env`` — except existing paths, secret-named or secret-shaped values, and proxy
    passwords) is remembered in the current known-secrets registry
    (:func:`jigs.policy._secrets.current_secrets`), so redaction replaces it wherever it shows
    up."""
    host = os.environ if source is None else source
    declared = list(names)
    wanted: Sequence[str] = (*BASE_ENV, *declared)
    env = {name: host[name] for name in wanted if name in host}
    env.update({k: v for k, v in host.items() if k in LOCALE_ENV})
    remember_env(env, declared)
    return env
