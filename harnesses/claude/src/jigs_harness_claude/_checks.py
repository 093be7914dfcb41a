"""Checks of the claude kind: the CLI, running as root, and a model credential.

- ``harness.claude-cli``: the CLI resolves, runs, and is at least :data:`MINIMUM_VERSION`;
- ``harness.claude-root``: as root, ``IS_SANDBOX`` must reach Claude Code (it refuses to bypass
  permissions as root otherwise, and jigs always bypasses them);
- ``harness.claude-auth``: the operator's Claude Code login (``claude auth status --json``);
- ``model.<var>``: the key variable a descriptor names is set (descriptor check).

Descriptor checks run at every step start, so they are cheap: the login is proven by its
credentials file when there is one, and only otherwise by asking the CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import anyio
from jigs.checks import Check, CheckFailure, CheckOk, CheckResult
from jigs.errors import CliNotFoundError
from jigs.executables import version_check

from jigs_harness_claude._descriptor import ClaudeDescriptor
from jigs_harness_claude._executable import FIX, MINIMUM_VERSION, resolve_executable
from jigs_harness_claude._sessions import config_dir

__all__ = ["auth_check", "cli_check", "key_check", "root_check", "sandbox_ok"]

ROOT_REPAIR = (
    "set IS_SANDBOX=1 in the environment the service runs in and name it in agents.env "
    '(pyproject.toml [tool.jigs.agents] env = ["IS_SANDBOX"], or jigs.toml [agents]); '
    "or run the service as a user other than root"
)


def login_repair(executable: object) -> str:
    """How to log in, naming the CLI jigs runs: a bare ``claude`` is usually not on PATH (it
    lives in the claude-agent-sdk wheel or jigs' own CLI dir)."""
    return (
        f"log in as the user the service runs as: run `{executable}`, then /login (set "
        f"CLAUDE_CONFIG_DIR if the login lives elsewhere); or give each claude descriptor an "
        f'endpoint key: harnesses.claude(base_url="https://...", api_key_env="MY_KEY") or just '
        f"api_key_env"
    )


def sandbox_ok(env: Mapping[str, str], *, euid: int | None = None) -> bool:
    """False when running as root without ``IS_SANDBOX=1`` in ``env`` (Claude Code 2.1.332
    accepts exactly ``1``: ``true`` or ``yes`` are refused like an unset variable)."""
    uid = os.geteuid() if euid is None else euid
    if uid != 0:
        return True
    return env.get("IS_SANDBOX") == "1"


def root_check(env: Mapping[str, str]) -> Check:
    async def run() -> CheckResult:
        if sandbox_ok(env):
            return CheckOk("not root" if os.geteuid() != 0 else "root, with IS_SANDBOX=1")
        value = env.get("IS_SANDBOX")
        state = (
            "IS_SANDBOX is not in the agent's environment"
            if value is None
            else f"the agent's IS_SANDBOX is {value[:20]!r}, and Claude Code accepts only 1"
        )
        return CheckFailure(
            reason=(
                f"jigs runs as root and {state}, so Claude Code would refuse to bypass "
                f"permissions (jigs' policy for unattended runs)"
            ),
            repair=ROOT_REPAIR,
        )

    return Check("harness.claude-root", "Claude Code as root", run)


def cli_check(env: Mapping[str, str]) -> Check:
    return version_check(
        "claude", "Claude Code CLI", resolve_executable, env, minimum=MINIMUM_VERSION, fix=FIX
    )


async def _auth_status(env: Mapping[str, str]) -> CheckResult:
    try:
        exe = resolve_executable(env).path
    except CliNotFoundError as exc:
        return CheckFailure(reason=f"cannot ask Claude Code for its login: {exc}", repair=FIX)

    with anyio.fail_after(12):
        done = await anyio.run_process(
            [str(exe), "auth", "status", "--json"],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    try:
        status = json.loads(done.stdout or b"")
    except ValueError:
        status = None
    if not isinstance(status, dict):
        out = (done.stdout or b"").decode(errors="replace")[:200]
        return CheckFailure(
            reason=f"`claude auth status --json` printed no JSON (exit {done.returncode}): {out!r}",
            repair=login_repair(exe),
        )
    if status.get("loggedIn") is True:
        method = status.get("authMethod") or "unknown method"
        return CheckOk(f"logged in ({method}), config in {status.get('configDirectory')}")
    return CheckFailure(
        reason=f"Claude Code is not logged in (config dir {status.get('configDirectory')})",
        repair=login_repair(exe),
    )


def _credentials_file(env: Mapping[str, str]) -> Path | None:
    path = config_dir(env) / ".credentials.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return path if isinstance(data, dict) and data else None


def auth_check(env: Mapping[str, str], *, fast: bool = False) -> Check:
    """The operator's login. With ``fast``, a credentials file is proof enough (no process)."""
    check_env = dict(env)
    if "CLAUDE_CONFIG_DIR" not in check_env and os.environ.get("CLAUDE_CONFIG_DIR"):
        check_env["CLAUDE_CONFIG_DIR"] = os.environ["CLAUDE_CONFIG_DIR"]

    async def run() -> CheckResult:
        if fast:
            found = _credentials_file(check_env)
            if found is not None:
                return CheckOk(f"login credentials in {found}")
        return await _auth_status(check_env)

    return Check("harness.claude-auth", "Claude Code login", run)


def key_check(descriptor: ClaudeDescriptor) -> Check:
    """The variable the descriptor names for its key is set where the step runs."""
    name = descriptor.api_key_env
    assert name is not None

    async def run() -> CheckResult:
        if os.environ.get(name):
            where = descriptor.base_url or "the Anthropic API"
            return CheckOk(f"{name} is set (for {where})")
        return CheckFailure(
            reason=f"{name} is not set in the service's environment",
            repair=f"set {name} to the endpoint's key in the environment the service runs in "
            f"(export it before starting the worker; jigs reads no .env file)",
        )

    check_id = "model." + name.lower().replace("_", "-")
    return Check(check_id, f"model key {name}", run)
