"""The private files and variables that make opencode run on jigs' decisions only.

opencode merges its configuration from many places: a remote ``.well-known`` config, the user's
``~/.config/opencode``, ``$OPENCODE_CONFIG``, the project's ``opencode.json`` and ``.opencode``
dirs (up to the git root), ``~/.opencode``, ``$OPENCODE_CONFIG_CONTENT`` and a managed dir
(``/etc/opencode``). For a step jigs sets, on top of the environment built from empty:

- ``XDG_CONFIG_HOME``, ``XDG_DATA_HOME``, ``XDG_CACHE_HOME``, ``XDG_STATE_HOME``: directories in
  the step's private dir, so no user config, login (``auth.json``), log or cache is read or left
  behind; the config one is shown read-only in the sandbox, which also stops opencode from
  ``npm install``-ing its plugin package there (it skips a directory it cannot write);
- ``OPENCODE_CONFIG``: the one config jigs writes (below);
- ``OPENCODE_DISABLE_PROJECT_CONFIG``: no ``opencode.json``, ``.opencode`` dir or ``AGENTS.md``
  of the worktree is read (instructions come from the descriptor);
- ``OPENCODE_TEST_MANAGED_CONFIG_DIR``: an empty private dir instead of ``/etc/opencode``;
- ``OPENCODE_PURE`` (no external plugins), ``OPENCODE_DISABLE_DEFAULT_PLUGINS``,
  ``OPENCODE_DISABLE_CLAUDE_CODE`` (no ``~/.claude`` prompts or skills),
  ``OPENCODE_DISABLE_EXTERNAL_SKILLS``, ``OPENCODE_DISABLE_MODELS_FETCH`` (no models.dev
  catalogue download), ``OPENCODE_DISABLE_AUTOUPDATE``, ``OPENCODE_DISABLE_SHARE``,
  ``OPENCODE_DISABLE_LSP_DOWNLOAD``: offline, and nothing but what jigs wrote.

The config names one provider, ``jigs`` (``@ai-sdk/openai-compatible``, built into opencode), at
the step's credential proxy with the proxy's placeholder key; ``enabled_providers`` keeps every
other one (those opencode would build from variables such as ``OPENAI_API_KEY``) off.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from jigs.mcp import McpHttpServer, McpStdioServer
from jigs.plugin import HarnessContext, private_file

from jigs_harness_opencode._descriptor import OpencodeDescriptor

__all__ = ["PROVIDER", "SETS_ENV", "write_home"]

#: The provider id jigs' config defines (models are ``jigs/<model>``).
PROVIDER = "jigs"
_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]")

_FLAGS = {
    "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
    "OPENCODE_PURE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_TERMINAL_TITLE": "1",
    # what a one-shot run never uses: ~10% of opencode's start-up CPU (measured: 3.3 s vs 3.8 s)
    "OPENCODE_EXPERIMENTAL_DISABLE_FILEWATCHER": "1",
    "OPENCODE_DISABLE_FFF": "1",
    "OPENCODE_DISABLE_EMBEDDED_WEB_UI": "1",
}
_GITIGNORE = "node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore\n"
_DIRS = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")
#: Every variable the kind sets (refused in ``agents.env``).
SETS_ENV = frozenset(
    {*_FLAGS, *_DIRS, "OPENCODE_CONFIG", "OPENCODE_DB", "OPENCODE_TEST_MANAGED_CONFIG_DIR"}
)


def _mcp(servers: Mapping[str, McpStdioServer | McpHttpServer]) -> dict[str, Any]:
    """The step's MCP servers in opencode's ``mcp`` table; credentials as ``{env:NAME}``
    references opencode resolves from its environment, never as values."""
    table: dict[str, Any] = {}
    for name, server in servers.items():
        if isinstance(server, McpStdioServer):
            entry: dict[str, Any] = {
                "type": "local",
                "command": [server.command, *server.args],
                "enabled": True,
            }
            if server.env:
                entry["environment"] = {c: f"{{env:{s}}}" for c, s in server.env.items()}
        else:
            headers = {h: f"{{env:{s}}}" for h, s in server.headers.items()}
            if server.bearer_token_env:
                headers["Authorization"] = f"Bearer {{env:{server.bearer_token_env}}}"
            entry = {"type": "remote", "url": server.url, "enabled": True, "oauth": False}
            if headers:
                entry["headers"] = headers
        table[name] = entry
    return table


def _permission(descriptor: OpencodeDescriptor) -> dict[str, str]:
    """Tools the descriptor turns off (opencode's tools, and MCP tools as ``<server>_<tool>``)."""
    denied = {tool: "deny" for tool in descriptor.disabled_tools}
    for name, server in descriptor.mcp_servers.items():
        for tool in server.disabled_tools:
            denied[f"{_NOT_NAME.sub('_', name)}_{_NOT_NAME.sub('_', tool)}"] = "deny"
    return denied


def config(
    descriptor: OpencodeDescriptor,
    base_url: str,
    key: str | None,
    instructions: list[str],
    *,
    tool_free: bool = False,
) -> dict[str, Any]:
    """opencode's whole configuration for a step of ``descriptor``; ``tool_free`` (an ask):
    every tool denied, which opencode then offers the model no more."""
    model: dict[str, Any] = {
        "name": descriptor.model,
        "limit": {"context": descriptor.context_tokens, "output": descriptor.output_tokens},
        "tool_call": True,
    }
    options: dict[str, Any] = {"baseURL": base_url}
    if key is not None:
        options["apiKey"] = key
    build: dict[str, Any] = {}
    if descriptor.temperature is not None:
        build["temperature"] = descriptor.temperature
    return {
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,
        "lsp": False,
        "formatter": False,
        "plugin": [],
        "enabled_providers": [PROVIDER],
        "provider": {
            PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "jigs",
                "options": options,
                "models": {descriptor.model: model},
            }
        },
        "model": f"{PROVIDER}/{descriptor.model}",
        "small_model": f"{PROVIDER}/{descriptor.model}",
        "instructions": instructions,
        "mcp": _mcp(descriptor.mcp_servers),
        "permission": {"*": "deny"} if tool_free else _permission(descriptor),
        **({"agent": {"build": build}} if build else {}),
    }


def write_home(
    descriptor: OpencodeDescriptor,
    ctx: HarnessContext,
    base_url: str,
    key: str | None,
    *,
    tool_free: bool = False,
) -> dict[str, str]:
    """Write the step's private opencode home and return the variables that point at it."""
    home = ctx.private_dir("jigs-opencode-")
    env = dict(_FLAGS)
    for name in _DIRS:
        path = home / name.lower()
        path.mkdir()
        env[name] = str(path)
    config_dir = home / "xdg_config_home" / "opencode"
    config_dir.mkdir()
    # what opencode writes there on every start (it fails on a read-only dir otherwise)
    (config_dir / ".gitignore").write_text(_GITIGNORE)
    # shown read-only over the writable private dir: opencode installs nothing into it
    ctx.expose(home / "xdg_config_home")
    managed = home / "managed"
    managed.mkdir()
    env["OPENCODE_TEST_MANAGED_CONFIG_DIR"] = str(managed)
    instructions = []
    for number, text in enumerate(descriptor.instructions):
        path = private_file(home / f"instructions-{number}.md", text.encode())
        instructions.append(str(path))
    data = config(descriptor, base_url, key, instructions, tool_free=tool_free)
    path = private_file(home / "opencode.json", json.dumps(data, indent=1).encode())
    env["OPENCODE_CONFIG"] = str(path)
    return env
