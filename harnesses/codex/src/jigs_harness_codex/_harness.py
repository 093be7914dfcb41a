"""The codex harness kind: what the core calls."""

from __future__ import annotations

import glob
import shlex
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from jigs.checks import Check
from jigs.descriptors import HarnessDescriptor
from jigs.errors import AgentSessionError, CliNotFoundError
from jigs.executables import Resolved
from jigs.plugin import Harness, HarnessContext, HarnessTarget, ModelRoute, artifacts_under

from jigs_harness_codex._checks import (
    auth_check,
    cli_check,
    system_config_check,
    worktree_config_check,
)
from jigs_harness_codex._descriptor import DEFAULT_OPENAI_BASE_URL, CodexDescriptor
from jigs_harness_codex._executable import (
    RUNTIME_WHEEL,
    RUNTIME_WHEEL_VERSION,
    fix_hint,
    resolve_executable,
    wheel_binary,
)
from jigs_harness_codex._home import live_sessions_dirs, rollout_for, sessions_dir
from jigs_harness_codex._seed import ensure_seed
from jigs_harness_codex._transport import open_transport

#: ``jigs install`` has no step waiting on it: the seed may take as long as a slow disk needs
_WARM_TIMEOUT = 60.0

if TYPE_CHECKING:
    from jigs_testing import ConfigFile
    from jigs_testing.plan import DemoPlan

    from jigs_harness_codex._transport import CodexTransport

__all__ = ["CodexHarness"]


class CodexHarness(Harness[CodexDescriptor]):
    """Codex through its app server, in a private home, with threads resumable within a run.

    The second shape of the contract: :meth:`open_transport` starts one app server per step and
    every turn runs on its thread (:mod:`._transport`, decoded by :mod:`._turn`). Structured
    output is native (``turn/start`` ``outputSchema``); ``max_turns`` is counted by the core
    from the decoder's model requests. No per-call setting is honoured (``system`` would need a
    new thread: set ``developer_instructions`` on the descriptor).
    """

    kind: ClassVar[str] = "codex"
    contract: ClassVar[str | None] = "2.0"
    display_name: ClassVar[str] = "Codex"
    tool_gate: ClassVar[bool] = True
    descriptor_type: ClassVar[type[HarnessDescriptor]] = CodexDescriptor
    sets_env: ClassVar[frozenset[str]] = frozenset({"CODEX_HOME"})
    structured_output: ClassVar[Literal["native", "prompted"]] = "native"
    call_settings: ClassVar[frozenset[str]] = frozenset()
    #: ``localImage`` input items of ``turn/start``.
    takes_images: ClassVar[bool] = True
    install_hint: ClassVar[str] = fix_hint()

    def resolve_executable(self, env: Mapping[str, str]) -> Resolved:
        """The Codex CLI in the documented order (see :mod:`jigs_harness_codex._executable`)."""
        return resolve_executable(env)

    async def warm(self, env: Mapping[str, str], log: Any) -> str | None:
        """The CLI's home seed (what every step's private home starts from), made if missing."""
        executable = resolve_executable(env).path
        seed = await ensure_seed(executable, env, log, timeout=_WARM_TIMEOUT)
        if seed is None:
            return "no home seed (see the log); the first step will try again"
        return f"home seed in place at {seed}"

    def model_route(self, descriptor: CodexDescriptor) -> ModelRoute | None:
        """With ``api_key_env``: the descriptor's ``base_url`` (or OpenAI's API), bearer."""
        if not descriptor.api_key_env:
            return None
        return ModelRoute(
            upstream=descriptor.base_url or DEFAULT_OPENAI_BASE_URL,
            key_env=descriptor.api_key_env,
            scheme="bearer",
            model_calls=("POST /responses",),  # Codex speaks the Responses API only
        )

    def login_route(self, descriptor: CodexDescriptor) -> str | None:
        if descriptor.names_endpoint:
            return None  # an endpoint without a key: nothing secret
        return (
            "the operator's Codex login (auth.json, linked into the private CODEX_HOME): not "
            "proxied, readable by the agent"
        )

    def installation_checks(self, env: Mapping[str, str]) -> Sequence[Check]:
        return [cli_check(env)]

    def descriptor_checks(
        self, descriptor: CodexDescriptor, env: Mapping[str, str]
    ) -> Sequence[Check]:
        return [auth_check(descriptor, env)]

    def jit_checks(
        self, target: HarnessTarget[CodexDescriptor], env: Mapping[str, str]
    ) -> Sequence[Check]:
        return [worktree_config_check(target.cwd), system_config_check()]

    def tool_free_problem(self, descriptor: CodexDescriptor) -> str | None:
        """The thread starts ephemeral (no rollout) with every tool feature off: no shell or
        exec, no image viewer, no subagents, no goals, no web search, no user-input tool
        (:mod:`._transport`)."""
        return None

    def session_artifacts(
        self,
        session_id: str,
        ctx: HarnessContext,
        cwd: Path,
        *,
        names: Collection[str] | None = None,
    ) -> Mapping[str, Path]:
        """The thread's rollout in the run's session store (``YYYY/MM/DD/rollout-*-<id>.jsonl``),
        or, while its step runs, in that step's home (moved to the store at close)."""
        pattern = f"rollout-*-{glob.escape(session_id)}.jsonl"
        found = artifacts_under(sessions_dir(ctx.state_dir), pattern, names)
        if names is None:
            for live in live_sessions_dirs(ctx.state_dir):
                found.update(artifacts_under(live, pattern))
        return found

    async def verify_resume(
        self, target: HarnessTarget[CodexDescriptor], ctx: HarnessContext
    ) -> None:
        if target.resume is None:
            return
        store = sessions_dir(ctx.state_dir)
        if rollout_for(store, target.resume.id) is None:
            raise AgentSessionError(
                f"Codex thread {target.resume.id} is missing from this run's session store "
                f"({store}); a thread can only be resumed by a later step of the run that "
                f"recorded it. Start without resume",
                kind=self.kind,
                session_id=target.resume.id,
            )

    async def open_transport(
        self, target: HarnessTarget[CodexDescriptor], ctx: HarnessContext
    ) -> CodexTransport:

        # the executable comes from resolve_executable (the contract; the conformance kit
        # swaps it for a CLI that hangs)
        return await open_transport(target, ctx, self.resolve_executable(ctx.env))

    def config_files(self) -> Sequence[ConfigFile]:
        """What Codex would read from the worktree and HOME (see :mod:`._config_files`)."""
        from jigs_harness_codex._config_files import CONFIG_FILES  # the kit's types (jigs_testing)

        return CONFIG_FILES

    def demo_plan(self, server: Any) -> DemoPlan:
        """``jigs demo`` and the conformance kit: the real CLI against ``server`` through a
        provider the descriptor names; the agent writes the file with its own ``exec_command``
        tool, then a second step resumes the thread and answers from its history."""
        # jigs-testing comes with the kit and `jigs demo`, not with the kind
        from jigs_testing.plan import DemoPlan, mcp_tool, scripted_command, scripted_write

        key = "JIGS_DEMO_CODEX_KEY"
        return DemoPlan(
            descriptor=CodexDescriptor(
                model="jigs-demo-model",
                base_url=server.openai_base_url,
                api_key_env=key,
                max_retries=0,
            ),
            write_file=scripted_write(
                "exec_command",
                lambda path, content: {
                    "cmd": f"printf %s {shlex.quote(content)} > {shlex.quote(path)}"
                },
            ),
            run_command=scripted_command("exec_command", lambda command: {"cmd": command}),
            # Codex takes an apply_patch heredoc in its shell tool as a file change
            edit_file=scripted_write(
                "exec_command",
                lambda path, content: {"cmd": _add_file_patch(path, content)},
            ),
            host_env={key: "sk-demo"},
            step_tool=mcp_tool,
        )

    async def install(self, env: Mapping[str, str]) -> str:
        path = wheel_binary()
        if path is not None:
            return (
                f"the Codex CLI arrives with pip: {RUNTIME_WHEEL}=={RUNTIME_WHEEL_VERSION} at "
                f"{path}; nothing to install"
            )
        raise CliNotFoundError(
            "codex",
            [f"the {RUNTIME_WHEEL} wheel is missing"],
            f"pip install --force-reinstall jigs-harness-codex (it brings "
            f"{RUNTIME_WHEEL}=={RUNTIME_WHEEL_VERSION})",
        )


def _add_file_patch(path: str, content: str) -> str:
    """An ``apply_patch`` command that adds ``path`` with ``content``."""
    lines = "".join(f"+{line}\n" for line in content.splitlines())
    return (
        f"apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: {path}\n{lines}*** End Patch\nEOF\n"
    )
