"""The echo kind: a one-shot CLI per turn, with sessions in the run's state dir.

It is the smallest complete kind: a descriptor, an executable, the argv of one turn and a decoder
from the CLI's JSON lines to :mod:`jigs.events`. Everything else (deadlines, limits, errors,
structured output, the model object) is the core's.
"""

from __future__ import annotations

import glob
import sys
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal
from urllib.parse import quote

from jigs.checks import Check, CheckFailure, CheckOk, CheckResult
from jigs.descriptors import HarnessDescriptor, LimitEnforcer
from jigs.errors import AgentSessionError
from jigs.executables import Resolved
from jigs.plugin import (
    Harness,
    HarnessContext,
    HarnessTarget,
    TurnLaunch,
    TurnSpec,
    artifacts_under,
)

if TYPE_CHECKING:
    from jigs.events import AgentEvent
    from jigs_testing import ConfigFile, ModelServer
    from jigs_testing.plan import DemoPlan

#: Prompts longer than this go through stdin.
_MAX_PROMPT_ARG = 100_000

#: The CLI runs as a script in isolated mode: it imports only the standard library, and run as
#: ``-m jigs_harness_echo._cli`` it first imported this package, so jigs and pydantic (~0.3 s of
#: CPU a turn, ten times the CLI's own work: a "trivial" step measured the import, issue 35).
_CLI = Path(__file__).with_name("_cli.py")


class EchoDescriptor(HarnessDescriptor):
    """Settings of the echo kind."""

    limits: ClassVar[Mapping[str, LimitEnforcer]] = {"max_turns": "core", "max_budget_usd": "core"}

    kind: Literal["echo"] = "echo"
    model: str = "echo-1"
    prefix: str = ""

    def model_id(self) -> str | None:
        return self.model


class EchoDecoder:
    """The echo CLI's lines as events."""

    def __init__(self) -> None:
        self._calls = 0

    def decode(self, message: dict[str, Any]) -> Iterable[AgentEvent]:
        # here, not at module level: resolving the kind does not load the event classes
        from jigs.events import (
            ModelCallStarted,
            SessionStarted,
            TextDelta,
            ToolCallFinished,
            ToolCallStarted,
            TurnCompleted,
            TurnFailed,
            UsageUpdated,
        )
        from jigs.models import Usage

        kind = message.get("type")
        if kind == "start":
            return [SessionStarted(session_id=str(message["session_id"]))]
        if kind == "model":
            return [ModelCallStarted()]
        if kind == "usage":
            usage = Usage(input_tokens=int(message["input"]), cost_usd=float(message["cost"]))
            return [UsageUpdated(usage=usage)]
        if kind == "text":
            return [TextDelta(text=str(message["text"]))]
        if kind == "tool":
            call_id = f"call-{self._calls}"
            self._calls += 1
            name = str(message["name"])
            return [
                ToolCallStarted(id=call_id, name=name, arguments=message["arguments"]),
                ToolCallFinished(id=call_id, name=name, output="ok"),
            ]
        if kind == "failed":
            reason = str(message["reason"])
            return [TurnFailed(reason=reason, message=str(message["message"]), stop_reason=reason)]
        if kind == "result":
            return [
                TurnCompleted(
                    text=str(message["text"]),
                    stop_reason="end_turn",
                    metadata={"turns": message.get("turns")},
                )
            ]
        return []


class EchoHarness(Harness[EchoDescriptor]):
    kind: ClassVar[str] = "echo"
    contract: ClassVar[str | None] = "2.0"
    display_name: ClassVar[str] = "Echo (jigs test kind)"
    descriptor_type: ClassVar[type[HarnessDescriptor]] = EchoDescriptor
    install_hint: ClassVar[str] = "reinstall jigs-harness-echo"

    def resolve_executable(self, env: Mapping[str, str]) -> Resolved:
        return Resolved(Path(sys.executable), f"the Python running jigs (-I {_CLI})")

    def installation_checks(self, env: Mapping[str, str]) -> Sequence[Check]:
        async def run() -> CheckResult:
            return CheckOk(f"{sys.executable} -I {_CLI}")

        return [Check("harness.echo-cli", "Echo CLI", run)]

    def jit_checks(
        self, target: HarnessTarget[EchoDescriptor], env: Mapping[str, str]
    ) -> Sequence[Check]:
        """Fails when the worktree holds ``.echo-deny`` (how tests make a JIT check fail)."""

        async def run() -> CheckResult:
            deny = target.cwd / ".echo-deny"
            if deny.exists():
                return CheckFailure(
                    reason=f"{deny} says: {deny.read_text().strip()}", repair=f"remove {deny}"
                )
            return CheckOk("no .echo-deny in the worktree")

        return [Check("echo.worktree", "Echo worktree", run)]

    async def verify_resume(
        self, target: HarnessTarget[EchoDescriptor], ctx: HarnessContext
    ) -> None:
        assert target.resume is not None
        path: Path = ctx.state_dir / "sessions" / f"{target.resume.id}.json"
        if not path.is_file():
            raise AgentSessionError(
                f"echo session {target.resume.id} is missing from {path.parent}; "
                f"start without resume",
                kind="echo",
                session_id=target.resume.id,
            )

    def session_artifacts(
        self,
        session_id: str,
        ctx: HarnessContext,
        cwd: Path,
        *,
        names: Collection[str] | None = None,
    ) -> Mapping[str, Path]:
        """One file: ``<state_dir>/sessions/<id>.json`` (the history of prompts)."""
        return artifacts_under(ctx.state_dir / "sessions", f"{glob.escape(session_id)}.json", names)

    async def prepare(self, target: HarnessTarget[EchoDescriptor], ctx: HarnessContext) -> Path:
        """A private scratch dir, the CLI's ``TMPDIR`` (removed at close on every path); the
        CLI runs on the worker's Python, so the sandbox shows it (read-only)."""
        ctx.expose_python()
        return ctx.private_dir()

    def launch_turn(
        self, turn: TurnSpec[EchoDescriptor], ctx: HarnessContext, state: Any
    ) -> TurnLaunch:
        argv = [
            str(self.resolve_executable(ctx.env).path),
            "-I",
            str(_CLI),
            "--sessions",
            str(ctx.state_dir / "sessions"),
            "--prefix",
            turn.descriptor.prefix,
        ]
        if turn.session_id:
            argv += ["--resume", turn.session_id, *(["--fork"] if turn.fork else [])]
        env = {"TMPDIR": str(state)} if isinstance(state, Path) else {}
        if len(turn.prompt.encode()) > _MAX_PROMPT_ARG:
            return TurnLaunch([*argv, "--prompt-stdin"], stdin=turn.prompt.encode(), env=env)
        return TurnLaunch([*argv, "--", turn.prompt], env=env)

    def decoder(self, turn: TurnSpec[EchoDescriptor]) -> EchoDecoder:
        return EchoDecoder()

    def config_files(self) -> Sequence[ConfigFile]:
        """The echo CLI reads no config file from the worktree or HOME."""
        return ()

    def demo_plan(self, server: ModelServer) -> DemoPlan:
        """The echo CLI needs no model server: its "tool calls" are prompt directives (``sh:``
        runs a shell command and answers with its output)."""
        from jigs_testing.plan import DemoPlan

        return DemoPlan(
            descriptor=EchoDescriptor(),
            write_file=lambda _server, path, content: f"write:{path}:{quote(content)}",
            recall=lambda _server: "recall",
            hang=lambda _server: "sleep:600",
            run_command=lambda _server, command: f"sh:{quote(command)}",
        )
