"""The kit's ``interrupt`` and ``steer`` checks: talking to a running turn.

``interrupt``: the agent's shell runs ``sleep 30`` (the scripted model asks for it through
``DemoPlan.run_command``); once it has started, ``interrupt()`` on the
:func:`~jigs.steps.stream_agent` stream ends the step within :data:`INTERRUPT_BOUND` seconds with
:class:`~jigs.errors.AgentInterrupted` carrying a session ref, no process of the step left, the
worktree free; a step resuming that ref sends the interrupted turn's messages with its first
model request (a kind that calls no model server: the resumed step succeeds).

``steer``: the agent's shell waits for a file; meanwhile ``steer(text)`` puts a text into the
turn, and the file is made. The model request after the command (the same turn) holds the text.
A kind whose ``steer`` is refused (:class:`~jigs.errors.SteerRefusedError`, ``"unsupported"``,
with its :attr:`~jigs.plugin.Harness.steer_refusal`) passes when it says so; its turn is then
interrupted.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from jigs.errors import AgentInterrupted, SteerRefusedError
from jigs.events import ToolCallFinished
from jigs.policy._lock import worktree_locked
from jigs.sandbox._proctree import processes_under
from jigs.steps import AgentStream, stream_agent

if TYPE_CHECKING:
    from jigs_testing.conformance import KitContext

__all__ = ["INTERRUPT_BOUND", "interrupt", "steer"]

#: Seconds from ``interrupt()`` to the step's end (the worktree free, nothing running).
INTERRUPT_BOUND = 2.0
#: Seconds the kit waits for the agent's command to start.
_START_BOUND = 60.0


def _stream(ctx: KitContext, tree: Path, prompt: str, **options: Any) -> AgentStream:
    return stream_agent(
        harness=ctx.descriptor,
        cwd=tree,
        prompt=prompt,
        run=ctx.run,
        agents_env=ctx.plan.agents_env,
        **options,
    )


async def _started(marker: Path, kind: str) -> None:
    with anyio.fail_after(_START_BOUND):
        while not marker.exists():
            await anyio.sleep(0.02)


async def _drain(turn: AgentStream) -> list[object]:
    return [event async for event in turn]


async def interrupt(ctx: KitContext) -> None:
    """The ``interrupt`` check (see the module docstring)."""
    kind, server = ctx.kind, ctx.server
    tree = ctx.worktree("interrupt")
    marker = tree / "interrupt.started"
    prompt = ctx.shell_prompt(f"touch {marker.name} && sleep 30", "interrupt")
    async with _stream(ctx, tree, prompt) as turn:
        await _started(marker, kind)
        asked = time.monotonic()
        assert await turn.interrupt(), f"{kind}: interrupt() found no running turn"
        try:
            await _drain(turn)
        except AgentInterrupted as exc:
            error = exc
        else:
            raise AssertionError(f"{kind}: an interrupted turn ended without AgentInterrupted")
        took = time.monotonic() - asked
    assert took < INTERRUPT_BOUND, f"{kind}: the interrupted step took {took:.2f}s to end"
    assert not error.retryable, f"{kind}: AgentInterrupted says a retry helps"
    assert error.session is not None, f"{kind}: AgentInterrupted carries no session ref"
    left = processes_under(tree)
    assert not left, f"{kind}: the interrupted step left processes: {left}"
    assert not worktree_locked(tree), f"{kind}: the interrupted step left the worktree locked"
    server.script.skip_remaining()
    before = len(server.model_requests)
    again = await ctx.turn(tree, ctx.plan.recall(server), resume=error.session)
    assert again.session is not None, f"{kind}: the resumed step returned no session"
    resumed = server.model_requests[before:]
    if not resumed:  # a kind that calls no model server (the echo test kind): it resumed
        return
    assert marker.name in resumed[0].text(), (
        f"{kind}: the resumed step's first model request does not hold the interrupted turn "
        f"(its command {marker.name!r}): {resumed[0].text()[:300]!r}"
    )


async def steer(ctx: KitContext) -> None:
    """The ``steer`` check (see the module docstring)."""
    kind, server = ctx.kind, ctx.server
    tree = ctx.worktree("steer")
    marker, go = tree / "steer.started", tree / "steer.go"
    command = f"touch {marker.name} && while [ ! -e {go.name} ]; do sleep 0.05; done"
    prompt = ctx.shell_prompt(command, "steer")
    text = f"Also mention the word STEERED-{uuid.uuid4().hex[:8]}."
    before = len(server.model_requests)
    async with _stream(ctx, tree, prompt) as turn:
        await _started(marker, kind)
        refused: SteerRefusedError | None = None
        try:
            await turn.steer(text)
        except SteerRefusedError as exc:
            refused = exc
            await turn.interrupt()
        go.touch()
        try:
            events = await _drain(turn)
        except AgentInterrupted:
            events = []
    if refused is not None:
        assert refused.reason == "unsupported", f"{kind}: steer refused as {refused.reason!r}"
        assert ctx.harness.steer_refusal in str(refused), f"{kind}: the refusal says no why"
        assert turn.result is None, f"{kind}: the refused kind's turn was not interrupted"
        return
    assert turn.result is not None, f"{kind}: the steered turn has no result"
    assert any(isinstance(e, ToolCallFinished) for e in events), f"{kind}: the command never ended"
    # the request that carries the command's result, the turn's second, holds the text
    later = [r.text() for r in server.model_requests[before + 1 :]]
    assert len(later) == 1, f"{kind}: the steered turn made {len(later) + 1} model requests"
    assert text in later[0], (
        f"{kind}: the model request after the command does not hold the steered text: "
        f"{later[0][-300:]!r}"
    )
