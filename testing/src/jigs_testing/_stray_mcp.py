"""The kit's ``stray_mcp_configs`` check: MCP server configs lying around are never started.

A repository (or the agent's HOME) may hold MCP configs written for any agent: Claude Code's
``.mcp.json``, Cursor's, VS Code's, Gemini's, Codex's, Pi's, OpenCode's... A step starts only
the MCP servers its descriptor declares. The check plants every file of :data:`STRAY_MCP_CONFIGS`
at once, whether the kind declares it in ``config_files()`` or not (a
declared file also gets the kind's own hostile version in ``planted_config``; this check
catches the ones a kind never thought of), each naming one server whose command creates a
marker file named after the config. Then it runs the plan's first turn: no marker may appear,
and the turn must do its work (a file written, or for a read-only kind the content answered).

A kind may fail closed instead: a :class:`~jigs.errors.JitCheckError` naming planted files
(Codex refuses a worktree ``.codex/config.toml`` that declares ``mcp_servers``). The named files
are removed and the turn runs again with the rest, until one runs; a refusal that names none of
them fails the check. HOME files are restored (or removed) afterwards.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from jigs.errors import JitCheckError

if TYPE_CHECKING:
    from pathlib import Path

    from jigs_testing.conformance import KitContext

__all__ = ["STRAY_MCP_CONFIGS", "StrayConfig", "stray_mcp_configs"]

#: ``server(argv) -> the file's text`` for one MCP server whose command is ``argv``.
Writer = Callable[[list[str]], str]


@dataclass(frozen=True, slots=True)
class StrayConfig:
    """One well-known MCP config file: where it lives and how it names a stdio server."""

    root: Literal["worktree", "home"]
    path: str
    write: Writer
    #: Whose file it is (for messages).
    owner: str

    @property
    def marker(self) -> str:
        """The marker file its server creates: ``worktree--cursor-mcp.json`` and so on."""
        return f"{self.root}-" + self.path.replace("/", "-")


def _mcp_servers(argv: list[str]) -> str:
    return json.dumps({"mcpServers": {"stray": {"command": argv[0], "args": argv[1:]}}})


def _typed_mcp_servers(argv: list[str]) -> str:
    server = {"type": "stdio", "command": argv[0], "args": argv[1:]}
    return json.dumps({"mcpServers": {"stray": server}})


def _vscode(argv: list[str]) -> str:
    server = {"type": "stdio", "command": argv[0], "args": argv[1:]}
    return json.dumps({"servers": {"stray": server}})


def _opencode(argv: list[str]) -> str:
    server = {"type": "local", "command": argv, "enabled": True}
    return json.dumps({"$schema": "https://opencode.ai/config.json", "mcp": {"stray": server}})


def _codex_toml(argv: list[str]) -> str:
    # a JSON string or array of strings is valid TOML
    return "\n".join(
        [
            "[mcp_servers.stray]",
            f"command = {json.dumps(argv[0])}",
            f"args = {json.dumps(argv[1:])}",
            "",
        ]
    )


def _claude_project_settings(argv: list[str]) -> str:
    # turns on every server of the worktree's .mcp.json, were the settings read
    return json.dumps({"enableAllProjectMcpServers": True, "enabledMcpjsonServers": ["stray"]})


def _claude_user_state(argv: list[str]) -> str:
    # user scope, and the local scope Claude Code keeps per project path
    server = {"type": "stdio", "command": argv[0], "args": argv[1:]}
    return json.dumps({"hasCompletedOnboarding": True, "mcpServers": {"stray": server}})


#: Every MCP config the check plants (worktree first, then HOME).
STRAY_MCP_CONFIGS = (
    StrayConfig("worktree", ".mcp.json", _typed_mcp_servers, "Claude Code (project scope)"),
    StrayConfig("worktree", ".claude/settings.local.json", _claude_project_settings, "Claude Code"),
    StrayConfig("worktree", ".cursor/mcp.json", _mcp_servers, "Cursor"),
    StrayConfig("worktree", ".vscode/mcp.json", _vscode, "VS Code"),
    StrayConfig("worktree", ".gemini/settings.json", _mcp_servers, "Gemini CLI"),
    StrayConfig("worktree", ".codex/config.toml", _codex_toml, "Codex"),
    StrayConfig("worktree", ".pi/mcp.json", _mcp_servers, "Pi"),
    StrayConfig("worktree", ".roo/mcp.json", _mcp_servers, "Roo Code"),
    StrayConfig("worktree", ".kiro/settings/mcp.json", _mcp_servers, "Kiro"),
    StrayConfig("worktree", ".amazonq/mcp.json", _mcp_servers, "Amazon Q"),
    StrayConfig("worktree", "opencode.json", _opencode, "OpenCode"),
    StrayConfig("home", ".claude.json", _claude_user_state, "Claude Code (user scope)"),
    StrayConfig("home", ".codex/config.toml", _codex_toml, "Codex"),
    StrayConfig("home", ".cursor/mcp.json", _mcp_servers, "Cursor"),
    StrayConfig("home", ".gemini/settings.json", _mcp_servers, "Gemini CLI"),
    StrayConfig("home", ".pi/agent/mcp.json", _mcp_servers, "Pi"),
    StrayConfig("home", ".config/opencode/opencode.json", _opencode, "OpenCode"),
    StrayConfig("home", ".codeium/windsurf/mcp_config.json", _mcp_servers, "Windsurf"),
)


async def stray_mcp_configs(ctx: KitContext) -> None:
    """The ``stray_mcp_configs`` check (see the module docstring)."""
    kind = ctx.kind
    tree = ctx.worktree("stray-mcp")
    # in the worktree: a sandboxed step can write nowhere else, so a marker outside it could
    # never prove that a stray server started
    markers = tree / ".stray-markers"
    markers.mkdir()
    saved: dict[Path, bytes | None] = {}
    planted: dict[Path, StrayConfig] = {}
    try:
        for config in STRAY_MCP_CONFIGS:
            path = (tree if config.root == "worktree" else ctx.home) / config.path
            if config.root == "home":
                saved[path] = path.read_bytes() if path.exists() else None
            path.parent.mkdir(parents=True, exist_ok=True)
            command = f"touch {shlex.quote(str(markers / config.marker))}"
            path.write_text(config.write(["/bin/sh", "-c", command]), encoding="utf-8")
            planted[path] = config
        refused: list[str] = []
        for _attempt in range(len(planted) + 1):
            try:
                turn = await ctx.turn(tree, ctx.write_prompt("stray-mcp.txt", "stray"))
            except JitCheckError as exc:
                ctx.server.script.skip_remaining()
                _assert_none_started(kind, markers, f"a refused step ({refused})")
                named = [p for p in planted if str(p) in str(exc)]
                if not named:
                    raise AssertionError(
                        f"{kind}: a JitCheckError with stray MCP configs planted names none of "
                        f"them: {exc}"
                    ) from exc
                for path in named:
                    refused.append(f"{planted.pop(path).root}:{path.name}")
                    path.unlink()
                continue
            except Exception as exc:
                _assert_none_started(kind, markers, f"a failed step: {exc!r}")
                raise AssertionError(
                    f"{kind}: a step failed with stray MCP configs planted "
                    f"({_listed(planted.values())}): {exc!r}"
                ) from exc
            ctx.server.script.skip_remaining()
            _assert_none_started(kind, markers, "a step that ran")
            ctx.assert_wrote(
                tree, "stray-mcp.txt", "stray", turn.text, "a step with stray MCP configs"
            )
            return
        raise AssertionError(f"{kind}: every step was refused ({refused}); none ran")
    finally:
        for path, content in saved.items():
            if content is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(content)


def _assert_none_started(kind: str, markers: Path, when: str) -> None:
    started = sorted(p.name for p in markers.iterdir())
    owners = {c.marker: f"{c.root} {c.path} ({c.owner})" for c in STRAY_MCP_CONFIGS}
    assert not started, (
        f"{kind}: {when} started MCP servers from configs the step does not declare: "
        f"{[owners.get(m, m) for m in started]}; start only the descriptor's mcp_servers "
        f"(Claude Code: --strict-mcp-config; point the CLI's config home at a private directory)"
    )


def _listed(configs: Iterable[StrayConfig]) -> str:
    return ", ".join(f"{c.root}:{c.path}" for c in configs)
