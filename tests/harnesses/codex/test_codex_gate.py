"""The step's tool gate against the real Codex CLI: Codex asks (approvalPolicy "untrusted"), the
gate answers, and a deferred call ends the turn with ApprovalPending."""

from __future__ import annotations

import pytest
from jigs.errors import ApprovalPending
from jigs.steps import Allow, Defer, Deny, ToolCall, run_agent
from jigs_testing import text, tool_call

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli("codex")]

PATCH = "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: patched.txt\n+patched\n*** End Patch\nEOF\n"


async def test_codex_asks_the_gate_for_commands_and_patches(
    model_server, descriptor, worktree, run_meta
):
    model_server.add(
        tool_call("exec_command", {"cmd": "touch denied.marker"}),
        tool_call("exec_command", {"cmd": PATCH}),
        tool_call("exec_command", {"cmd": "touch allowed.marker"}),
        text("done"),
    )
    seen: list[ToolCall] = []

    def gate(call: ToolCall) -> Allow | Deny:
        seen.append(call)
        return Allow() if "allowed" in str(call.arguments) else Deny("not this one")

    result = await run_agent(
        harness=descriptor(),
        cwd=worktree,
        prompt="go",
        run=run_meta,
        agents_env=[],
        approve_tool=gate,
    )
    assert result.text == "done"
    assert not (worktree / "denied.marker").exists()
    assert not (worktree / "patched.txt").exists()
    assert (worktree / "allowed.marker").exists()
    print([(c.tool, c.category, c.arguments) for c in seen])
    assert [c.category for c in seen] == ["shell", "file_edit", "shell"]


async def test_a_deferred_codex_call_ends_the_turn_with_approval_pending(
    model_server, descriptor, worktree, run_meta
):
    model_server.add(tool_call("exec_command", {"cmd": "touch deferred.marker"}), text("no"))
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
    assert [c.tool for c in pending.calls] == ["exec_command"]
    assert not (worktree / "deferred.marker").exists()
