"""``max_budget_usd`` as Claude Code enforces it (a native limit: the kind passes it to the CLI and
maps the CLI's result): the turn stops with an error that keeps its cost and session. The core's
deadlines and ``max_turns`` are checked once for every kind: tests/core/test_turn_faults.py (the
echo kind) and the conformance kit (``hung_endpoint``, ``turn_deadline``, ``max_turns``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from claude_helpers import AGENTS_ENV, descriptor_for
from jigs import RunMetadata
from jigs.errors import AgentLimitError
from jigs.processes import live_groups
from jigs.steps import run_agent
from jigs_testing import ModelServer, text, tool_call

pytestmark = pytest.mark.anyio


def _loop(count: int) -> list[object]:
    """A scripted model that keeps calling Bash."""
    return [
        tool_call("Bash", {"command": f"echo LOOP-{i}", "description": f"loop {i}"})
        for i in range(count)
    ]


async def test_max_budget_usd_stops_the_turn_with_its_cost(
    claude_cli: Path, server: ModelServer, worktree: Path, run_meta: RunMetadata
) -> None:
    server.add(*_loop(4), text("never reached"))
    with pytest.raises(AgentLimitError) as caught:
        await run_agent(
            harness=descriptor_for(server, model="claude-sonnet-4-5", max_budget_usd=0.000001),
            cwd=worktree,
            prompt="spend",
            run=run_meta,
            agents_env=AGENTS_ENV,
        )
    error = caught.value
    assert error.limit == "max_budget_usd"
    assert error.cost_usd is not None
    assert error.cost_usd > 0.000001
    assert error.session is not None
    assert len(server.model_requests) < 5
    assert live_groups() == {}
