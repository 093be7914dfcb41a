"""Every error jigs raises.

One base, :class:`JigsError`. Each subclass carries structured fields (so a caller never parses a
message) and also inherits the standard-library class that fits, so generic code that catches
``LookupError`` or ``TimeoutError`` keeps working. Every message says what failed and how to fix it.

Every error says whether a retry can help (``retryable``): a durable engine retries a step that
failed with ``retryable`` True and gives up at once otherwise. The turn errors
(:class:`AgentTurnError` and its subclasses) keep what happened before the turn failed: the session
id (so :func:`jigs.steps.agent_session` can continue it), usage and cost, the stop reason and the
redacted stderr tail.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jigs.checks import FailedCheck

__all__ = [
    "AgentCrashedError",
    "AgentInterrupted",
    "AgentLimitError",
    "AgentOutputError",
    "AgentSessionError",
    "AgentTimeoutError",
    "AgentTurnError",
    "ApprovalPending",
    "CheckFailedError",
    "CheckpointError",
    "CliCommandError",
    "CliNotFoundError",
    "CredentialProxyError",
    "DescriptorError",
    "EnvPolicyError",
    "HarnessContractError",
    "HarnessNotFoundError",
    "HarnessPluginError",
    "InvalidInputError",
    "JigsError",
    "JitCheckError",
    "MissingDistributionError",
    "ModelNotAvailableError",
    "PromptError",
    "RunnerClosedError",
    "SandboxUnavailableError",
    "SessionSaveError",
    "SessionStoreError",
    "SteerRefusedError",
    "StructuredOutputError",
    "ToolGateError",
    "WorktreeBusyError",
    "WorktreeError",
    "WorktreeLockError",
]


def _rebuild(cls: type[JigsError], args: tuple[object, ...], state: dict[str, object]) -> JigsError:
    # the builtin base with the widest layout must allocate (OSError for timeout/crash errors)
    new = OSError.__new__ if issubclass(cls, OSError) else Exception.__new__
    error = new(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class JigsError(Exception):
    """Base of every error jigs raises on purpose.

    Errors pickle with their structured fields (workflow workers and process pools send
    exceptions across processes), whatever their ``__init__`` signature. ``retryable`` says
    whether running the same step again can succeed (a class default; some errors decide per
    instance).
    """

    retryable: bool = False

    def __reduce__(self) -> tuple[object, ...]:
        return _rebuild, (type(self), self.args, dict(self.__dict__))


class DescriptorError(JigsError, ValueError):
    """A harness descriptor is malformed: an unknown key, a policy key, a bad value."""

    def __init__(self, message: str, *, kind: str | None = None, key: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.key = key


class EnvPolicyError(JigsError, ValueError):
    """An ``agents.env`` declaration names something it may not (a value, a reserved name)."""

    def __init__(self, message: str, *, name: str | None = None, source: str | None = None) -> None:
        super().__init__(message)
        self.name = name
        self.source = source


class HarnessNotFoundError(JigsError, LookupError):
    """No installed distribution provides the harness kind."""

    def __init__(
        self,
        kind: str,
        installed: Sequence[str],
        load_error: str | None = None,
        *,
        disabled: bool = False,
    ) -> None:
        plain = bool(re.fullmatch(r"[a-z][a-z0-9_-]{0,39}", kind))
        self.kind = kind if plain else "<not shown>"
        self.installed = tuple(installed)
        self.load_error = load_error
        self.disabled = disabled
        if not plain:
            listed = ", ".join(self.installed) if self.installed else "none"
            message = (
                f"the descriptor's kind is not a harness kind name (lower-case letters, digits, "
                f"'-' and '_'; the value is not shown). Installed kinds: {listed}"
            )
        elif disabled:
            message = (
                f"the {kind!r} harness is disabled by JIGS_DISABLE_PLUGINS; remove {kind} from "
                f"that variable to use it"
            )
        elif load_error is not None:
            message = (
                f"the {kind!r} harness is installed but its plugin failed to load: {load_error}. "
                f"Reinstall it (pip install --force-reinstall jigs-harness-{kind}) or block it "
                f"with JIGS_DISABLE_PLUGINS={kind}"
            )
        else:
            listed = ", ".join(self.installed) if self.installed else "none"
            near = difflib.get_close_matches(kind, self.installed, n=1)
            # a typo of an installed kind: the fix is the spelling, not a pip install of a
            # distribution that does not exist
            fix = f"Did you mean {near[0]!r}?" if near else _how_to_install(kind)
            message = f"no harness kind {kind!r} is installed (installed kinds: {listed}). {fix}"
        super().__init__(message)


def _how_to_install(kind: str) -> str:
    """The fix for a kind no entry point names: install its distribution, or, when the
    distribution of that name is installed already, declare the entry point it lacks."""
    package = f"jigs-harness-{kind}"
    try:
        distribution(package)
    except PackageNotFoundError:
        return f"Install it with: pip install {package}"
    module = f"jigs_harness_{kind.replace('-', '_')}.plugin"
    return (
        f"{package} is installed but declares no entry point {kind!r} in the 'jigs.harnesses' "
        f'group: add [project.entry-points."jigs.harnesses"] {kind} = "{module}" (the '
        f"module with its jigs_register_harnesses hook) to its pyproject.toml and reinstall it"
    )


class HarnessPluginError(JigsError, RuntimeError):
    """A plugin broke the contract (two distributions claim one kind, a bad registration)."""


class ModelNotAvailableError(JigsError, NotImplementedError):
    """The harness kind has no model object; run it through ``run_agent`` instead."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        super().__init__(
            f"the {kind!r} harness has no model object, so create_agent_runner cannot open it "
            f"and runner.model is unavailable. Run it with jigs.steps.run_agent(harness=..., "
            f"cwd=..., prompt=..., run=...) instead"
        )


class RunnerClosedError(JigsError, RuntimeError):
    """The runner was closed: its lock is released and its processes are stopped."""

    def __init__(self, kind: str, run_id: str) -> None:
        self.kind = kind
        self.run_id = run_id
        super().__init__(
            f"the {kind} runner of run {run_id!r} is closed (its worktree lock is released), so "
            f"it cannot start the agent again; open a new one with create_agent_runner"
        )


class AgentSessionError(JigsError, LookupError):
    """A durable agent session is missing or cannot be resumed by this harness.

    Catch it and start again without ``resume`` if the step can.
    """

    def __init__(self, message: str, *, kind: str, session_id: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.session_id = session_id


class CheckFailedError(JigsError, RuntimeError):
    """Descriptor or installation checks failed. ``failures`` holds each one."""

    def __init__(self, failures: Sequence[FailedCheck], *, what: str = "checks") -> None:
        self.failures = tuple(failures)
        lines = "\n".join(f"- {f.label}: {f.reason}\n  fix: {f.repair}" for f in self.failures)
        super().__init__(f"{len(self.failures)} {what} failed:\n{lines}")


class JitCheckError(CheckFailedError):
    """Just-in-time checks (those that need the worktree, such as MCP probes) failed.

    The message lists ``label: reason`` lines; ``failures`` carries the structured results.
    ``retryable`` is True when a check did not answer in time (a slow server may answer later).
    """

    def __init__(self, failures: Sequence[FailedCheck]) -> None:
        self.failures = tuple(failures)
        self.retryable = any(getattr(f, "unanswered", False) for f in self.failures)
        JigsError.__init__(self, "\n".join(f"{f.label}: {f.reason}" for f in self.failures))


class WorktreeBusyError(JigsError, BlockingIOError):
    """Another agent holds the worktree. jigs never waits for it; a later retry can succeed."""

    retryable = True

    def __init__(self, worktree: Path, holder_run_id: str | None, holder_pid: int | None) -> None:
        self.worktree = worktree
        self.holder_run_id = holder_run_id
        self.holder_pid = holder_pid
        holder = (
            f"run {holder_run_id!r} (pid {holder_pid})"
            if holder_run_id is not None
            else "another process"
        )
        super().__init__(
            f"an agent is already running in {worktree}: it is held by {holder}. jigs refuses to "
            f"start a second agent in the same worktree; wait for that step to close its runner, "
            f"or give this step its own worktree"
        )


class CliNotFoundError(JigsError, FileNotFoundError):
    """The harness CLI could not be found in any of the places jigs looks."""

    def __init__(self, kind: str, tried: Sequence[str], fix: str) -> None:
        self.kind = kind
        self.tried = tuple(tried)
        self.fix = fix
        super().__init__(
            f"the {kind} CLI was not found (looked in: {'; '.join(self.tried)}). {fix}"
        )


class InvalidInputError(JigsError, ValueError):
    """An argument of a step call is unusable (``cwd``, ``agents_env``, ``run``, ``resume``).

    ``argument`` names the parameter; the message says what is wrong and never echoes a value
    that could be a secret.
    """

    def __init__(self, message: str, *, argument: str) -> None:
        super().__init__(message)
        self.argument = argument


class PromptError(InvalidInputError):
    """The prompt cannot be sent to an agent (empty, or holding a NUL byte)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, argument="prompt")


class AgentTurnError(JigsError, RuntimeError):
    """The agent ran but its turn failed (an API error, a refused request, a truncated answer).

    It keeps what happened: ``session_id`` (the session the turn ran in; pass
    ``AgentSessionRef(harness=kind, id=session_id, ...)``, or use :attr:`session`, to continue
    it), ``usage`` (a :class:`jigs.models.Usage` with tokens and ``cost_usd``, None when the
    kind reported none), ``stop_reason`` (the kind's own word for why the turn stopped),
    ``reason`` (jigs' category: ``"api_error"``, ``"not_logged_in"``, ``"length"``,
    ``"aborted"``, ``"max_turns"``, ``"turn_timeout"`` ...) and ``stderr_tail`` (redacted).
    """

    retryable = False

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        detail: str | None = None,
        reason: str | None = None,
        session_id: str | None = None,
        usage: Any = None,
        stop_reason: str | None = None,
        stderr_tail: str = "",
        retryable: bool | None = None,
        descriptor: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.detail = detail
        self.reason = reason or detail
        self.session_id = session_id
        self.usage = usage
        self.stop_reason = stop_reason
        self.stderr_tail = stderr_tail
        self.descriptor = descriptor
        #: Where the session went at close (set by the step once it is stored): a resume of
        #: :attr:`session` is digest-checked like any ref.
        self.store_key: str | None = None
        self.digest: str | None = None
        if retryable is not None:
            self.retryable = retryable

    @property
    def cost_usd(self) -> float | None:
        """The cost the kind reported for the turn before it failed (None: none reported)."""
        return getattr(self.usage, "cost_usd", None)

    @property
    def session(self) -> Any:
        """An :class:`~jigs.AgentSessionRef` for the turn's session (None when the turn never
        got one or the descriptor is unknown): resume it to continue the stopped turn."""
        if self.session_id is None or self.descriptor is None:
            return None
        from jigs.engine._types import (
            AgentSessionRef,  # here: jigs.engine._types imports this module
        )

        return AgentSessionRef(
            harness=self.kind,
            id=self.session_id,
            descriptor=self.descriptor,
            store_key=getattr(self, "store_key", None),
            digest=getattr(self, "digest", None),
        )


class AgentCrashedError(AgentTurnError, ChildProcessError):
    """The harness process exited unexpectedly (non-zero, by a signal, or before its result).
    A crash can be transient, so a retry may help."""

    retryable = True

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        returncode: int | None,
        stderr_tail: str,
        **fields: Any,
    ) -> None:
        self.returncode = returncode
        tail = f"; its stderr ended with:\n{stderr_tail}" if stderr_tail.strip() else ""
        fields.setdefault("reason", "crashed")
        super().__init__(f"{message}{tail}", kind=kind, stderr_tail=stderr_tail, **fields)


class AgentOutputError(AgentTurnError, ValueError):
    """The harness printed something jigs cannot read (garbage, an oversized line, a stream
    that ends without its result)."""

    def __init__(self, message: str, *, kind: str, line: int | None = None, **fields: Any) -> None:
        self.line = line
        fields.setdefault("reason", "bad_output")
        super().__init__(message, kind=kind, **fields)


class AgentTimeoutError(AgentTurnError, TimeoutError):
    """The turn hit ``turn_timeout`` (wall clock) or ``idle_timeout`` (no event for that long);
    jigs stopped it. The same class for every kind. ``limit`` names the knob, ``seconds`` its
    value."""

    retryable = True

    def __init__(
        self, message: str, *, kind: str, limit: str, seconds: float, **fields: Any
    ) -> None:
        self.limit = limit
        self.seconds = seconds
        fields.setdefault("reason", limit)
        super().__init__(message, kind=kind, **fields)


class AgentLimitError(AgentTurnError):
    """The turn reached the descriptor's ``max_turns`` or ``max_budget_usd`` and was stopped.
    Not retryable as is: continue the session (``error.session``) or raise the limit."""

    def __init__(self, message: str, *, kind: str, limit: str, value: float, **fields: Any) -> None:
        self.limit = limit
        self.value = value
        fields.setdefault("reason", limit)
        super().__init__(message, kind=kind, **fields)


class AgentInterrupted(AgentTurnError):
    """The caller ended the turn with ``interrupt()`` (on a runner or a
    :func:`~jigs.steps.stream_agent` stream): the CLI was told to stop at once, and whatever it
    did not stop within two seconds was killed. Not an error of the agent, and not retryable:
    continue the session where it stopped by resuming :attr:`session` (the turn's messages so
    far are in it), with a prompt that says what to do instead. ``usage`` holds what the turn
    spent before it stopped."""

    def __init__(self, message: str, *, kind: str, **fields: Any) -> None:
        fields.setdefault("reason", "interrupted")
        super().__init__(message, kind=kind, **fields)


class SteerRefusedError(JigsError, RuntimeError):
    """``steer(text)`` could not put the text into a running turn: ``reason`` is
    ``"unsupported"`` (the kind's CLI takes no input while its turn runs; the message says
    why: send the text as the next turn's prompt, or ``interrupt()`` first) or ``"idle"`` (no
    turn is running on that runner or stream)."""

    def __init__(self, message: str, *, kind: str, reason: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.reason = reason


class ToolGateError(AgentTurnError):
    """The step's ``approve_tool`` raised, or returned something that is not
    ``Allow()`` / ``Deny(reason)`` / ``Defer()``: the call did not run and the turn was stopped.
    The gate's own exception is the ``__cause__``. Not retryable (the gate would do it again)."""

    def __init__(self, message: str, *, kind: str, **fields: Any) -> None:
        fields.setdefault("reason", "tool_gate")
        super().__init__(message, kind=kind, **fields)


class ApprovalPending(AgentTurnError):
    """The step's ``approve_tool`` deferred a call (``Defer()``), or its agent asked a human
    (:func:`~jigs.steps.ask_human`): the call did not run, the turn ended, and the session
    waits for a human. Not a failure of the agent and not retryable (running the step again
    would ask again): store :attr:`pending` (a pydantic :class:`~jigs.steps.PendingApproval`:
    the session ref, the usage, the calls, the questions), and once decided resume it with
    ``resume=pending.session``, ``approvals=pending.decide({call_id: Allow() or Deny(reason)
    or Answer(text)})`` and :func:`~jigs.steps.approvals_prompt` as the prompt."""

    def __init__(self, message: str, *, kind: str, pending: Any, **fields: Any) -> None:
        fields.setdefault("reason", "approval_pending")
        super().__init__(message, kind=kind, **fields)
        # the PendingApproval the engine built (this module imports nothing of jigs); its
        # session is filled in when read, once the step has stored the session
        self._pending = pending

    @property
    def calls(self) -> tuple[Any, ...]:
        """The deferred :class:`~jigs.steps.GatedCall` s, in the order the agent made them."""
        return tuple(self._pending.calls)

    @property
    def pending(self) -> Any:
        """A :class:`~jigs.steps.PendingApproval` (session, usage, calls) to store."""
        update: dict[str, Any] = {"session": self.session}
        if self.usage is not None:
            update["usage"] = self.usage
        return self._pending.model_copy(update=update)


class StructuredOutputError(JigsError, ValueError):
    """The agent's structured answer did not validate against the requested model (after one
    re-ask)."""

    def __init__(self, message: str, *, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


class CredentialProxyError(JigsError, ValueError):
    """A step's credential proxy was set up wrong (a bad upstream URL, an empty key, an unknown
    auth scheme) or used out of order (its address read before it started, started twice)."""

    retryable: bool = False

    def __init__(self, message: str, *, upstream: str | None = None) -> None:
        super().__init__(message)
        self.upstream = upstream


class WorktreeLockError(JigsError, OSError):
    """The worktree directory could not be locked at all (it cannot be opened, or its
    filesystem has no ``flock``): not a busy worktree, a setup problem."""

    retryable: bool = False

    def __init__(self, worktree: Path, reason: str) -> None:
        self.worktree = worktree
        self.reason = reason
        super().__init__(
            f"jigs could not lock the worktree {worktree} ({reason}); give the step a worktree "
            f"directory this user can open, on a local filesystem that supports flock(2)"
        )


class SandboxUnavailableError(JigsError, OSError):
    """The host cannot sandbox the step (no user namespaces, no bwrap) and its descriptor
    asks for the sandbox (``sandbox="on"``, the default). ``reason`` says what failed and ``fix``
    how to get it (or how to opt out, ``sandbox="off"``); ``kind`` names the harness kind. Not
    retryable: the same host fails the same way."""

    retryable: bool = False

    def __init__(self, kind: str, reason: str, fix: str) -> None:
        self.kind = kind
        self.reason = reason
        self.fix = fix
        super().__init__(
            f"jigs cannot sandbox this {kind} step here ({reason}), and every step runs in "
            f"the sandbox unless its descriptor opts out. Fix: {fix}. Or, knowing that the agent "
            f'then sees the whole machine and network, set sandbox="off" on the descriptor '
            f'(e.g. harnesses.{kind}(..., sandbox="off"))'
        )


class SessionStoreError(JigsError, OSError):
    """A session store failed (unreachable database, refused credentials, a damaged artifact)
    or is misconfigured. ``store`` says which store (never with a secret), ``operation`` what it
    was doing (``put``, ``get``, ``configure``, ...). ``retryable`` is True for a backend that
    may answer later (a database or bucket that is down), False for a configuration error."""

    retryable = False

    def __init__(
        self, message: str, *, store: str, operation: str, retryable: bool | None = None
    ) -> None:
        super().__init__(message)
        self.store = store
        self.operation = operation
        if retryable is not None:
            self.retryable = retryable

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class SessionSaveError(SessionStoreError):
    """The step finished but its session could not be saved to the session store at close, so
    the step fails: a ref without a stored, digest-checked copy would resume whatever local copy
    is there (which the agent could have edited). ``session_id`` names the session (None when
    the kind failed to list its artifacts); ``retryable`` follows the store (a store that
    did not answer in time, or a backend that may come back, is worth a retry; a refused
    directory is not)."""

    def __init__(
        self,
        message: str,
        *,
        store: str,
        session_id: str | None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message, store=store, operation="put", retryable=retryable)
        self.session_id = session_id


class WorktreeError(JigsError, RuntimeError):
    """A worktree jigs provisions, diffs or releases (:mod:`jigs.worktrees`) could not be: not a
    git repository, a base that names no commit, git failed. ``worktree`` is the path. Not
    retryable: the same repository fails the same way."""

    retryable = False

    def __init__(self, message: str, *, worktree: Path) -> None:
        super().__init__(message)
        self.worktree = worktree


class CheckpointError(WorktreeError):
    """A worktree checkpoint could not be saved or restored (not a git repository, unresolved
    merge conflicts, git failed). Not retryable: the same worktree fails the same way."""


def _what_changed(changes: tuple[str, ...], core_contract: str, guide: str | None) -> str:
    """For a kind of an older contract major: what its author has to change, and where to read
    (empty when nothing is known)."""
    if not changes:
        return ""
    listed = "; ".join(f"({n}) {change}" for n, change in enumerate(changes, 1))
    return f" What changed in contract {core_contract}: {listed}." + (
        f" See {guide}." if guide else ""
    )


class HarnessContractError(HarnessNotFoundError):
    """An installed kind was built for a plugin contract this jigs-core does not implement (or
    declares none), so it is refused rather than loaded. A :class:`HarnessNotFoundError` (and so a
    ``LookupError``): code that handles a missing kind handles this one too.

    Fields: ``kind``; ``distribution`` and ``distribution_version`` (None for a kind registered
    in code); ``contract``, the version the kind declares (None: none); ``core_contract``, the
    version this core implements; ``core_version``, this jigs-core's version; ``fits``, the
    jigs-core versions that implement the kind's contract, as a requirement suffix such as
    ``">=0.1,<0.2"`` (None when no release this core knows of does); ``changes``, what changed
    since the kind's contract major (empty for a newer or unknown one), which the message lists
    with the author's guide. Not retryable: the same installation fails the same way.
    """

    retryable = False

    def __init__(
        self,
        kind: str,
        *,
        contract: str | None,
        core_contract: str,
        core_version: str,
        fits: str | None,
        distribution: str | None = None,
        distribution_version: str | None = None,
        changes: tuple[str, ...] = (),
        guide: str | None = None,
    ) -> None:
        self.contract = contract
        self.changes = changes
        self.core_contract = core_contract
        self.core_version = core_version
        self.fits = fits
        self.distribution = distribution
        self.distribution_version = distribution_version
        package = distribution or f"jigs-harness-{kind}"
        where = f" ({distribution} {distribution_version})" if distribution else ""
        major = core_contract.split(".", 1)[0]
        core = f"jigs-core {core_version} implements plugin contract {core_contract}"
        matching_kind = f"install a {package} release built for contract {major}.x"
        if contract is None:
            what = f"declares no plugin contract version, and {core}"
            span = (
                f"{major}.0 to {core_contract}" if core_contract != f"{major}.0" else major + ".0"
            )
            fitting = f"it loads kinds built for contract {span}"
            fix = (
                f"{matching_kind} (pip install -U {package}); if you maintain the kind, set "
                f'contract = "{core_contract}" on its Harness subclass'
            )
        elif contract.startswith("<malformed"):
            what = f"declares plugin contract {contract}, and {core}"
            fitting = 'a contract version is a "major.minor" string'
            fix = (
                f"{matching_kind}; if you maintain the kind, write "
                f'contract = "{core_contract}" (a string literal) on its Harness subclass'
            )
        elif fits is None:
            what = f"was built for plugin contract {contract}, but {core}"
            fitting = f"no jigs-core release known to this one implements contract {contract}"
            fix = f"upgrade jigs-core (pip install -U jigs-core), or {matching_kind}"
        else:
            what = f"was built for plugin contract {contract}, but {core}"
            fitting = f"jigs-core{fits} implements contract {contract}"
            fix = f"{matching_kind}, or pin jigs-core{fits} (pip install 'jigs-core{fits}')"
        message = (
            f"the {kind!r} harness{where} {what}: it is refused ({fitting}). Fix: {fix}."
            f"{_what_changed(changes, core_contract, guide)} "
            f"Meanwhile JIGS_DISABLE_PLUGINS={kind} hides it"
        )
        super().__init__(kind, [], load_error=message)
        self.args = (message,)


class MissingDistributionError(JigsError, ImportError):
    """A command needs an optional distribution that is not installed (``jigs demo`` and
    ``jigs model-server`` need jigs-testing). ``distribution`` is what to ``pip install``,
    ``needed_for`` what needed it. Not retryable: installing it is the fix."""

    retryable = False

    def __init__(self, distribution: str, *, needed_for: str) -> None:
        super().__init__(
            f"{needed_for} needs the {distribution} distribution, which is not installed; "
            f"install it with: pip install {distribution}"
        )
        self.distribution = distribution
        self.needed_for = needed_for

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class CliCommandError(JigsError, RuntimeError):
    """A command jigs ran to check or install a harness CLI failed: a ``--version`` probe, or
    ``jigs install``'s npm install. ``command`` is what ran (no environment shown),
    ``returncode`` its exit code (None when it exited 0 but printed something unusable), ``kind``
    the harness kind when known. The message ends with the command's output, secrets of its
    environment redacted. ``retryable`` is True for an install (the registry or the network may
    answer later), False for a probe (the same binary fails the same way)."""

    retryable = False

    def __init__(
        self,
        message: str,
        *,
        command: str,
        returncode: int | None = None,
        kind: str | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.command = command
        self.returncode = returncode
        self.kind = kind
        if retryable is not None:
            self.retryable = retryable
