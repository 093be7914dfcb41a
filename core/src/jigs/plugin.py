"""The contract a harness distribution implements.

A distribution declares an entry point in the group ``jigs.harnesses`` whose name is the kind and
whose value is a module with pluggy hook implementations::

    [project.entry-points."jigs.harnesses"]
    mykind = "jigs_harness_mykind.plugin"

    # jigs_harness_mykind/plugin.py
    from jigs.plugin import hookimpl

    @hookimpl
    def jigs_register_harnesses(register):
        register(MyKindHarness())

A :class:`Harness` owns its CLI's flags, files and wire format; the core owns the pipeline (env,
checks, lock), process supervision and the model protocol. Resources a kind acquires while opening
go on ``ctx`` (:meth:`HarnessContext.launch`, :meth:`HarnessContext.callback`), so the core releases
them, in reverse order, on every path.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

import pluggy

from jigs._types import AgentSessionRef, RunMetadata
from jigs.checks import Check
from jigs.descriptors import HarnessDescriptor
from jigs.errors import AgentSessionError, ModelNotAvailableError, RunnerClosedError
from jigs.models._protocol import LanguageModel
from jigs.models._types import GenerateResult, ModelRequest, Usage
from jigs.processes import ManagedProcess, launch

__all__ = [
    "AgentRequest",
    "AgentTurn",
    "Harness",
    "HarnessContext",
    "HarnessTarget",
    "hookimpl",
    "hookspec",
]

if TYPE_CHECKING:
    from jigs.testing._server.server import ModelServer
    from jigs.testing.plan import DemoPlan

hookspec = pluggy.HookspecMarker("jigs")
hookimpl = pluggy.HookimplMarker("jigs")

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class HarnessTarget:
    """What a step asks for: a descriptor, the worktree, and optionally a session to resume."""

    descriptor: HarnessDescriptor
    cwd: Path
    resume: AgentSessionRef | None = None


@dataclass(slots=True)
class HarnessContext:
    """Everything the core hands a kind while it opens or runs.

    ``env`` is the exact environment the agent gets (built from empty); ``state_dir`` is durable
    per run and kind (session stores go there). Register cleanups on the context; they run in
    reverse order when the runner closes or when opening fails.
    """

    run: RunMetadata
    env: Mapping[str, str]
    state_dir: Path
    kind: str
    stack: AsyncExitStack
    log: Any
    #: Set when the step is being released; nothing new may start after that.
    closed: bool = False

    async def launch(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        stdin: Literal["closed", "pipe"] = "closed",
        owner: str | None = None,
    ) -> ManagedProcess:
        """Launch a process with ``env`` (default: exactly ``self.env``) in its own group; it is
        stopped (TERM, grace, KILL) when the runner closes. Raises
        :class:`~jigs.errors.RunnerClosedError` once the runner is closed."""
        if self.closed:
            raise RunnerClosedError(self.kind, self.run.workflow_run_id)
        process = await launch(
            argv,
            cwd=cwd,
            env=self.env if env is None else env,
            stdin=stdin,
            kind=self.kind,
            owner=owner or f"{self.kind} for run {self.run.workflow_run_id}",
        )
        self.stack.push_async_callback(process.stop)
        return process

    def callback(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` at close (after later-registered cleanups)."""
        self.stack.callback(fn, *args)

    def async_callback(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Await ``fn(*args)`` at close."""
        self.stack.push_async_callback(fn, *args)


@dataclass(frozen=True, slots=True)
class AgentRequest:
    """One whole turn for :func:`jigs.steps.run_agent`."""

    target: HarnessTarget
    prompt: str
    output_schema: dict[str, Any] | None = None
    provider_options: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AgentTurn:
    """What a kind's :meth:`Harness.run` returns."""

    text: str
    session_id: str | None
    output: Any = None
    usage: Usage = field(default_factory=Usage)
    provider_metadata: dict[str, dict[str, Any]] = field(default_factory=dict)


class Harness(ABC):
    """One harness kind. Subclasses set the class variables and override what they support."""

    #: The kind name; must equal the entry point's name.
    kind: ClassVar[str]
    #: A human name for tables and messages ("Claude Code").
    display_name: ClassVar[str]
    #: The kind's descriptor class (a :class:`HarnessDescriptor` subclass).
    descriptor_type: ClassVar[type[HarnessDescriptor]]
    #: False for kinds that only run whole turns (``run_agent``), such as Pi.
    has_model: ClassVar[bool] = True
    #: Environment names the kind sets itself (refused in ``agents.env``).
    sets_env: ClassVar[frozenset[str]] = frozenset()

    def env_allowlist(self, descriptor: HarnessDescriptor) -> Collection[str]:
        """Host variable names this descriptor needs beyond the base list (MCP credentials,
        a model key named on the descriptor, ...)."""
        return descriptor.env_names()

    def installation_checks(self, env: Mapping[str, str]) -> Sequence[Check]:
        """Checks every descriptor of the kind needs: CLI present and recent enough, a login."""
        return ()

    def descriptor_checks(
        self, descriptor: HarnessDescriptor, env: Mapping[str, str]
    ) -> Sequence[Check]:
        """Checks the descriptor alone decides (a named key is set, ...)."""
        return ()

    def jit_checks(self, target: HarnessTarget, env: Mapping[str, str]) -> Sequence[Check]:
        """Checks that need the worktree, run just before the lock is taken."""
        return ()

    async def verify_resume(self, target: HarnessTarget, ctx: HarnessContext) -> None:
        """Prove ``target.resume`` can be resumed before any process starts, or raise
        :class:`AgentSessionError`. The default: this kind cannot resume sessions."""
        assert target.resume is not None
        raise AgentSessionError(
            f"the {self.kind} harness cannot resume sessions (asked for {target.resume.id})",
            kind=self.kind,
            session_id=target.resume.id,
        )

    async def open(self, target: HarnessTarget, ctx: HarnessContext) -> LanguageModel:
        """Start what the model needs and return it. Only kinds with ``has_model``."""
        raise ModelNotAvailableError(self.kind)

    async def run(self, request: AgentRequest, ctx: HarnessContext) -> AgentTurn:
        """Run one whole turn. The default opens the model and calls it once."""
        model = await self.open(request.target, ctx)
        result = await model.generate(
            ModelRequest(
                prompt=request.prompt,
                output_schema=request.output_schema,
                provider_options=request.provider_options,
            )
        )
        return AgentTurn(
            text=result.text,
            session_id=self.session_id(result),
            output=result.output,
            usage=result.usage,
            provider_metadata=result.provider_metadata,
        )

    async def install(self, env: Mapping[str, str]) -> str:
        """Install the kind's CLI for ``jigs install <kind>`` (into
        :func:`jigs.executables.installed_dir`) and say what was installed. Kinds whose CLI
        arrives with ``pip install`` need not override it."""
        raise NotImplementedError(f"the {self.kind} harness has no installer")

    def demo_plan(self, server: ModelServer) -> DemoPlan | None:
        """How this kind runs in ``jigs demo`` and the conformance kit against the local
        model server (see :class:`jigs.testing.plan.DemoPlan`); None when it cannot."""
        return None

    def session_id(self, result: GenerateResult) -> str | None:
        """The resumable session id in a result (``provider_metadata[kind]["session_id"]``).
        Never raises: a missing id must not fail the step the agent just finished."""
        value = result.provider_metadata.get(self.kind, {}).get("session_id")
        return value if isinstance(value, str) and value else None


class HarnessSpecs:
    """The hooks a harness plugin may implement."""

    @hookspec
    def jigs_register_harnesses(self, register: Callable[[Harness], None]) -> None:
        """Register the plugin's harness kinds by calling ``register(harness)`` for each."""
