"""The claude harness kind: what the core calls, wired to the modules that do the work.

Where things live: transcripts in the operator's Claude Code config dir (``CLAUDE_CONFIG_DIR``
or ``~/.claude``), so the operator's login keeps working (token refreshes write back to the same
place) and ``claude --resume`` from a shell finds jigs' sessions. A per-run private dir (removed
when the runner closes) holds the MCP config file when the step declares servers, so resolved
credentials never appear on a command line, and, when the descriptor names an endpoint key, the
shell prefix that keeps that key out of the agent's commands (:mod:`._shell`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from jigs.checks import Check
from jigs.descriptors import HarnessDescriptor
from jigs.executables import Resolved
from jigs.plugin import Harness, HarnessContext, HarnessTarget

from jigs_harness_claude._checks import auth_check, cli_check, key_check, root_check
from jigs_harness_claude._descriptor import ClaudeDescriptor
from jigs_harness_claude._executable import resolve_executable
from jigs_harness_claude._launch import SETS_ENV
from jigs_harness_claude._mcp import mcp_config
from jigs_harness_claude._model import ClaudeModel
from jigs_harness_claude._sessions import verify_transcript
from jigs_harness_claude._shell import write_shell_prefix

if TYPE_CHECKING:
    from jigs.testing.plan import DemoPlan

__all__ = ["ClaudeHarness"]

_EMPTY_MCP = '{"mcpServers":{}}'


class ClaudeHarness(Harness):
    """Claude Code (``claude -p``, stream-json) as a jigs harness kind."""

    kind: ClassVar[str] = "claude"
    display_name: ClassVar[str] = "Claude Code"
    descriptor_type: ClassVar[type[HarnessDescriptor]] = ClaudeDescriptor
    sets_env: ClassVar[frozenset[str]] = SETS_ENV

    def env_allowlist(self, descriptor: HarnessDescriptor) -> Collection[str]:
        # the operator's config dir (login, transcripts); the model key is NOT listed: it is
        # copied into ANTHROPIC_API_KEY at launch and never reaches the agent under its own name
        return {*descriptor.env_names(), "CLAUDE_CONFIG_DIR"}

    def resolve_executable(self, env: Mapping[str, str]) -> Resolved:
        """The CLI: ``$JIGS_CLAUDE_EXECUTABLE``, ``claude`` on PATH, the pip-bundled copy."""
        return resolve_executable(env)

    def installation_checks(self, env: Mapping[str, str]) -> Sequence[Check]:
        return [cli_check(env), root_check(env), auth_check(env)]

    def descriptor_checks(
        self, descriptor: HarnessDescriptor, env: Mapping[str, str]
    ) -> Sequence[Check]:
        assert isinstance(descriptor, ClaudeDescriptor)
        checks = [root_check(env)]
        if descriptor.api_key_env is not None:
            checks.append(key_check(descriptor))
        else:
            checks.append(auth_check(env, fast=True))
        return checks

    async def verify_resume(self, target: HarnessTarget, ctx: HarnessContext) -> None:
        assert target.resume is not None
        path = verify_transcript(ctx.env, target.cwd, target.resume.id)
        ctx.log.debug("claude.resume.transcript", path=str(path))

    async def open(self, target: HarnessTarget, ctx: HarnessContext) -> ClaudeModel:
        descriptor = target.descriptor
        assert isinstance(descriptor, ClaudeDescriptor)
        executable = resolve_executable(ctx.env)
        ctx.log.debug("claude.executable", path=str(executable.path), source=executable.source)
        config = _EMPTY_MCP
        private: Path | None = None
        if descriptor.mcp_servers:
            private = _private_dir(ctx)
            config = str(
                _write_json(private / "mcp.json", mcp_config(descriptor.mcp_servers, ctx.env))
            )
        prefix = None
        if descriptor.api_key_env is not None:
            prefix = write_shell_prefix(private or _private_dir(ctx))
        return ClaudeModel(
            descriptor,
            cwd=target.cwd,
            ctx=ctx,
            executable=executable.path,
            mcp_config=config,
            resume_id=target.resume.id if target.resume else None,
            shell_prefix=prefix,
        )

    def demo_plan(self, server: Any) -> DemoPlan:
        """``jigs demo``: the real CLI against ``server``; the agent writes the file with its
        own Bash tool, then resumes and answers from its history."""
        import shlex

        from jigs.testing.plan import DemoPlan, scripted_write

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
            host_env={key: "sk-demo", **({"IS_SANDBOX": "1"} if root else {})},
            agents_env=("IS_SANDBOX",) if root else (),
        )


def _private_dir(ctx: HarnessContext) -> Path:
    """A fresh 0700 dir that is removed when the runner closes."""
    private = Path(tempfile.mkdtemp(prefix="jigs-claude-"))
    ctx.callback(shutil.rmtree, private, True)
    return private


def _write_json(path: Path, data: object) -> Path:
    """Write ``data`` as JSON to a new 0600 file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    return path
