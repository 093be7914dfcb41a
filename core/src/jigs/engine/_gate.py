"""The tool gate: one typed ``approve_tool(call)`` for every kind that can ask before a tool runs.

A step passes ``approve_tool=fn`` (:class:`jigs.steps.StepOptions`); ``fn(call)`` (sync or async)
gets a :class:`GatedCall` and returns :class:`Allow`, :class:`Deny` (with the reason the agent
reads) or :class:`Defer`. The core wraps it in a :class:`ToolGate` per step and hands that to the
kind (:attr:`jigs.plugin.TurnSpec.gate`); the kind maps its CLI's permission protocol onto
:meth:`ToolGate.decide` and tells the CLI the answer. A kind that cannot ask before a tool runs
(``Harness.tool_gate`` False) refuses the option when the step opens, before anything starts.

``Defer`` means "a human decides later": the call does not run, the kind ends the turn, and the
step raises :class:`~jigs.errors.ApprovalPending` carrying the session, the usage and the pending
call(s) (:class:`PendingApproval`, a pydantic model a workflow engine can store). Once someone
decided, a later step resumes the session with ``approvals=pending.decide({call_id: Allow()})``
and a prompt such as :func:`approvals_prompt`: the gate then allows the identical call (same
tool, same arguments) once without asking ``fn``, and refuses a denied one with its reason.

A gate that raises, or returns anything but a decision, fails the turn with
:class:`~jigs.errors.ToolGateError` (the call never runs: the CLI is stopped before it gets an
answer).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from jigs.engine._types import AgentSessionRef
from jigs.engine._usage import Usage
from jigs.errors import InvalidInputError, ToolGateError

__all__ = [
    "Allow",
    "Answer",
    "Approval",
    "ApproveTool",
    "Decided",
    "Decision",
    "Defer",
    "Deny",
    "GatedCall",
    "PendingApproval",
    "Question",
    "ToolGate",
    "approvals_prompt",
    "decisions_of",
    "gate_from_options",
]


class _Frozen(BaseModel):
    # schemas built on first use, as the records' (a step without a gate never builds them)
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class GatedCall(_Frozen):
    """One tool call the agent is about to make, as the gate sees it.

    ``kind`` is the harness kind; ``tool`` the CLI's own name for the tool (``"Bash"``,
    ``"exec_command"``, ``"mcp__files__write"``); ``category`` what it is: ``"shell"`` (a
    command), ``"file_edit"`` (a file written or patched), ``"mcp"`` (an MCP server's tool),
    ``"question"`` (the agent's question to a human, :func:`~jigs.steps.ask_human`: never
    gated, always pending) or ``"other"``; ``arguments`` the call's input as the CLI gave it (a
    command's ``command``, an edit's ``file_path`` or ``paths``, a question's ``question``);
    ``call_id`` the CLI's id of the call (unique in its session; a question's is jigs' own)."""

    kind: str
    tool: str
    category: Literal["shell", "file_edit", "mcp", "question", "other"]
    arguments: dict[str, Any] = Field(default_factory=dict)
    call_id: str = ""

    def same_call(self, other: GatedCall) -> bool:
        """Whether ``other`` asks for exactly this (the id aside: a re-issued call has a new
        one)."""
        return (self.kind, self.tool, _canonical(self.arguments)) == (
            other.kind,
            other.tool,
            _canonical(other.arguments),
        )


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class Allow(_Frozen):
    """Let the call run."""

    decision: Literal["allow"] = "allow"


class Deny(_Frozen):
    """Refuse the call; the agent reads ``reason`` (``Deny("no network")``)."""

    decision: Literal["deny"] = "deny"
    reason: str = "refused by the step's tool gate"

    def __init__(self, reason: str | None = None, /, **data: Any) -> None:
        if reason is not None:
            data["reason"] = reason
        super().__init__(**data)


class Defer(_Frozen):
    """Not now: the call does not run, the turn ends, the step raises
    :class:`~jigs.errors.ApprovalPending`."""

    decision: Literal["defer"] = "defer"


class Answer(_Frozen):
    """A human's answer to the agent's question (:func:`~jigs.steps.ask_human`): the agent reads
    ``text`` as the next message (``Answer("use the v2 endpoint")``)."""

    decision: Literal["answer"] = "answer"
    text: str

    def __init__(self, text: str | None = None, /, **data: Any) -> None:
        if text is not None:
            data["text"] = text
        super().__init__(**data)


#: What a gate returns.
Decision = Annotated[Allow | Deny | Defer, Field(discriminator="decision")]

#: What a human decides for a pending call: a tool call is allowed or denied, a question is
#: answered (or denied: "no answer", with the reason the agent reads).
Decided = Annotated[Allow | Deny | Answer, Field(discriminator="decision")]

_DECISIONS: TypeAdapter[dict[str, Allow | Deny | Answer]] = TypeAdapter(dict[str, Decided])


def decisions_of(message: object) -> dict[str, Allow | Deny | Answer]:
    """A human's decisions as ``{call_id: Allow() | Deny(reason) | Answer(text)}``: the models
    themselves, or their JSON data (``{"c1": {"decision": "answer", "text": "yes"}}``), so a
    sender without jigs can decide. Raises :class:`~jigs.errors.InvalidInputError` for anything
    else (the message is not echoed: it may hold what a human typed)."""
    try:
        return _DECISIONS.validate_python(message)
    except ValidationError as exc:
        where = sorted({".".join(map(str, e["loc"])) or "(all)" for e in exc.errors()})
        raise InvalidInputError(
            f"a decision must map call ids to Allow(), Deny(reason) or Answer(text); wrong at: "
            f"{', '.join(where)[:300]}",
            argument="decision",
        ) from None


#: ``approve_tool(call) -> Allow | Deny | Defer`` (or an awaitable of it).
ApproveTool = Callable[[GatedCall], "Allow | Deny | Defer | Awaitable[Allow | Deny | Defer]"]


class Approval(_Frozen):
    """A decision taken after a :class:`Defer` (or a question), fed back to the step that
    resumes the session (``approvals=[...]``): ``call`` is the pending call, ``decision`` what
    was decided."""

    call: GatedCall
    decision: Decided


class Question(_Frozen):
    """A question the agent asked a human (:func:`~jigs.steps.ask_human`), as
    :attr:`PendingApproval.questions` lists it."""

    call_id: str
    question: str


class PendingApproval(_Frozen):
    """What :class:`~jigs.errors.ApprovalPending` carries, as data a workflow can store: the
    session to resume, the usage of the turn that ended, the calls waiting for a human (tool
    calls a gate deferred, and the agent's questions: :attr:`questions`)."""

    session: AgentSessionRef | None
    usage: Usage = Field(default_factory=Usage)
    calls: tuple[GatedCall, ...]

    @property
    def questions(self) -> tuple[Question, ...]:
        """The agent's questions among :attr:`calls` (:func:`~jigs.steps.ask_human`)."""
        return tuple(
            Question(call_id=c.call_id, question=str(c.arguments.get("question", "")))
            for c in self.calls
            if c.category == "question"
        )

    def decide(self, decisions: Mapping[str, Allow | Deny | Answer]) -> list[Approval]:
        """The ``approvals`` of the resuming step: ``{call_id: Allow() | Deny(reason)}`` for
        pending tool calls, ``{call_id: Answer(text) | Deny(reason)}`` for questions (a call
        left out is neither allowed nor refused: the gate asks again; a question left out stays
        unanswered). Raises :class:`~jigs.errors.InvalidInputError` for an id that is not
        pending, an answer to a tool call, or an approval of a question."""
        by_id = {call.call_id: call for call in self.calls}
        unknown = sorted(set(decisions) - set(by_id))
        if unknown:
            raise InvalidInputError(
                f"no pending call has the id(s) {unknown}; pending: {sorted(by_id)}",
                argument="approvals",
            )
        for call_id, decision in decisions.items():
            question = by_id[call_id].category == "question"
            if question and isinstance(decision, Allow):
                raise InvalidInputError(
                    f"{call_id!r} is the agent's question: answer it with Answer(text), or "
                    f"Deny(reason) to leave it unanswered",
                    argument="approvals",
                )
            if not question and isinstance(decision, Answer):
                raise InvalidInputError(
                    f"{call_id!r} is a tool call, not a question: decide it with Allow() or "
                    f"Deny(reason)",
                    argument="approvals",
                )
        return [Approval(call=by_id[i], decision=d) for i, d in decisions.items()]


def approvals_prompt(approvals: Sequence[Approval]) -> str:
    """A prompt for the resuming step that tells the agent what was decided: an approved call
    is to be made again exactly as before (the gate lets it through once), a refused one not;
    a question's answer is quoted under the question."""
    lines = []
    for approval in approvals:
        call, decision = approval.call, approval.decision
        if call.category == "question":
            lines.append(_answered(call, decision))
            continue
        what = f"`{call.tool}` {_canonical(call.arguments)}"
        if isinstance(decision, Allow):
            lines.append(f"- {what} was approved: make this call again, exactly as before.")
        else:
            lines.append(
                f"- {what} was refused: {getattr(decision, 'reason', '')}. Do not make it."
            )
    if all(a.call.category == "question" for a in approvals):
        return "A human answered what you asked:\n" + "\n".join(lines)
    return "The tool calls that were waiting for approval have been decided:\n" + "\n".join(lines)


def _answered(call: GatedCall, decision: Allow | Deny | Answer) -> str:
    question = json.dumps(str(call.arguments.get("question", "")))
    if isinstance(decision, Answer):
        return f"- You asked {question}. The answer: {decision.text}"
    reason = getattr(decision, "reason", "")
    return f"- You asked {question}. No answer will come ({reason}): go on without one."


class ToolGate:
    """The step's gate, as a kind calls it (:attr:`jigs.plugin.TurnSpec.gate`).

    :meth:`decide` answers one call; the answer is final for that call. After a
    :class:`Defer` every later call of the turn is deferred too (the turn is ending), and the
    core raises :class:`~jigs.errors.ApprovalPending` with :attr:`pending` when the turn ends.
    """

    def __init__(
        self, approve: ApproveTool | None, approvals: Sequence[Approval] = (), log: Any = None
    ) -> None:
        self._approve = approve
        self._approvals = list(approvals)
        self._log = log
        #: The calls deferred in the current turn (reset when a turn starts).
        self.pending: list[GatedCall] = []
        #: Every call the gate was asked about, with its answer (for logs and tests).
        self.seen: list[tuple[GatedCall, Allow | Deny | Defer]] = []

    def start_turn(self) -> None:
        self.pending = []

    async def decide(self, call: GatedCall) -> Allow | Deny | Defer:
        """The answer for ``call``: a fed-back :class:`Approval` for the identical call, else
        the step's function (no function: :class:`Allow`). Raises
        :class:`~jigs.errors.ToolGateError` when the function raises or answers nonsense."""
        decision = await self._decide(call)
        self.seen.append((call, decision))
        if isinstance(decision, Defer):
            self.pending.append(call)
        if self._log is not None:
            self._log.info(
                "gate.decided", tool=call.tool, category=call.category, decision=decision.decision
            )
        return decision

    async def _decide(self, call: GatedCall) -> Allow | Deny | Defer:
        if self.pending:
            return Defer()  # the turn is ending: nothing else runs before the decision
        for approval in self._approvals:
            decided = approval.decision
            if approval.call.same_call(call) and not isinstance(decided, Answer):
                if isinstance(decided, Allow):
                    self._approvals.remove(approval)  # once
                return decided
        if self._approve is None:
            return Allow()
        try:
            decision = self._approve(call)
            if inspect.isawaitable(decision):
                decision = await decision
        except Exception as exc:
            raise ToolGateError(
                f"the step's approve_tool raised {type(exc).__name__} on {call.tool} "
                f"({call.category}); the call did not run and the turn was stopped",
                kind=call.kind,
            ) from exc
        if not isinstance(decision, Allow | Deny | Defer):
            raise ToolGateError(
                f"the step's approve_tool returned {type(decision).__name__} for {call.tool}; "
                f"return jigs.steps.Allow(), Deny(reason) or Defer()",
                kind=call.kind,
            )
        return decision


def gate_from_options(
    approve: object, approvals: object, provider_options: Mapping[str, Any] | None, log: Any
) -> ToolGate | None:
    """The step's :class:`ToolGate` from its options (None: no gate). Refuses, as
    :class:`~jigs.errors.InvalidInputError`, a gate that is not callable, approvals that are not
    :class:`Approval` (or their mappings), and ``approve_tool`` in ``provider_options`` (where
    it lived before it was one gate for every kind)."""
    for kind, options in (provider_options or {}).items():
        if isinstance(options, Mapping) and "approve_tool" in options:
            raise InvalidInputError(
                f"provider_options[{kind!r}]['approve_tool'] moved: pass approve_tool=fn to the "
                f"step (run_agent, create_agent_runner, ...), where fn(call: GatedCall) returns "
                f"Allow(), Deny(reason) or Defer() (jigs.steps); it gates every kind",
                argument="provider_options",
            )
    if approve is not None and not callable(approve):
        raise InvalidInputError(
            f"approve_tool must be a function fn(call) -> Allow | Deny | Defer, not "
            f"{type(approve).__name__}",
            argument="approve_tool",
        )
    if isinstance(approvals, str | bytes | Mapping) or not isinstance(approvals, Sequence | None):
        raise InvalidInputError(
            "approvals must be a list of jigs.steps.Approval (PendingApproval.decide(...))",
            argument="approvals",
        )
    try:
        fed = [Approval.model_validate(a) for a in approvals or ()]
    except ValueError as exc:
        raise InvalidInputError(
            f"approvals must be a list of jigs.steps.Approval: {str(exc)[:300]}",
            argument="approvals",
        ) from None
    # an answered question is the resumed turn's prompt, not a gate's business: a step that
    # only answers questions runs ungated (a kind without a gate can ask too)
    fed = [a for a in fed if a.call.category != "question"]
    if approve is None and not fed:
        return None
    return ToolGate(approve, fed, log)
