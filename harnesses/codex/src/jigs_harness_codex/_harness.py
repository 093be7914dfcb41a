"""The codex harness kind: what the core calls."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from jigs.checks import Check
from jigs.descriptors import HarnessDescriptor
from jigs.errors import AgentSessionError
from jigs.executables import Resolved
from jigs.models import LanguageModel
from jigs.plugin import Harness, HarnessContext, HarnessTarget

from jigs_harness_codex._checks import (
    auth_check,
    cli_check,
    system_config_check,
    worktree_config_check,
)
from jigs_harness_codex._descriptor import CodexDescriptor
from jigs_harness_codex._executable import (
    RUNTIME_WHEEL,
    RUNTIME_WHEEL_VERSION,
    resolve_executable,
    wheel_binary,
)
from jigs_harness_codex._home import rollout_for, sessions_dir

if TYPE_CHECKING:
    from jigs.testing.plan import DemoPlan

__all__ = ["CodexHarness"]


class CodexHarness(Harness):
    """Codex through its app server, in a private home, with threads resumable within a run."""

    kind: ClassVar[str] = "codex"
    display_name: ClassVar[str] = "Codex"
    descriptor_type: ClassVar[type[HarnessDescriptor]] = CodexDescriptor
    sets_env: ClassVar[frozenset[str]] = frozenset({"CODEX_HOME"})

    def resolve_executable(self, env: Mapping[str, str]) -> Resolved:
        """The Codex CLI in the documented order (see :mod:`jigs_harness_codex._executable`)."""
        return resolve_executable(env)

    def env_allowlist(self, descriptor: HarnessDescriptor) -> Collection[str]:
        return descriptor.env_names()

    def installation_checks(self, env: Mapping[str, str]) -> Sequence[Check]:
        return [cli_check(env)]

    def descriptor_checks(
        self, descriptor: HarnessDescriptor, env: Mapping[str, str]
    ) -> Sequence[Check]:
        assert isinstance(descriptor, CodexDescriptor)
        return [auth_check(descriptor, env)]

    def jit_checks(self, target: HarnessTarget, env: Mapping[str, str]) -> Sequence[Check]:
        return [worktree_config_check(target.cwd), system_config_check()]

    async def verify_resume(self, target: HarnessTarget, ctx: HarnessContext) -> None:
        assert target.resume is not None
        store = sessions_dir(ctx.state_dir)
        if rollout_for(store, target.resume.id) is None:
            raise AgentSessionError(
                f"Codex thread {target.resume.id} is missing from this run's session store "
                f"({store}); a thread can only be resumed by a later step of the run that "
                f"recorded it. Start without resume",
                kind=self.kind,
                session_id=target.resume.id,
            )

    async def open(self, target: HarnessTarget, ctx: HarnessContext) -> LanguageModel:
        from jigs_harness_codex._model import open_model

        return await open_model(target, ctx)

    def demo_plan(self, server: Any) -> DemoPlan:
        """``jigs demo`` and the conformance kit: the real CLI against ``server`` through a
        provider the descriptor names; the agent writes the file with its own ``exec_command``
        tool, then a second step resumes the thread and answers from its history."""
        import shlex

        from jigs.testing.plan import DemoPlan, scripted_write

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
            host_env={key: "sk-demo"},
        )

    async def install(self, env: Mapping[str, str]) -> str:
        path = wheel_binary()
        if path is not None:
            return (
                f"the Codex CLI arrives with pip: {RUNTIME_WHEEL}=={RUNTIME_WHEEL_VERSION} at "
                f"{path}; nothing to install"
            )
        raise NotImplementedError(
            f"the {RUNTIME_WHEEL} wheel is missing; run: pip install --force-reinstall "
            f"jigs-harness-codex (it brings {RUNTIME_WHEEL}=={RUNTIME_WHEEL_VERSION})"
        )
