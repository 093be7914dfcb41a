"""The conformance kit's ``step_tools`` check: a step's Python tools (``tools=``) and
:func:`~jigs.steps.ask_human` work through the kind's real CLI.

One step, two turns. The scripted model calls ``jigs_kit_record`` (its result reaches the next
model request; its call is in the event stream and in the step log's ``tool.called``), then
``jigs_kit_explode``, which raises with a secret of the worker in its message (the agent reads a
tool error, the secret masked, and the step goes on), then ``ask_human``: the turn ends with
:class:`~jigs.errors.ApprovalPending` carrying the question, the agent having read that it
should end its turn. The session is resumed with the answer (:class:`~jigs.steps.Answer`,
:func:`~jigs.steps.approvals_prompt`): the next model request holds the question and the
answer. After the step the tool server's port is closed.

The kit scripts the calls under the names the kind's CLI gives the step's tools
(:attr:`~jigs_testing.plan.DemoPlan.step_tool`); a kind whose plan has none (its CLI calls no
MCP tools) is skipped by design.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from jigs.errors import ApprovalPending
from jigs.events import AgentEvent, ToolCallFinished, ToolCallStarted
from jigs.steps import Answer, PendingApproval, approvals_prompt, ask_human
from structlog.testing import capture_logs

from jigs_testing._server.replies import text, tool_call

if TYPE_CHECKING:
    from jigs_testing.conformance import KitContext

__all__ = ["step_tools"]

_SECRET_ENV = "JIGS_KIT_TOOL_SECRET"
_QUESTION = "Which branch should the fix go to?"


@contextlib.contextmanager
def _worker_secret() -> Iterator[str]:
    """A secret-shaped value in the worker's environment for the block (a tool's error quotes
    it; the agent must read it masked)."""
    value = f"sk-kit-{uuid.uuid4().hex}"
    os.environ[_SECRET_ENV] = value
    try:
        yield value
    finally:
        os.environ.pop(_SECRET_ENV, None)


async def step_tools(ctx: KitContext) -> None:
    """The ``step_tools`` check (see the module docstring)."""
    kind, name = ctx.kind, ctx.plan.step_tool
    assert name is not None  # the kit skips a plan without step_tool
    tree = ctx.worktree("step-tools")
    recorded: list[str] = []

    def jigs_kit_record(value: str) -> str:
        """Record a value for the workflow."""
        recorded.append(value)
        return f"RECORDED-{value.upper()}"

    with _worker_secret() as secret:

        def jigs_kit_explode(reason: str) -> str:
            """A tool that always fails."""
            raise RuntimeError(f"exploded ({reason}) holding {secret}")

        ctx.server.add(
            tool_call(name("jigs_kit_record"), {"value": "ship"}),
            tool_call(name("jigs_kit_explode"), {"reason": "on purpose"}),
            tool_call(name("ask_human"), {"question": _QUESTION}),
            text("Waiting for a human."),
        )
        seen = len(ctx.server.model_requests)
        tools = [jigs_kit_record, jigs_kit_explode, ask_human]
        raised: ApprovalPending | None = None
        events: list[AgentEvent] = []
        with capture_logs() as logs:
            try:
                await ctx.turn(tree, "Use the tools.", tools=tools, on_event=events.append)
            except ApprovalPending as exc:
                raised = exc
            finally:
                ctx.server.script.skip_remaining()
        asked = [r.text() for r in ctx.server.model_requests[seen:]]
        assert recorded == ["ship"], f"{kind}: the tool ran with {recorded}"
        bodies = json.dumps([r.body for r in ctx.server.model_requests[seen:]])
        assert secret not in bodies, f"{kind}: a tool's error reached the model unmasked"
    assert len(asked) >= 4, f"{kind}: {len(asked)} model requests, not one per tool result"
    assert "RECORDED-SHIP" in asked[1], f"{kind}: the tool's result never reached the model"
    assert "jigs_kit_explode failed: RuntimeError" in asked[2], f"{kind}: no tool error"
    assert "End your turn" in asked[3], f"{kind}: the agent never read that a human was asked"
    assert raised is not None, f"{kind}: ask_human did not end the step with ApprovalPending"
    streamed = [e.name for e in events if isinstance(e, ToolCallStarted | ToolCallFinished)]
    assert any("jigs_kit_record" in n for n in streamed), f"{kind}: no tool call event: {streamed}"
    called = [(e["tool"], e["is_error"]) for e in logs if e["event"] == "tool.called"]
    assert called[:2] == [("jigs_kit_record", False), ("jigs_kit_explode", True)], called
    pending = raised.pending
    questions = [q.question for q in pending.questions]
    assert questions == [_QUESTION], f"{kind}: the pending questions are {questions}"
    assert pending.session is not None, f"{kind}: ApprovalPending carries no session"
    port = next(e["port"] for e in logs if e["event"] == "runner.tools.started")
    with contextlib.suppress(OSError):
        stream = await anyio.connect_tcp("127.0.0.1", port)
        await stream.aclose()
        raise AssertionError(f"{kind}: the step's tool server still listens after close")
    await _answered(ctx, tree, pending)


async def _answered(ctx: KitContext, tree: Path, pending: PendingApproval) -> None:
    """The resumed turn reads the answer under its question."""
    answer = f"the {uuid.uuid4().hex[:8]} branch"
    approvals = pending.decide({pending.questions[0].call_id: Answer(answer)})
    ctx.server.add(text("Fixing it there."))
    seen = len(ctx.server.model_requests)
    result = await ctx.turn(
        tree,
        approvals_prompt(approvals),
        resume=pending.session,
        tools=[ask_human],
    )
    asked = ctx.server.model_requests[seen].text()
    assert answer in asked, f"{ctx.kind}: the resumed turn never read the answer"
    assert _QUESTION in asked, f"{ctx.kind}: the resumed turn never read its question"
    assert result.text == "Fixing it there.", f"{ctx.kind}: the resumed turn said {result.text!r}"
