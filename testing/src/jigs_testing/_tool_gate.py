"""The conformance kit's ``tool_gate`` check: a step's ``approve_tool`` holds with the real CLI.

For a kind that declares a gate (``Harness.tool_gate``), four turns, one tool call each: a shell
command the gate declines never runs (its marker file is absent) and one it allows does; a file
edit it declines never happens (the file is absent) and one it allows does; and the gate saw each
call's arguments (the command, the file's name), as ``"shell"`` and, where the plan scripts the
CLI's own edit tool (``DemoPlan.edit_file``), ``"file_edit"``. A kind without a gate must refuse
``approve_tool`` with :class:`~jigs.errors.InvalidInputError` naming why, before any process
starts, leaving the worktree unlocked.

``approval_pending``: a shell command the gate defers does not run and the step raises
:class:`~jigs.errors.ApprovalPending` with the call and a session whose ``PendingApproval``
survives JSON; a step that resumes it with ``approvals`` allowing that call (and a gate that
declines everything) runs the identical command exactly once without asking the gate, and the
agent's request carries the decision (:func:`~jigs.steps.approvals_prompt`). A kind without
a gate: skipped by design.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from jigs.errors import ApprovalPending, InvalidInputError
from jigs.policy._lock import worktree_locked
from jigs.steps import Allow, Defer, Deny, GatedCall, PendingApproval, approvals_prompt

if TYPE_CHECKING:
    from pathlib import Path

    from jigs_testing.conformance import KitContext

__all__ = ["approval_pending", "tool_gate"]


class _Gate:
    """Answers every call with one decision and keeps what it saw."""

    def __init__(self, allow: bool) -> None:
        self.allow = allow
        self.seen: list[GatedCall] = []

    def __call__(self, call: GatedCall) -> Allow | Deny:
        self.seen.append(call)
        return Allow() if self.allow else Deny("the conformance kit declines this call")

    def saw(self, needle: str) -> list[GatedCall]:
        return [c for c in self.seen if needle in json.dumps(c.arguments)]


async def tool_gate(ctx: KitContext) -> None:
    kind = ctx.kind
    if not ctx.harness.tool_gate:
        await _refused(ctx)
        return
    ctx.require_shell("tool_gate")
    for allow in (False, True):
        tree = ctx.worktree("gate-shell")
        marker = f"{'allowed' if allow else 'declined'}.marker"
        gate = _Gate(allow)
        await _turn(ctx, tree, ctx.shell_prompt(f"touch {marker}", "tool_gate"), gate)
        ran = (tree / marker).exists()
        assert ran == allow, f"{kind}: a shell command the gate {_said(allow)} ran={ran}"
        shells = [c for c in gate.saw(marker) if c.category == "shell"]
        assert shells, f"{kind}: the gate never saw the shell command: {gate.seen}"
        assert all(c.kind == kind and c.tool for c in shells), shells
    for allow in (False, True):
        tree = ctx.worktree("gate-edit")
        name = f"{'allowed' if allow else 'declined'}.txt"
        gate = _Gate(allow)
        await _turn(ctx, tree, _edit_prompt(ctx, tree, name), gate)
        wrote = (tree / name).exists()
        assert wrote == allow, f"{kind}: a file edit the gate {_said(allow)} wrote={wrote}"
        seen = gate.saw(name)
        assert seen, f"{kind}: the gate never saw the edit of {name}: {gate.seen}"
        if ctx.plan.edit_file is not None:
            assert any(c.category == "file_edit" for c in seen), f"{kind}: {seen}"


def _said(allow: bool) -> str:
    return "allowed" if allow else "declined"


def _edit_prompt(ctx: KitContext, tree: Path, name: str) -> str:
    """The CLI's own edit tool when the plan scripts it, else the plan's write."""
    if ctx.plan.edit_file is not None:
        prompt: str = ctx.plan.edit_file(ctx.server, str(tree / name), "gated\n")
        return prompt
    return ctx.write_prompt(name, "gated")


async def _turn(ctx: KitContext, tree: Path, prompt: str, gate: _Gate, **options: Any) -> Any:
    try:
        return await ctx.turn(tree, prompt, approve_tool=gate, **options)
    finally:
        ctx.server.script.skip_remaining()
        assert not worktree_locked(tree), f"{ctx.kind}: a gated step left the worktree locked"


async def _refused(ctx: KitContext) -> None:
    kind = ctx.kind
    tree = ctx.worktree("gate-refused")
    before = len(ctx.launches)
    refusal: InvalidInputError | None = None
    try:
        await ctx.turn(tree, "x", approve_tool=_Gate(True))
    except InvalidInputError as exc:
        refusal = exc
    assert refusal is not None, f"{kind}: a kind without a tool gate accepted approve_tool"
    assert refusal.argument == "approve_tool", f"{kind}: refused as {refusal.argument}: {refusal}"
    reason = ctx.harness.tool_gate_refusal
    assert reason, f"{kind}: Harness.tool_gate_refusal is empty"
    assert reason in str(refusal), f"{kind}: the refusal does not say why: {refusal}"
    started = ctx.launches[before:]
    assert not started, f"{kind}: a refused gate launched {started[0].argv[0]}"
    assert not worktree_locked(tree), f"{kind}: a refused gate left the worktree locked"


async def approval_pending(ctx: KitContext) -> None:
    """(The kit skips it for a kind without a gate.)"""
    kind = ctx.kind
    tree = ctx.worktree("gate-defer")
    command = "echo ran >> approved.marker"
    raised: ApprovalPending | None = None
    try:
        await ctx.turn(tree, ctx.shell_prompt(command, "approval_pending"), approve_tool=_defer)
    except ApprovalPending as exc:
        raised = exc
    finally:
        ctx.server.script.skip_remaining()
    assert raised is not None, f"{kind}: a deferred call did not raise ApprovalPending"
    assert not raised.retryable, f"{kind}: ApprovalPending says a retry can help"
    pending = PendingApproval.model_validate_json(raised.pending.model_dump_json())
    assert not (tree / "approved.marker").exists(), f"{kind}: the deferred command ran"
    assert not worktree_locked(tree), f"{kind}: a deferred step left the worktree locked"
    calls = [c for c in pending.calls if "approved.marker" in str(c.arguments)]
    assert calls, f"{kind}: the pending calls do not hold the command: {pending.calls}"
    assert pending.session is not None, f"{kind}: ApprovalPending carries no session"

    approvals = pending.decide({calls[0].call_id: Allow()})
    seen = len(ctx.server.model_requests)
    # the agent makes the approved call again (the plan's script): it runs, the gate unasked
    ctx.shell_prompt(command, "approval_pending")
    gate = _Gate(False)
    await _turn(
        ctx,
        tree,
        approvals_prompt(approvals),
        gate,
        resume=pending.session,
        approvals=approvals,
    )
    marker = tree / "approved.marker"
    ran = marker.read_text() if marker.exists() else ""
    assert ran == "ran\n", f"{kind}: the approved command ran {ran.count('ran')} time(s)"
    assert not gate.saw("approved.marker"), f"{kind}: the approved call was asked again"
    asked = ctx.server.model_requests[seen:]
    assert any("was approved" in r.text() for r in asked), f"{kind}: the agent never saw it"


def _defer(call: GatedCall) -> Defer:
    return Defer()
