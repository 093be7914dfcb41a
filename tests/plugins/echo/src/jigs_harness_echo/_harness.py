"""The echo kind: a model object over a one-shot CLI, with sessions in the run's state dir."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal
from urllib.parse import quote

from jigs.checks import Check, CheckFailure, CheckOk, CheckResult
from jigs.descriptors import HarnessDescriptor
from jigs.errors import AgentCrashedError, AgentOutputError, AgentSessionError
from jigs.models import (
    FinishPart,
    GenerateResult,
    ModelRequest,
    StreamingModel,
    StreamPart,
    TextDeltaPart,
    ToolCall,
    ToolCallPart,
)
from jigs.plugin import Harness, HarnessContext, HarnessTarget

if TYPE_CHECKING:
    from jigs.testing import ModelServer
    from jigs.testing.plan import DemoPlan


class EchoDescriptor(HarnessDescriptor):
    """Settings of the echo kind."""

    kind: Literal["echo"] = "echo"
    model: str = "echo-1"
    prefix: str = ""


class EchoModel(StreamingModel):
    provider = "echo"

    def __init__(self, descriptor: EchoDescriptor, target: HarnessTarget, ctx: HarnessContext):
        self.model_id = descriptor.model
        self._descriptor = descriptor
        self._cwd = target.cwd
        self._ctx = ctx
        self._session = target.resume.id if target.resume else None

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        warnings = request.unsupported("temperature", "top_p", "seed")
        argv = [
            sys.executable,
            "-m",
            "jigs_harness_echo._cli",
            "--sessions",
            str(self._ctx.state_dir / "sessions"),
            "--prefix",
            self._descriptor.prefix,
        ]
        if self._session:
            argv += ["--resume", self._session]
        proc = await self._ctx.launch([*argv, request.prompt], cwd=self._cwd)
        result: dict[str, object] | None = None
        calls: list[ToolCall] = []
        try:
            number = 0
            async for raw in proc.lines():
                number += 1
                try:
                    event = json.loads(raw)
                except ValueError:
                    raise AgentOutputError(
                        f"the echo CLI printed a line that is not JSON (line {number}): "
                        f"{raw[:80]!r}",
                        kind="echo",
                        line=number,
                    ) from None
                if event["type"] == "text":
                    yield TextDeltaPart(text=str(event["text"]))
                elif event["type"] == "tool":
                    call = ToolCall(
                        id=f"call-{len(calls)}", name=event["name"], arguments=event["arguments"]
                    )
                    calls.append(call)
                    yield ToolCallPart(call=call)
                elif event["type"] == "result":
                    result = event
            code = await proc.wait()
            if code != 0:
                raise AgentCrashedError(
                    f"the echo CLI exited with code {code}",
                    kind="echo",
                    returncode=code,
                    stderr_tail=proc.stderr_tail(),
                )
            if result is None:
                raise AgentOutputError(
                    "the echo CLI ended without a result event", kind="echo", line=number
                )
        finally:
            await proc.stop()
        self._session = str(result["session_id"])
        yield FinishPart(
            result=GenerateResult(
                text=str(result["text"]),
                warnings=tuple(warnings),
                tool_calls=tuple(calls),
                provider_metadata={"echo": {"session_id": self._session}},
                model_id=self.model_id,
            )
        )


class EchoHarness(Harness):
    kind: ClassVar[str] = "echo"
    display_name: ClassVar[str] = "Echo (jigs test kind)"
    descriptor_type: ClassVar[type[HarnessDescriptor]] = EchoDescriptor

    def installation_checks(self, env: Mapping[str, str]) -> Sequence[Check]:
        async def run() -> CheckResult:
            return CheckOk(f"{sys.executable} -m jigs_harness_echo._cli")

        return [Check("harness.echo-cli", "Echo CLI", run)]

    def jit_checks(self, target: HarnessTarget, env: Mapping[str, str]) -> Sequence[Check]:
        """Fails when the worktree holds ``.echo-deny`` (how tests make a JIT check fail)."""

        async def run() -> CheckResult:
            deny = target.cwd / ".echo-deny"
            if deny.exists():
                return CheckFailure(
                    reason=f"{deny} says: {deny.read_text().strip()}", repair=f"remove {deny}"
                )
            return CheckOk("no .echo-deny in the worktree")

        return [Check("echo.worktree", "Echo worktree", run)]

    async def verify_resume(self, target: HarnessTarget, ctx: HarnessContext) -> None:
        assert target.resume is not None
        path: Path = ctx.state_dir / "sessions" / f"{target.resume.id}.json"
        if not path.is_file():
            raise AgentSessionError(
                f"echo session {target.resume.id} is missing from {path.parent}; "
                f"start without resume",
                kind="echo",
                session_id=target.resume.id,
            )

    def demo_plan(self, server: ModelServer) -> DemoPlan:
        """The echo CLI needs no model server: its "tool calls" are prompt directives."""
        from jigs.testing.plan import DemoPlan

        return DemoPlan(
            descriptor=EchoDescriptor(),
            write_file=lambda _server, path, content: f"write:{path}:{quote(content)}",
            recall=lambda _server: "recall",
        )

    async def open(self, target: HarnessTarget, ctx: HarnessContext) -> EchoModel:
        assert isinstance(target.descriptor, EchoDescriptor)
        return EchoModel(target.descriptor, target, ctx)
