"""The codex kind's checks: the CLI, a login or a named key, and the worktree guard.

- ``harness.codex-cli`` (installation): the CLI is found and at least the supported version.
- ``harness.codex-auth`` (descriptor): the operator's login (``auth.json``) when the descriptor
  names no endpoint; otherwise the variable ``api_key_env`` names is set.
- ``mcp.codex-worktree-config`` (just in time): the worktree's ``.codex/config.toml`` must not
  declare ``mcp_servers`` (Codex trusts the worktree and would load them), nor any other key that
  would override the private home's policy (the agent's environment, the login shell, the model
  provider, profiles, telemetry, plugins, hooks, ``notify``); unparseable TOML fails closed. A
  ``.codex/hooks.json`` beside it is refused whatever it holds.
- ``mcp.codex-system-config`` (just in time): Codex also layers the host's
  ``/etc/codex/config.toml`` (below the private home: its ``mcp_servers`` would still be started
  for every step) and ``/etc/codex/managed_config.toml`` (above it: it could override any
  policy), whatever ``CODEX_HOME`` says. The first must declare no ``mcp_servers``; the second is
  held to the worktree's rules.
"""

from __future__ import annotations

import json
import shlex
import tomllib
from collections.abc import Mapping
from pathlib import Path

from jigs.checks import Check, CheckFailure, CheckOk, CheckResult
from jigs.errors import JigsError
from jigs.executables import version_check

from jigs_harness_codex._descriptor import CodexDescriptor
from jigs_harness_codex._executable import MINIMUM_VERSION, fix_hint, resolve_executable
from jigs_harness_codex._home import operator_auth_file

__all__ = [
    "SYSTEM_CONFIG_DIR",
    "auth_check",
    "cli_check",
    "system_config_check",
    "worktree_config_check",
]

#: Where Codex reads its system-wide layers on Unix (no variable moves them).
SYSTEM_CONFIG_DIR = Path("/etc/codex")

#: Keys a repo's ``.codex/config.toml`` may not set: Codex layers that file over the private
#: home's config, so each could undo a policy jigs wrote there.
_POLICY_KEYS = {
    "shell_environment_policy": "it decides which variables, credentials included, the agent's "
    "commands see",
    "allow_login_shell": "a login shell exports what the step's environment never allowed",
    "model_provider": "the descriptor chooses where model traffic and its key go",
    "model_providers": "the descriptor chooses where model traffic and its key go",
    "chatgpt_base_url": "the operator's ChatGPT login would go where the repo says",
    "experimental_thread_store_endpoint": "the step's threads would go where the repo says",
    "profile": "a profile could bring any policy key",
    "profiles": "a profile could bring any policy key",
    "analytics": "jigs keeps analytics off",
    "notify": "a notifier is a command the repo would run on the host",
    "hooks": "hooks are commands the repo would run on the host",
    "otel": "jigs sends no telemetry",
}
_POLICY_FEATURES = {
    "plugins": "plugins could bring MCP servers and phone home",
    "hooks": "hooks are commands the repo would run on the host",
    "unbounded_connection_retries": "a dead endpoint must fail, not retry forever",
}


def cli_check(env: Mapping[str, str]) -> Check:
    return version_check(
        "codex", "Codex CLI", resolve_executable, env, minimum=MINIMUM_VERSION, fix=fix_hint()
    )


def _codex_command(env: Mapping[str, str]) -> str:
    """The Codex CLI jigs runs, as a command to type: a bare ``codex`` is usually not on PATH
    (the binary comes in the openai-codex-cli-bin wheel)."""
    try:
        return shlex.quote(str(resolve_executable(env).path))
    except JigsError:
        return "codex"  # the CLI check's row says how to install it


def auth_check(descriptor: CodexDescriptor, env: Mapping[str, str]) -> Check:
    async def run() -> CheckResult:
        if descriptor.api_key_env:
            if env.get(descriptor.api_key_env):
                return CheckOk(f"{descriptor.api_key_env} is set")
            return CheckFailure(
                reason=f"{descriptor.api_key_env} (the descriptor's api_key_env) is not set in "
                f"the step's environment",
                repair=f"set {descriptor.api_key_env} where the step runs (its value is never "
                f"written to disk)",
            )
        if descriptor.base_url:
            return CheckOk(f"{descriptor.base_url} without a key")
        path = operator_auth_file(env)
        codex = _codex_command(env)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return CheckFailure(
                reason=f"no Codex login found at {path}",
                repair=f"run `{codex} login`, or name an endpoint on the descriptor with base_url "
                "and api_key_env",
            )
        except (OSError, ValueError) as exc:
            return CheckFailure(
                reason=f"the Codex login at {path} cannot be read: {type(exc).__name__}",
                repair=f"run `{codex} logout && {codex} login`",
            )
        if not isinstance(data, dict) or not (data.get("tokens") or data.get("OPENAI_API_KEY")):
            return CheckFailure(
                reason=f"the Codex login at {path} holds no credentials",
                repair=f"run `{codex} logout && {codex} login`",
            )
        return CheckOk(f"login at {path} ({data.get('auth_mode', 'unknown mode')})")

    return Check("harness.codex-auth", "Codex login or model key", run)


def _unparsable(path: Path, exc: Exception, by: str) -> CheckFailure:
    return CheckFailure(
        reason=f"{path} cannot be parsed ({type(exc).__name__}: {exc}), so jigs cannot prove "
        f"it declares no MCP servers or policy keys",
        repair=f"fix or remove {path}; MCP servers are declared per step, never by {by}",
    )


def _worktree_failure(
    path: Path, *, by: str = "the repo", policy: bool = True
) -> CheckFailure | None:
    """Why the Codex config layer at ``path`` may not be loaded with a step; None when it is
    absent or harmless. ``policy=False`` looks at ``mcp_servers`` only."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        return _unparsable(path, exc, by)

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return _unparsable(path, exc, by)
    servers = data.get("mcp_servers")
    if servers:
        names = ", ".join(sorted(servers)) if isinstance(servers, dict) else str(servers)[:80]
        return CheckFailure(
            reason=f"{path} declares mcp_servers: {names} (Codex would start them for the step)",
            repair=f"remove the mcp_servers table from {path}; MCP servers are declared per "
            f"step, never by {by}",
        )
    if not policy:
        return None
    owned = [f"{key} ({why})" for key, why in _POLICY_KEYS.items() if key in data]
    features = data.get("features")
    if isinstance(features, dict):
        owned += [
            f"features.{key} ({_POLICY_FEATURES[key]})"
            for key in features
            if key in _POLICY_FEATURES
        ]
    if owned:
        return CheckFailure(
            reason=f"{path} sets what jigs owns as policy: {'; '.join(owned)}",
            repair=f"remove those keys from {path} (Codex would let {by} override jigs' "
            f"private home)",
        )
    return None


def _project_configs(cwd: Path) -> list[Path]:
    """Every ``.codex/config.toml`` Codex layers for ``cwd``: from ``cwd`` up to the repository
    root (the first directory holding ``.git``), or ``cwd`` alone outside a repository."""
    chain = [cwd, *cwd.parents]
    for index, directory in enumerate(chain):
        if (directory / ".git").exists():
            return [d / ".codex" / "config.toml" for d in chain[: index + 1]]
    return [cwd / ".codex" / "config.toml"]


def _hooks_failure(path: Path) -> CheckFailure | None:
    """A repo's ``.codex/hooks.json`` (any content): its hooks would run commands on the host."""
    if not path.exists() and not path.is_symlink():
        return None
    return CheckFailure(
        reason=f"{path} exists: Codex would run its hooks (commands) for the step",
        repair=f"remove {path}; a step's commands are the agent's own, never the repo's hooks",
    )


def worktree_config_check(cwd: Path) -> Check:
    async def run() -> CheckResult:
        paths = _project_configs(cwd)
        for path in paths:
            failure = _worktree_failure(path) or _hooks_failure(path.with_name("hooks.json"))
            if failure is not None:
                return failure
        present = [str(p) for p in paths if p.exists()]
        return CheckOk(f"no mcp_servers or policy keys in {', '.join(present)}" if present else "")

    return Check("mcp.codex-worktree-config", "Codex worktree config", run)


def system_config_check(root: Path = SYSTEM_CONFIG_DIR) -> Check:
    async def run() -> CheckResult:
        by = "the host's system-wide Codex config"
        failure = _worktree_failure(root / "config.toml", by=by, policy=False)
        failure = failure or _worktree_failure(root / "managed_config.toml", by=by)
        if failure is not None:
            return failure
        present = [str(p) for p in (root / "config.toml", root / "managed_config.toml")]
        present = [p for p in present if Path(p).exists()]
        return CheckOk(f"no mcp_servers in {', '.join(present)}" if present else "")

    return Check("mcp.codex-system-config", "Codex system-wide config", run)
