"""The claude harness kind: Claude Code (``claude -p``, stream-json), one process per turn.

The core runs the turn (:mod:`jigs.engine._engine`); this kind supplies the executable
(:mod:`._executable`), the checks (:mod:`._checks`), the private files of a step
(:meth:`ClaudeHarness.prepare`), one turn's argv and env (:mod:`._launch`) and the decoder
(:mod:`._events`).

Where things live: transcripts in the operator's Claude Code config dir (``CLAUDE_CONFIG_DIR``
or ``~/.claude``), so the operator's login keeps working (token refreshes write back to the same
place) and ``claude --resume`` from a shell finds jigs' sessions. The step's private dir (removed
when the step closes) holds the MCP config file when the step declares servers, so resolved
credentials never appear on a command line, and, when the descriptor names an endpoint key, the
shell prefix that keeps the CLI's key variables out of the agent's commands (:mod:`._shell`).

Model key: with ``api_key_env`` the kind declares a :class:`~jigs.plugin.ModelRoute` (the
descriptor's ``base_url`` or ``https://api.anthropic.com``, sent as ``x-api-key`` or a bearer
token as ``api_key_header`` says); the core proxies it and Claude Code gets the proxy's URL in
``ANTHROPIC_BASE_URL`` and a placeholder key. Without one, Claude Code uses the operator's own
login, which it reads from (and refreshes in) ``CLAUDE_CONFIG_DIR`` or ``~/.claude``: that file
is readable by the agent (same user) and is not proxied.
"""

from __future__ import annotations

import glob
import json
import os
import shlex
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from jigs.checks import Check
from jigs.descriptors import HarnessDescriptor
from jigs.errors import DescriptorError
from jigs.executables import Resolved
from jigs.plugin import (
    Harness,
    HarnessContext,
    HarnessTarget,
    ModelRoute,
    TurnLaunch,
    TurnSpec,
    artifacts_under,
    private_file,
)
from jigs.plugin.tools import copy_skills

from jigs_harness_claude._checks import auth_check, cli_check, key_check, root_check
from jigs_harness_claude._descriptor import ClaudeDescriptor
from jigs_harness_claude._events import ClaudeDecoder
from jigs_harness_claude._executable import FIX, resolve_executable
from jigs_harness_claude._launch import SETS_ENV, Prepared, launch
from jigs_harness_claude._mcp import mcp_config
from jigs_harness_claude._seed import ensure_seed, seed_path
from jigs_harness_claude._sessions import config_dir, project_dir_name, verify_transcript
from jigs_harness_claude._shell import write_shell_prefix

if TYPE_CHECKING:
    from jigs_testing import ConfigFile, ModelServer
    from jigs_testing.plan import DemoPlan

__all__ = ["ClaudeHarness"]

_EMPTY_MCP = '{"mcpServers":{}}'
#: What the seed's one run of the binary takes from the step's env (root needs IS_SANDBOX).
_SEED_ENV = ("IS_SANDBOX",)
#: ``jigs install`` has no step waiting on it: the seed may take as long as a slow disk needs
_WARM_TIMEOUT = 60.0
#: Where Claude Code sends requests without ANTHROPIC_BASE_URL.
ANTHROPIC_API = "https://api.anthropic.com"


class ClaudeHarness(Harness[ClaudeDescriptor]):
    """Claude Code as a jigs harness kind."""

    kind: ClassVar[str] = "claude"
    contract: ClassVar[str | None] = "2.0"
    display_name: ClassVar[str] = "Claude Code"
    tool_gate: ClassVar[bool] = True
    descriptor_type: ClassVar[type[HarnessDescriptor]] = ClaudeDescriptor
    sets_env: ClassVar[frozenset[str]] = SETS_ENV
    structured_output: ClassVar[Literal["native", "prompted"]] = "native"
    call_settings: ClassVar[frozenset[str]] = frozenset({"system", "max_output_tokens"})
    #: Image content blocks in a stream-json user message.
    takes_images: ClassVar[bool] = True
    install_hint: ClassVar[str] = FIX

    def env_allowlist(self, descriptor: ClaudeDescriptor) -> Collection[str]:
        # the operator's config dir (login, transcripts); the model key is NOT listed: it is
        # copied into ANTHROPIC_API_KEY at launch and never reaches the agent under its own name
        return {*(descriptor.env_names() - {descriptor.api_key_env}), "CLAUDE_CONFIG_DIR"}

    def resolve_executable(self, env: Mapping[str, str]) -> Resolved:
        """The CLI: ``$JIGS_CLAUDE_EXECUTABLE``, ``claude`` on PATH, the pip-bundled copy."""
        return resolve_executable(env)

    async def warm(self, env: Mapping[str, str], log: Any) -> str | None:
        """The CLI's home seed (what a sandboxed step copies to its HOME), made if missing."""
        executable = resolve_executable(env).path
        seed_env = {name: env[name] for name in _SEED_ENV if name in env}
        if await ensure_seed(executable, seed_env, log, timeout=_WARM_TIMEOUT) is None:
            return "no home seed (see the log); a sandboxed step will try again"
        return f"home seed in place at {seed_path(executable)}"

    def model_route(self, descriptor: ClaudeDescriptor) -> ModelRoute | None:
        if descriptor.api_key_env is None:
            return None
        return ModelRoute(
            upstream=descriptor.base_url or ANTHROPIC_API,
            key_env=descriptor.api_key_env,
            scheme=descriptor.api_key_header,
            # what Claude Code calls (its requests to jigs_testing's model server); the scheme
            # default would not do for a gateway that wants the key as a bearer token
            model_calls=("POST /v1/messages",),
        )

    def login_route(self, descriptor: ClaudeDescriptor) -> str | None:
        return (
            "the operator's Claude Code login (CLAUDE_CONFIG_DIR or ~/.claude): not proxied, "
            "its credentials file is readable by the agent"
        )

    def installation_checks(self, env: Mapping[str, str]) -> Sequence[Check]:
        # no login check here: a descriptor that names a key needs no login, so the login is a
        # descriptor check (else `jigs doctor --settings '{"api_key_env": ...}'` fails falsely)
        return [cli_check(env), root_check(env)]

    def descriptor_checks(
        self, descriptor: ClaudeDescriptor, env: Mapping[str, str]
    ) -> Sequence[Check]:
        if descriptor.api_key_env is not None:
            return [root_check(env), key_check(descriptor)]
        return [root_check(env), auth_check(env, fast=True)]

    def tool_free_problem(self, descriptor: ClaudeDescriptor) -> str | None:
        """Claude Code runs with ``--tools ""`` (no built-in tool), the step's empty MCP config,
        no slash command and no transcript (:mod:`._launch`)."""
        return None

    def session_artifacts(
        self,
        session_id: str,
        ctx: HarnessContext,
        cwd: Path,
        *,
        names: Collection[str] | None = None,
    ) -> Mapping[str, Path]:
        """The transcript, in the operator's Claude Code config dir:
        ``projects/<cwd as a name>/<id>.jsonl``."""
        root = config_dir(ctx.env) / "projects" / project_dir_name(cwd)
        return artifacts_under(root, f"{glob.escape(session_id)}.jsonl", names)

    async def verify_resume(
        self, target: HarnessTarget[ClaudeDescriptor], ctx: HarnessContext
    ) -> None:
        session = target.resume.id if target.resume else ""
        path = verify_transcript(ctx.env, target.cwd, session)
        ctx.log.debug("claude.resume.transcript", path=str(path))

    async def prepare(
        self, target: HarnessTarget[ClaudeDescriptor], ctx: HarnessContext
    ) -> Prepared:
        """Resolve the CLI and write the step's private files (MCP config, shell prefix)."""
        descriptor = target.descriptor
        executable = self.resolve_executable(ctx.env)  # the contract: the kit swaps it
        ctx.log.debug("claude.executable", path=str(executable.path), source=executable.source)
        private = ctx.private_dir("jigs-claude-")
        _expose_config(ctx, target.cwd)
        await _seed_config_file(ctx, executable.path, private)
        config = _EMPTY_MCP
        if descriptor.mcp_servers:
            data = json.dumps(mcp_config(descriptor.mcp_servers, ctx.env)).encode()
            config = str(private_file(private / "mcp.json", data))
        # always: even on the login route Claude Code's shell must not read ~/.bashrc
        prefix = write_shell_prefix(private, ctx.env)
        plugin = _skills_plugin(descriptor, private)
        return Prepared(executable.path, config, prefix, private, ctx.model_endpoint, plugin)

    def launch_turn(
        self, turn: TurnSpec[ClaudeDescriptor], ctx: HarnessContext, state: Prepared
    ) -> TurnLaunch:
        return launch(turn, state)

    def decoder(self, turn: TurnSpec[ClaudeDescriptor]) -> ClaudeDecoder:
        return ClaudeDecoder(partial=turn.partial, options=turn.options)

    def config_files(self) -> Sequence[ConfigFile]:
        """What Claude Code would read from the worktree and HOME: none of it is loaded."""
        from jigs_harness_claude._config_files import CONFIG_FILES  # the kit's types (jigs_testing)

        return CONFIG_FILES

    def demo_plan(self, server: ModelServer) -> DemoPlan:
        """``jigs demo``: the real CLI against ``server``; the agent writes the file with its
        own Bash tool, then resumes and answers from its history."""
        # jigs-testing comes with the kit and `jigs demo`, not with the kind
        from jigs_testing.plan import DemoPlan, mcp_tool, scripted_command, scripted_write

        key = "JIGS_DEMO_ANTHROPIC_KEY"
        root = os.geteuid() == 0
        return DemoPlan(
            descriptor=ClaudeDescriptor(base_url=server.anthropic_base_url, api_key_env=key),
            write_file=scripted_write(
                "Bash",
                lambda path, content: {
                    "command": f"printf %s {shlex.quote(content)} > {shlex.quote(path)}",
                    "description": f"write {path}",
                },
            ),
            edit_file=scripted_write(
                "Write", lambda path, content: {"file_path": path, "content": content}
            ),
            run_command=scripted_command(
                "Bash", lambda command: {"command": command, "description": "run a command"}
            ),
            host_env={key: "sk-demo", **({"IS_SANDBOX": "1"} if root else {})},
            agents_env=("IS_SANDBOX",) if root else (),
            step_tool=mcp_tool,
        )


def _skills_plugin(descriptor: ClaudeDescriptor, private: Path) -> Path | None:
    """The descriptor's skills as a plugin in the step's private dir (``--plugin-dir``): a
    manifest and ``skills/<name>/``, nothing else (no hooks, servers or commands)."""
    if not descriptor.skills:
        return None
    plugin = private / "skills-plugin"
    try:
        copy_skills(descriptor.skills, plugin / "skills")
    except OSError as exc:
        raise DescriptorError(
            f"a skill of the claude descriptor cannot be read ({exc}); fix the path in skills",
            kind="claude",
            key="skills",
        ) from None
    manifest = {"name": "jigs-step", "version": "0.0.0", "description": "the step's skills"}
    (plugin / ".claude-plugin").mkdir(mode=0o700)
    private_file(plugin / ".claude-plugin" / "plugin.json", json.dumps(manifest).encode())
    return plugin


async def _seed_config_file(ctx: HarnessContext, executable: Path, private: Path) -> None:
    """In a sandbox, give Claude Code a copy of the binary's seed ``.claude.json`` where it
    reads it (:mod:`._seed`), so its first-start work is not redone on every turn. Not on the
    login route with ``CLAUDE_CONFIG_DIR`` set: the operator's own file is in the exposed
    config dir there."""
    explicit = ctx.env.get("CLAUDE_CONFIG_DIR")
    if ctx.sandbox is None or (explicit and ctx.model_endpoint is None):
        return
    where = explicit or ctx.env.get("HOME")
    if not where:
        return
    seed_env = {name: ctx.env[name] for name in _SEED_ENV if name in ctx.env}
    seed = await ensure_seed(executable, seed_env, ctx.log)
    if seed is None:
        return
    copy = private_file(private / "claude.json", seed)
    ctx.expose(copy, writable=True, at=Path(where) / ".claude.json")


def _expose_config(ctx: HarnessContext, cwd: Path) -> None:
    """What Claude Code's sandbox shows of its config dir: on the key route only this
    worktree's transcripts (read-write; other projects' are absent); on the login route the
    whole config dir, read-write, since Claude Code reads and refreshes its login there (the
    agent can read that login: ``jigs doctor`` says so)."""
    config = config_dir(ctx.env)
    if ctx.model_endpoint is None:
        config.mkdir(parents=True, exist_ok=True, mode=0o700)
        ctx.expose(config, writable=True)
        return
    transcripts = config / "projects" / project_dir_name(cwd)
    transcripts.mkdir(parents=True, exist_ok=True, mode=0o700)
    ctx.expose(transcripts, writable=True)
