"""The contract a harness distribution implements: a kind describes its CLI; the core runs it.

A distribution declares an entry point in the group ``jigs.harnesses`` whose name is the kind and
whose value is a module with pluggy hook implementations::

    [project.entry-points."jigs.harnesses"]
    mykind = "jigs_harness_mykind.plugin"

    # jigs_harness_mykind/plugin.py
    from jigs.plugin import hookimpl

    @hookimpl
    def jigs_register_harnesses(register):
        register(MyKindHarness())

**The core owns the turn** (:mod:`jigs.engine._engine`): launching and reading lines, JSON
decoding, the line cap, ``turn_timeout`` / ``idle_timeout`` deadlines, ``max_turns`` /
``max_budget_usd`` limits, crash / garbage / oversize mapping, structured-output extraction and the
single re-ask, the error types, the model object and ``run_agent``. A kind supplies small pieces:

- :meth:`Harness.resolve_executable` -- which CLI runs (also what ``jigs doctor`` shows);
- :meth:`Harness.prepare` -- files for its private dir, once per step (the returned state is
  handed back to every :meth:`Harness.launch_turn`);
- :meth:`Harness.launch_turn` -- one turn's argv, env additions and stdin (:class:`TurnLaunch`);
- :meth:`Harness.decoder` -- a :class:`TurnDecoder` that turns each JSON message the CLI prints
  into typed :mod:`jigs.events`;
- ``structured_output`` -- ``"native"`` (the schema goes to the CLI) or ``"prompted"``;
- the descriptor's ``limits`` -- which of ``max_turns`` / ``max_budget_usd`` the kind supports and
  who enforces each: ``"cli"`` (passed on to the CLI) or ``"core"`` (counted from the events).

The registry verifies a kind when it registers
(:func:`jigs.registry._contract.verify_kind`), as pluggy verifies hook implementations: a kind
missing a required hook (``resolve_executable``; a ``descriptor_type``; ``launch_turn`` and
``decoder``, or ``open_transport``), with a bad limits table or a model key outside its
descriptor's endpoint part
(:class:`~jigs.descriptors.ModelEndpointFields`, or
:meth:`~jigs.descriptors.HarnessDescriptor.model_key_env`) is refused with a message naming the
kind, what is missing and the fix; the other kinds load regardless. Helpers a kind may use
(files, redaction, JSON lines, timing) are in :mod:`jigs.plugin.tools`.

A kind whose CLI is a long-lived server carrying many turns (Codex's app server) overrides
:meth:`Harness.open_transport` instead and returns a :class:`SessionTransport`: the second shape of
the same contract, read by the same engine.

**The model key never reaches the CLI.** A kind declares, with :meth:`Harness.model_route`, where
its CLI would send a key the descriptor names (the real endpoint, the host variable holding the
key, how the key is sent). The core then runs a loopback credential proxy for the step
(:mod:`jigs.proxy`), removes the key variable from the agent's environment and hands the kind
:attr:`HarnessContext.model_endpoint`: the proxy's step URL and a placeholder key. The kind puts
those where its CLI reads an endpoint and a key; the real key stays in the worker process. The
proxy forwards the route's model calls only (``ModelRoute.model_calls``, a safe default per
``scheme``; anything else gets 403), counts every one of them into the step's usage and budget
(the agent's own calls through the proxy included), and masks the key and the step token in
everything it relays back.

Resources a kind acquires go on ``ctx`` (:meth:`HarnessContext.launch`,
:meth:`HarnessContext.private_dir`, :meth:`HarnessContext.callback`), so the core releases them,
in reverse order, on every path.
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, TypeVar

import pluggy

from jigs import processes
from jigs.engine._gate import ToolGate
from jigs.errors import AgentSessionError, RunnerClosedError
from jigs.policy._files import remove_tree
from jigs.sandbox import SandboxView
from jigs.sandbox._private_dirs import make_owned_dir, sweep_now_and_then
from jigs.sandbox._view import shows_hidden

__all__ = [
    "CONTRACT_VERSION",
    "Harness",
    "HarnessContext",
    "HarnessTarget",
    "ModelEndpoint",
    "ModelRoute",
    "PromptImage",
    "SessionTransport",
    "ToolGate",
    "TurnDecoder",
    "TurnDriver",
    "TurnLaunch",
    "TurnSpec",
    "TurnStream",
    "artifacts_under",
    "hookimpl",
    "hookspec",
    "private_file",
]

if TYPE_CHECKING:
    import anyio.abc
    from structlog.stdlib import BoundLogger

    from jigs.checks import Check
    from jigs.descriptors import HarnessDescriptor
    from jigs.engine._types import AgentSessionRef, RunMetadata
    from jigs.events import AgentEvent
    from jigs.executables import Resolved
    from jigs.models._types import GenerateResult
    from jigs.processes import ManagedProcess

#: The plugin contract this jigs-core implements, as ``"major.minor"``. A kind declares the
#: version it was built for as a string literal on its class (``contract = "2.0"`` on the
#: :class:`Harness` subclass; never ``contract = CONTRACT_VERSION``, which would claim whatever
#: core it is loaded into). The registry loads a kind when its major equals this major and its
#: minor is at most this minor (a minor release of the contract only adds optional hooks and
#: fields; a major one changes or removes something); any other kind, one declaring nothing
#: included, is refused with :class:`~jigs.errors.HarnessContractError` (for a 1.x kind, with
#: what changed: :data:`jigs.registry._contract.CHANGES`). jigs-core 0.1.x implements contract 2.1;
#: harness distributions pin ``jigs-core>=0.1,<0.2`` to match. Contract 2.1 added
#: :attr:`Harness.session_id_pattern` (optional: a 2.0 kind loads as it is).
CONTRACT_VERSION = "2.1"

hookspec = pluggy.HookspecMarker("jigs")
hookimpl = pluggy.HookimplMarker("jigs")

D = TypeVar("D", bound="HarnessDescriptor")


@dataclass(frozen=True)
class HarnessTarget(Generic[D]):
    """What a step asks for: a descriptor, the worktree, and optionally a session to resume.

    ``gated``: the step passes a tool gate (every turn's :attr:`TurnSpec.gate` is then set; a
    kind that configures its CLI once per step, such as an MCP server's approval mode, reads it
    here).

    ``tool_free`` (:func:`jigs.steps.ask_agent`): the step's turns run with no tool at all (no
    shell, no file tools, no MCP, no web search, no subagents) and keep no session (nothing
    resumes an ask; ``cwd`` is a private scratch directory, removed afterwards). A kind that
    says it can (:meth:`Harness.tool_free_problem` returns None) must turn every tool of its
    CLI off for such a target, and write no session it would keep."""

    descriptor: D
    cwd: Path
    resume: AgentSessionRef | None = None
    gated: bool = False
    tool_free: bool = False


@dataclass(frozen=True)
class ModelRoute:
    """Where a kind's CLI sends a model key the descriptor names (see :meth:`Harness.model_route`).

    ``upstream`` is the real API base URL the CLI would use without jigs (the descriptor's
    ``base_url``, or the provider's default endpoint such as ``https://api.anthropic.com``);
    the CLI's request for ``<base url>/v1/messages`` goes to ``upstream + "/v1/messages"``.
    ``key_env`` is the host variable holding the key (read by the core in the worker, never
    passed to the agent). ``scheme`` is how the upstream wants it: ``"x-api-key"`` (Anthropic) or
    ``"bearer"`` (``Authorization: Bearer``, OpenAI and most gateways).

    ``model_calls`` are the only requests the step's proxy forwards with the key (jigs'
    model-only policy): ``"METHOD /path"`` entries, the path exact and relative to the base
    URL, the query free (``"POST /v1/messages"`` matches ``POST /v1/messages?beta=true``).
    Everything else (files, batches, admin keys, other methods) gets 403 and never reaches the
    upstream. ``None`` (the default) means the model calls of the ``scheme``'s API:
    ``POST /v1/messages`` for ``"x-api-key"``, ``POST /responses`` and
    ``POST /chat/completions`` for ``"bearer"`` (base URLs such as ``https://api.openai.com/v1``).
    Declare them when the CLI calls anything else it needs (and nothing more).
    """

    upstream: str
    key_env: str
    scheme: Literal["x-api-key", "bearer"] = "bearer"
    model_calls: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ModelEndpoint:
    """What the CLI gets instead of the real endpoint and key (``ctx.model_endpoint``).

    ``base_url`` is the step's proxy URL (``http://127.0.0.1:<port>/<step token>``): give it to
    the CLI as its API base URL exactly where it would take ``route.upstream`` (the proxy forwards
    ``base_url + X`` to ``upstream + X``). It holds the step's token: never log it. ``key`` is a
    placeholder, worthless anywhere: put it where the CLI reads its key (the proxy replaces it).
    Both stop working when the step closes.
    """

    base_url: str
    key: str
    route: ModelRoute

    def __repr__(self) -> str:  # the URL holds the step's token
        return f"ModelEndpoint(base_url=<hidden>, key=<hidden>, route={self.route!r})"

    def __rich_repr__(self) -> list[tuple[str, Any]]:  # rich (tracebacks' locals) too
        return [("base_url", "<hidden>"), ("key", "<hidden>"), ("route", self.route)]


@dataclass
class HarnessContext:
    """Everything the core hands a kind while it opens or runs.

    ``env`` is the exact environment the agent gets (built from empty); ``state_dir`` is durable
    per run and kind (session stores go there). Register cleanups on the context; they run in
    reverse order when the step closes or when opening fails.
    """

    run: RunMetadata
    env: Mapping[str, str]
    state_dir: Path
    kind: str
    stack: AsyncExitStack
    log: BoundLogger
    #: Descriptors the step's processes inherit (the worktree lock), so the lock lives until
    #: the last process of the step is gone.
    inherit_fds: tuple[int, ...] = ()
    #: Set when the step is being released; nothing new may start after that.
    closed: bool = False
    #: The proxied model endpoint when :meth:`Harness.model_route` declared a route (the real
    #: key's variable is then absent from ``env``); None on the operator-login routes.
    model_endpoint: ModelEndpoint | None = None
    #: What the step's processes may see and reach (:class:`~jigs.sandbox.SandboxView`); None
    #: outside a step (tests, tools). Extend it with :meth:`expose` and :meth:`private_dir`.
    sandbox: SandboxView | None = None

    async def launch(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        stdin: Literal["closed", "pipe"] = "closed",
        owner: str | None = None,
    ) -> ManagedProcess:
        """Launch a process with ``env`` (default: exactly ``self.env``) in the step's process
        namespace (see :mod:`jigs.processes`), inheriting the worktree lock; it is stopped
        (TERM, grace, KILL of the whole namespace) when the step closes. Raises
        :class:`~jigs.errors.RunnerClosedError` once the step is closed, and ``OSError`` when the
        executable cannot run (the engine turns that into :class:`~jigs.errors.CliNotFoundError`).
        """
        if self.closed:
            raise RunnerClosedError(self.kind, self.run.workflow_run_id)

        process = await processes.launch(
            argv,
            cwd=cwd,
            env=self.env if env is None else env,
            stdin=stdin,
            kind=self.kind,
            owner=owner or f"{self.kind} for run {self.run.workflow_run_id}",
            pass_fds=self.inherit_fds,
            sandbox=self.sandbox,
        )
        self.stack.push_async_callback(process.stop)
        return process

    def private_dir(self, prefix: str | None = None) -> Path:
        """A fresh 0700 directory only this step uses, removed when the step closes; the
        step's processes may read and write it (no other step's can see it). It holds a marker
        naming this worker (``.jigs-owner``): if the worker is killed before the step closes,
        a later step or ``jigs runs prune`` removes it (:mod:`jigs.sandbox._private_dirs`)."""

        sweeping = sweep_now_and_then()
        if sweeping is not None:  # swept by the time the step has closed
            self.stack.callback(sweeping.join)
        path = make_owned_dir(prefix or f"jigs-{self.kind}-")
        self.stack.callback(remove_tree, path)
        self.expose(path, writable=True)
        return path

    def expose(
        self,
        path: str | os.PathLike[str],
        *,
        writable: bool = False,
        at: str | os.PathLike[str] | None = None,
    ) -> None:
        """Show ``path`` to the step's processes launched from now on: read-only (what the CLI
        runs from, a login it must read), or read-write (its own state). Everything not exposed
        (the rest of HOME, the jigs data dir, other worktrees) is absent from the sandbox. A
        kind exposes the least its CLI needs; what the launched executable runs from (its
        directory, a script's interpreter, a Python's installation) is exposed read-only by
        each launch itself (:func:`jigs.processes.launch`).

        ``at``: a path inside the sandbox (typically under the empty ``HOME``) made a symlink
        to ``path``, for a file the CLI looks for in a fixed place: a copy in the step's
        private dir then serves it, and the CLI's writes to it die with the step. Without a
        sandbox (``sandbox="off"``) nothing is shown or linked: the CLI sees the machine."""
        if self.sandbox is None:
            return
        self.sandbox.expose(path, writable=writable)
        if at is not None:
            self.sandbox.links[Path(os.path.abspath(at))] = Path(os.path.abspath(path))

    def expose_python(self) -> None:
        """Show the running Python to the step's processes, read-only: its installation, its
        environment (``sys.prefix``) and the directories on ``sys.path``. For a kind whose CLI
        is ``sys.executable -m some_package``. An entry that would show what the sandbox hides
        (``/``, or a directory holding the temp dir, ``HOME`` or the jigs data dir: a worker
        started from ``/tmp`` or its home has it on ``sys.path``) is left out, and
        ``sandbox.python.hidden`` logged: other steps' private dirs and worktrees stay hidden."""
        for entry in {sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path}:
            if not entry or not os.path.isdir(entry):
                continue
            if shows_hidden(entry):
                self.log.warning("sandbox.python.hidden", path=os.path.abspath(entry))
                continue
            self.expose(entry)

    def sessions_complete(self) -> None:
        """Say, while the step closes, that the CLI is done: the session's artifacts
        (:meth:`Harness.session_artifacts`) are complete and no model request can come any
        more. The core then stores them, and stops the step's credential proxy, while the rest
        of the close runs, instead of after it. For a kind whose CLI is killed at close: call it
        once the CLI can write and send nothing more (killed, its files where
        ``session_artifacts`` finds them), before waiting for its processes to be gone. The
        close still returns only once they are stored and the proxy stopped. Anywhere else, and
        a second time, it does nothing; never raises."""
        return

    def callback(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` at close (after later-registered cleanups)."""
        self.stack.callback(fn, *args)

    def async_callback(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Await ``fn(*args)`` at close."""
        self.stack.push_async_callback(fn, *args)


@dataclass(frozen=True)
class PromptImage:
    """An image of the turn's prompt, as the core hands it to a kind: a 0600 copy in the step's
    private dir (its processes may read it; removed when the step closes), its media type
    (``image/png``, ``image/jpeg``, ``image/gif`` or ``image/webp``), digest and size."""

    path: Path
    media_type: str
    sha256: str
    size: int


@dataclass(frozen=True)
class TurnSpec(Generic[D]):
    """One turn the core asks a kind to run.

    ``prompt`` is final (for a prompted kind it already asks for the JSON answer);
    ``output_schema`` is set only for kinds with ``structured_output = "native"``.
    ``session_id`` is the session to continue (None: start a fresh one; the kind reports the
    id it used through :class:`jigs.events.SessionStarted`). With ``fork`` the kind must not
    write to ``session_id`` itself but continue a *copy* of it under a new id (Claude
    ``--fork-session``, Pi ``--fork``): the first turn of a step that resumes forks, so a retried
    step starts from exactly the state its input ref names, whatever a killed attempt wrote.
    ``partial`` asks for text deltas as they arrive (a streamed call). ``options`` are the
    step's provider options for this kind (functions; never persisted). ``gate`` is the step's
    tool gate (None: none was given), only ever set for a kind whose ``tool_gate`` is True: ask
    :meth:`ToolGate.decide` before each tool call runs and tell the CLI the answer
    (:class:`~jigs.steps.Allow`: run it; :class:`~jigs.steps.Deny`: refuse it with the reason;
    :class:`~jigs.steps.Defer`: refuse it and end the turn as soon as the CLI can, cleanly).
    ``tool_free``: the step's target is tool-free (see :class:`HarnessTarget`).
    ``images`` come after the prompt's text, in order (only for a kind with
    :attr:`Harness.takes_images`; the core refuses them for any other).
    """

    descriptor: D
    cwd: Path
    prompt: str
    session_id: str | None = None
    fork: bool = False
    output_schema: dict[str, Any] | None = None
    system: str | None = None
    max_output_tokens: int | None = None
    partial: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    gate: ToolGate | None = None
    tool_free: bool = False
    images: tuple[PromptImage, ...] = ()


class TurnDriver(Protocol):
    """Speaks to the CLI on its stdin while a turn runs (a control protocol).

    Two optional methods let the step talk to the running turn (the engine looks them up with
    ``getattr``; a driver without them refuses): ``async interrupt() -> bool`` asks the CLI to
    end its turn at once (True when asked; the CLI then ends the turn its own way, and the
    engine stops the process if it has not within two seconds), and ``async steer(text) ->
    bool`` sends ``text`` as user input the CLI reads during the turn (True when sent). Both
    may be called from another task while the engine reads the turn."""

    async def start(self, stdin: anyio.abc.ByteSendStream) -> None:
        """Called once the process runs: write the opening messages."""

    async def handle(self, message: dict[str, Any]) -> bool:
        """See one decoded message first; True when it was the driver's (not decoded)."""

    async def finish(self) -> None:
        """The turn ended (or failed): close stdin. Must not raise."""


@dataclass(frozen=True)
class TurnLaunch:
    """How to start one turn's process: ``argv``, ``env`` added to the step's environment,
    ``stdin`` bytes written then closed (None: stdin closed), or a ``driver`` that speaks on
    stdin. ``exit_grace`` is how long the CLI may take to exit after its last event.
    ``decoder`` reads this launch's output when the launch decided something the decoder must
    check (a session id it chose); None: :meth:`Harness.decoder`."""

    argv: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)
    stdin: bytes | None = None
    driver: TurnDriver | None = None
    exit_grace: float = 3.0
    decoder: TurnDecoder | None = None


class TurnDecoder(Protocol):
    """Turns the CLI's messages (decoded JSON objects) into typed events for one turn."""

    def decode(self, message: dict[str, Any]) -> Iterable[AgentEvent]:
        """The events one message means (often none). Must end the turn with exactly one
        :class:`~jigs.events.TurnCompleted` or :class:`~jigs.events.TurnFailed`."""
        ...


class TurnStream(Protocol):
    """One running turn of a :class:`SessionTransport`.

    Optional, looked up with ``getattr`` and called from another task while the engine reads:
    ``async interrupt() -> bool`` asks the CLI to end the turn now (Codex ``turn/interrupt``);
    True when asked, the turn then ending with the CLI's own last message (any end counts: the
    engine raises :class:`~jigs.errors.AgentInterrupted`), within two seconds, or the engine
    calls :meth:`abort`. Without it (or when it returns False) the engine aborts the turn at
    once. ``async steer(text) -> bool`` puts user input into the running turn (Codex
    ``turn/steer``); False or absent: the step's ``steer`` is refused with
    :attr:`Harness.steer_refusal`."""

    decoder: TurnDecoder

    async def receive(self) -> dict[str, Any] | None:
        """The next message of the turn; None when the transport closed. The engine applies
        the deadlines around this call (it may be cancelled at any await)."""
        ...

    async def abort(self) -> None:
        """Stop the turn now (timeout, limit, cancellation): bounded, shielded, never raises."""

    async def finish(self) -> None:
        """The turn ended normally."""

    def stderr_tail(self) -> str:
        """The redacted end of the CLI's stderr, for error messages."""
        ...


class SessionTransport(ABC):
    """A long-lived CLI that carries many turns of one session (Codex's app server).

    Returned by :meth:`Harness.open_transport`; everything it starts is registered on ``ctx``.
    ``session_id`` is the session every turn continues. A transport opened with
    ``target.resume`` forks that session (Codex ``thread/fork``) and reports the fork's id here,
    never writing to the resumed one.
    """

    session_id: str | None = None

    @abstractmethod
    async def start_turn(self, turn: TurnSpec[Any]) -> TurnStream:
        """Start one turn and return its stream."""


class Harness(ABC, Generic[D]):
    """One harness kind. Subclasses set the class variables and implement the turn pieces."""

    #: The kind name; must equal the entry point's name.
    kind: ClassVar[str]
    #: The plugin contract the kind was built for, ``"major.minor"`` (see
    #: :data:`CONTRACT_VERSION`). None (the default: not declared) is refused by the registry.
    contract: ClassVar[str | None] = None
    #: A human name for tables and messages ("Claude Code").
    display_name: ClassVar[str]
    #: The kind's descriptor class (a :class:`HarnessDescriptor` subclass).
    descriptor_type: ClassVar[type[HarnessDescriptor]]
    #: False for kinds that only run whole turns (``run_agent``), such as Pi.
    has_model: ClassVar[bool] = True
    #: Environment names the kind sets itself (refused in ``agents.env``).
    sets_env: ClassVar[frozenset[str]] = frozenset()
    #: ``"native"``: the CLI takes a JSON schema (``TurnSpec.output_schema``);
    #: ``"prompted"``: the core asks for JSON in the prompt.
    structured_output: ClassVar[Literal["native", "prompted"]] = "prompted"
    #: Per-call model settings the kind honours (others come back as warnings).
    call_settings: ClassVar[frozenset[str]] = frozenset()
    #: Whether the CLI takes images in a prompt (:attr:`TurnSpec.images`); a prompt with
    #: images is refused for a kind that does not, before the step acquires anything.
    takes_images: ClassVar[bool] = False
    #: What to do when the CLI is missing (shown in errors and by ``jigs doctor``).
    install_hint: ClassVar[str] = "install the kind's CLI (see `jigs doctor`)"
    #: Why a running turn of this kind cannot be steered (the step's ``steer(text)`` refusal,
    #: :class:`~jigs.errors.SteerRefusedError`), for a kind whose turns have no ``steer``.
    steer_refusal: ClassVar[str] = "its CLI takes no user input while a turn runs"
    #: True when the kind asks :attr:`TurnSpec.gate` before every tool call its CLI runs (a
    #: step's ``approve_tool``); False (the default) refuses ``approve_tool`` when the step
    #: opens, with :attr:`tool_gate_refusal`, so that no step believes itself gated when it is
    #: not.
    tool_gate: ClassVar[bool] = False
    #: Why the kind cannot gate tool calls (the refusal's message, when ``tool_gate`` is False).
    tool_gate_refusal: ClassVar[str] = "the kind does not declare a tool gate (Harness.tool_gate)"
    #: The shape of the session ids the kind's CLI makes, as a regular expression an id must
    #: match whole (``r"ses_[0-9a-zA-Z]{26}"``); None: no declared shape. The core refuses a
    #: ``resume`` id shaped like a secret, so that a credential passed by mistake is never
    #: echoed or looked up; an id that matches the kind's own pattern is taken as an id (a CLI
    #: whose ids are long random tokens, like opencode's, could not resume otherwise). The
    #: other rules (length, ``/``, control characters) apply regardless. Contract 2.1.
    session_id_pattern: ClassVar[str | None] = None

    # ---------------------------------------------------------------- resolution and checks

    @abstractmethod
    def resolve_executable(self, env: Mapping[str, str]) -> Resolved:
        """The CLI this kind runs, or :class:`~jigs.errors.CliNotFoundError`."""

    def env_allowlist(self, descriptor: D) -> Collection[str]:
        """Host variable names this descriptor needs beyond the base list (MCP credentials,
        a model key named on the descriptor, ...)."""
        return descriptor.env_names()

    def model_route(self, descriptor: D) -> ModelRoute | None:
        """Where the CLI would send the model key ``descriptor`` names, or None when it names
        none (the operator's own login, or an endpoint without a key).

        With a route the core runs the step's credential proxy and the kind must take the
        endpoint from :attr:`HarnessContext.model_endpoint`: the proxy URL as the CLI's base URL,
        the placeholder as its key, and never read the key variable itself. The proxy forwards
        the route's ``model_calls`` only (the ``scheme``'s API when it declares none), counts
        each into the turn's usage and budget and masks the key in what it relays back. The
        default: None.
        """
        return None

    def login_route(self, descriptor: D) -> str | None:
        """When :meth:`model_route` is None: which credential the CLI uses instead and what of
        it the agent can read (``jigs doctor`` shows it), or None when it uses none."""
        return None

    def installation_checks(self, env: Mapping[str, str]) -> Sequence[Check]:
        """Checks every descriptor of the kind needs: CLI present and recent enough. A login
        that only some descriptors use (those naming no key) is a :meth:`descriptor_checks`
        entry, so that ``jigs doctor`` does not fail a descriptor that needs none."""
        return ()

    def descriptor_checks(self, descriptor: D, env: Mapping[str, str]) -> Sequence[Check]:
        """Checks the descriptor alone decides (a named key is set, ...)."""
        return ()

    def jit_checks(self, target: HarnessTarget[D], env: Mapping[str, str]) -> Sequence[Check]:
        """Checks that need the worktree, run just before the step starts."""
        return ()

    def tool_free_problem(self, descriptor: D) -> str | None:
        """Why this kind cannot run ``descriptor``'s turns without tools
        (:func:`jigs.steps.ask_agent`, :attr:`HarnessTarget.tool_free`), or None when it can. The
        default: it cannot (a kind says it can only once its launch turns every tool of its CLI
        off). The core refuses a descriptor with MCP servers itself."""
        return (
            f"the {self.kind} kind does not say how to run its CLI without tools "
            f"(Harness.tool_free_problem); use run_agent with a worktree"
        )

    async def verify_resume(self, target: HarnessTarget[D], ctx: HarnessContext) -> None:
        """Prove ``target.resume`` can be resumed before any process starts, or raise
        :class:`AgentSessionError`. The default: this kind cannot resume sessions."""
        resume = target.resume
        raise AgentSessionError(
            f"the {self.kind} harness cannot resume sessions (asked for "
            f"{resume.id if resume else None})",
            kind=self.kind,
            session_id=resume.id if resume else "",
        )

    # ---------------------------------------------------------------- the turn pieces

    async def prepare(self, target: HarnessTarget[D], ctx: HarnessContext) -> Any:
        """Once per step, before the first turn: write the kind's private files (use
        :meth:`HarnessContext.private_dir`). The value returned is handed to every
        :meth:`launch_turn`. The default does nothing."""
        return None

    def launch_turn(self, turn: TurnSpec[D], ctx: HarnessContext, state: Any) -> TurnLaunch:
        """The process of one turn. Kinds that run a process per turn implement it (with
        :meth:`decoder`); the registry refuses a kind implementing neither it nor
        :meth:`open_transport`."""
        raise NotImplementedError(f"the {self.kind} harness does not implement launch_turn")

    def decoder(self, turn: TurnSpec[D]) -> TurnDecoder:
        """A fresh decoder for one turn's output."""
        raise NotImplementedError(f"the {self.kind} harness does not implement decoder")

    async def open_transport(
        self, target: HarnessTarget[D], ctx: HarnessContext
    ) -> SessionTransport | None:
        """For a CLI that serves many turns: start it and return its transport. The default
        (None) runs one process per turn through :meth:`launch_turn`."""
        return None

    # ---------------------------------------------------------------- the rest

    async def install(self, env: Mapping[str, str]) -> str:
        """Install the kind's CLI for ``jigs install <kind>`` (into
        :func:`jigs.executables.installed_dir`) and say what was installed. Kinds whose CLI
        arrives with ``pip install`` need not override it."""
        raise NotImplementedError(f"the {self.kind} harness has no installer")

    async def warm(self, env: Mapping[str, str], log: Any) -> str | None:
        """Build now what a fresh worker would otherwise build on its first step (a home seed,
        a compile cache) for the CLI that :meth:`resolve_executable` finds under ``env``, and
        say what is in place; None when the kind keeps nothing between steps (the default).
        ``jigs install`` calls it after :meth:`install`, so a worker in a fresh container does
        not pay for it inside a step. A step still builds what is missing, so a part that
        cannot be had now is logged on ``log`` and left out, not raised; an exception is
        reported by ``jigs install`` and does not fail it."""
        return None

    def session_artifacts(
        self,
        session_id: str,
        ctx: HarnessContext,
        cwd: Path,
        *,
        names: Collection[str] | None = None,
    ) -> Mapping[str, Path]:
        """The files that make up session ``session_id``: a logical name -> the local file.

        With ``names=None`` (at close, to store the session): the files as they are now, only
        those that exist. With ``names`` (the names stored at close, before a resume on this
        machine): where each must be placed so the CLI finds it here -- the inverse; raise
        ``ValueError`` for a name the kind would never produce. Names are relative POSIX paths;
        :func:`artifacts_under` implements both directions for "files matching a pattern under
        a directory", which covers most CLIs. The files must be durable (the run's
        ``ctx.state_dir`` or the CLI's own config dir, never a :meth:`HarnessContext.private_dir`):
        they are read after the step's resources are released. Fetched files are placed byte
        for byte (digest-checked) before :meth:`verify_resume` runs, so a kind whose files
        record the worktree path can adjust them there. The default (no artifacts) keeps
        sessions on the machine that ran them. Must not start processes."""
        return {}

    def session_id(self, result: GenerateResult) -> str | None:
        """The resumable session id in a result (``provider_metadata[kind]["session_id"]``).
        Never raises: a missing id must not fail the step the agent just finished."""
        value = result.provider_metadata.get(self.kind, {}).get("session_id")
        return value if isinstance(value, str) and value else None


class HarnessSpecs:
    """The hooks a harness plugin may implement."""

    @hookspec
    def jigs_register_harnesses(self, register: Callable[[Harness[Any]], None]) -> None:
        """Register the plugin's harness kinds by calling ``register(harness)`` for each."""


def private_file(path: Path, data: bytes) -> Path:
    """Write ``data`` to a new 0600 file (refusing to follow or replace an existing one)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return path


def _name_matcher(pattern: str) -> Callable[[str], object]:
    """Whether a file name matches the glob ``pattern`` (case-sensitive, as on POSIX).

    Not ``fnmatch.fnmatchcase`` nor ``Path.rglob(pattern)``: both keep each pattern they compile
    in a cache of their own (fnmatch's holds 32,768), and a session's pattern names its id, so a
    long-lived worker would keep one compiled pattern per session it ever looked up. ``re``'s
    own cache is bounded (512) and evicts the oldest."""
    return re.compile(fnmatch.translate(pattern)).fullmatch


def artifacts_under(
    root: Path, pattern: str, names: Collection[str] | None = None
) -> dict[str, Path]:
    """Both directions of :meth:`Harness.session_artifacts` for files under ``root``.

    ``names=None``: every file under ``root`` (recursively) whose name matches the glob
    ``pattern``, keyed by its path relative to ``root`` (POSIX). With ``names``: ``root / name``
    for each, after refusing (``ValueError``) a name that is absolute, holds ``..``, a
    backslash or a control character, or does not match ``pattern``: a name read from a store
    can never place a file outside ``root``."""
    matches = _name_matcher(pattern)
    if names is None:
        if not root.is_dir():
            return {}
        return {
            p.relative_to(root).as_posix(): p
            for p in sorted(root.rglob("*"))
            if matches(p.name) and p.is_file() and not p.is_symlink()
        }
    placed: dict[str, Path] = {}
    for name in names:
        pure = PurePosixPath(name)
        if (
            not name
            or pure.is_absolute()
            or "\\" in name
            or not name.isprintable()
            or any(part in {"", ".", ".."} for part in name.split("/"))
            or not matches(pure.name)
        ):
            raise ValueError(f"{name[:80]!r} is not a session artifact name under {root}")
        placed[name] = root.joinpath(*pure.parts)
    return placed
