"""The private ``PI_CODING_AGENT_DIR`` of one invocation: ``settings.json``, ``models.json`` and,
when the step declares MCP servers, ``mcp.json`` (:mod:`jigs_harness_pi._mcp`).

Nothing secret is ever written: an API key appears in ``models.json`` only as Pi's environment
reference ``"$NAME"`` (the variable's name), which Pi resolves at request time, and MCP
credentials likewise as ``"${NAME}"``. With a key, the provider's ``baseUrl`` is the step's
credential proxy (a URL worthless once the step closes) and ``$NAME`` holds only the proxy's
placeholder: the real key stays in the worker. ``settings.json`` turns off packages and
extension resources, install telemetry, and sets retries as the descriptor says (off by default,
so a dead endpoint fails in well under a second). The shell tool gets a prefix that unsets the
key variable (it holds the placeholder only; the prefix stays as a second fence), and it runs
through a jigs-written ``shellPath`` script that starts bash with ``--noprofile --norc`` (and
without ``BASH_ENV``/``ENV``): Pi's plain ``bash -c`` would source ``~/.bashrc`` when its stdin is a
socket, so a slow or hostile rc file would delay or change the agent's commands.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from jigs.executables import which
from jigs.plugin.tools import make_dir, remove_tree

from jigs_harness_pi._descriptor import (
    AnthropicCompatible,
    OpenAICompatible,
    OpenRouter,
    PiDescriptor,
)
from jigs_harness_pi._mcp import mcp_json

__all__ = [
    "OPENROUTER_BASE_URL",
    "PiHome",
    "accept_images",
    "model_flag",
    "models_json",
    "settings_json",
    "upstream_url",
]

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
_FREE = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}


def model_flag(descriptor: PiDescriptor) -> str:
    """The ``--model`` value: ``<provider>/<model id>``."""
    source = descriptor.model
    provider = "openrouter" if isinstance(source, OpenRouter) else source.name
    return f"{provider}/{source.model}"


def upstream_url(descriptor: PiDescriptor) -> str:
    """The API base URL Pi would call for the descriptor's model source."""
    source = descriptor.model
    return OPENROUTER_BASE_URL if isinstance(source, OpenRouter) else source.base_url


def pi_model_call(descriptor: PiDescriptor) -> str:
    """The one request Pi makes of the model source (the ``api`` :func:`models_json` gives
    it), for the step's proxy to forward and nothing else."""
    source = descriptor.model
    if isinstance(source, AnthropicCompatible):
        return "POST /v1/messages"
    if isinstance(source, OpenAICompatible) and source.api != "chat-completions":
        return "POST /responses"
    return "POST /chat/completions"  # OpenRouter and chat-completions sources


def models_json(descriptor: PiDescriptor, *, base_url: str | None = None) -> dict[str, Any]:
    """Pi's ``models.json`` for the descriptor's model source (keys by variable name only);
    ``base_url`` (the step's proxy URL) replaces the source's endpoint."""
    source = descriptor.model
    price = source.price
    cost = (
        {
            "input": price.input,
            "output": price.output,
            "cacheRead": price.cache_read,
            "cacheWrite": price.cache_write,
        }
        if price is not None
        else dict(_FREE)
    )
    model: dict[str, Any] = {"id": source.model, "cost": cost}
    if isinstance(source, OpenRouter):
        provider: dict[str, Any] = {
            "baseUrl": base_url or OPENROUTER_BASE_URL,
            "api": "openai-completions",
            "apiKey": f"${source.api_key_env}",
            "models": [model],
        }
        return {"providers": {"openrouter": provider}}
    if isinstance(source, OpenAICompatible):
        api = "openai-completions" if source.api == "chat-completions" else "openai-responses"
    else:
        assert isinstance(source, AnthropicCompatible)
        api = "anthropic-messages"
    if source.context_window is not None:
        model["contextWindow"] = source.context_window
    if source.max_tokens is not None:
        model["maxTokens"] = source.max_tokens
    if source.reasoning:
        model["reasoning"] = True
    provider = {
        "baseUrl": base_url or source.base_url,
        "api": api,
        # Pi needs some key to call a provider; an endpoint without auth gets a dummy one.
        "apiKey": f"${source.api_key_env}" if source.api_key_env else "jigs-no-key",
        "models": [model],
    }
    if source.compat:
        provider["compat"] = dict(source.compat)
    return {"providers": {source.name: provider}}


_SHELL_NAME = "shell"


def shell_script(bash: str) -> str:
    """The ``shellPath`` script: bash without rc or profile files (Pi calls it with ``-c``)."""
    return f"""#!/bin/sh
# Written by jigs: Pi's shell (shellPath). No rc or profile file is read.
unset BASH_ENV ENV
exec {shlex.quote(bash)} --noprofile --norc "$@"
"""


def settings_json(descriptor: PiDescriptor, *, shell_path: str | None = None) -> dict[str, Any]:
    """Pi's ``settings.json``: no packages or resources, retries as asked, key unset in tools,
    and ``shellPath`` (when given) pointing at :func:`shell_script`."""
    retry: dict[str, Any] = (
        {"enabled": True, "maxRetries": descriptor.retries}
        if descriptor.retries
        else {"enabled": False}
    )
    settings: dict[str, Any] = {
        "packages": [],
        "extensions": [],
        "skills": [],
        "prompts": [],
        "themes": [],
        "retry": retry,
        "enableInstallTelemetry": False,
        "quietStartup": True,
    }
    key = descriptor.model.key_env()
    if key:
        settings["shellCommandPrefix"] = f"unset {key}"
    if shell_path is not None:
        settings["shellPath"] = shell_path
    return settings


def accept_images(home: Path) -> None:
    """Declare image input for the model in the home's ``models.json`` (Pi drops the image
    parts of a prompt for a text-only model). Only once a turn brings images: declared always,
    Pi's ``read`` tool would hand images to a model that may not take them."""
    path = home / "models.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    for provider in data.get("providers", {}).values():
        for model in provider.get("models", []):
            model["input"] = ["text", "image"]
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


class PiHome:
    """A fresh private agent dir; :meth:`remove` deletes it (registered on the context)."""

    def __init__(self, descriptor: PiDescriptor, *, base_url: str | None = None) -> None:
        self.path = make_dir("jigs-pi-agent-")
        try:
            bash = which("bash") or ("/bin/bash" if os.access("/bin/bash", os.X_OK) else None)
            shell = None
            if bash is not None:
                shell = self.path / _SHELL_NAME
                shell.write_text(shell_script(bash), encoding="utf-8")
                shell.chmod(0o700)
            self._write(
                "settings.json",
                settings_json(descriptor, shell_path=str(shell) if shell is not None else None),
            )
            self._write("models.json", models_json(descriptor, base_url=base_url))
            if descriptor.mcp_servers:
                key = descriptor.model.key_env()
                hidden = [key] if key else []
                self._write("mcp.json", mcp_json(descriptor.mcp_servers, hidden_env=hidden))
        except BaseException:
            self.remove()
            raise

    def _write(self, name: str, data: dict[str, Any]) -> None:
        target = self.path / name
        target.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        target.chmod(0o600)

    def remove(self) -> None:
        remove_tree(self.path)
