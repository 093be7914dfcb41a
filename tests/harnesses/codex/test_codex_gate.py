"""A deferred call against the real Codex CLI (the kit's ``tool_gate`` check covers Allow/Deny):
Codex asks (approvalPolicy "untrusted"), the turn is interrupted with ApprovalPending, and the
resumed thread's identical command runs once when approved."""

from __future__ import annotations

import pytest
from jigs.errors import ApprovalPending
from jigs.steps import Allow, Defer, Deny, approvals_prompt, run_agent
from jigs_testing import text, tool_call

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli("codex")]


async def test_a_deferred_codex_call_waits_and_runs_once_when_approved(
    model_server, descriptor, worktree, run_meta
):
    command = {"cmd": "echo ran >> approved.txt"}
    model_server.add(tool_call("exec_command", command), text("must not be reached"))
    with pytest.raises(ApprovalPending) as info:
        await run_agent(
            harness=descriptor(),
            cwd=worktree,
            prompt="go",
            run=run_meta,
            agents_env=[],
            approve_tool=lambda call: Defer(),
        )
    pending = info.value.pending
    assert pending.session is not None
    assert [c.category for c in pending.calls] == ["shell"]
    assert not (worktree / "approved.txt").exists()
    model_server.script.skip_remaining()

    approvals = pending.decide({pending.calls[0].call_id: Allow()})
    model_server.add(
        tool_call("exec_command", command), tool_call("exec_command", command), text("done")
    )
    result = await run_agent(
        harness=descriptor(),
        cwd=worktree,
        prompt=approvals_prompt(approvals),
        run=run_meta,
        agents_env=[],
        resume=pending.session,
        approvals=approvals,
        approve_tool=lambda call: Deny("once is enough"),
    )
    assert result.text == "done"
    assert (worktree / "approved.txt").read_text() == "ran\n"
