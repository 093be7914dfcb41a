"""Usage over the real Codex app server: a turn's usage is the sum of its responses (Codex reports
no cost). The engine's deadlines and ``max_turns`` are tested once for every kind:
tests/core/test_turn_faults.py and the conformance kit (``hung_endpoint``, ``hung_cli``,
``turn_deadline``, ``max_turns``), which test_conformance_kinds runs on the real Codex."""

from __future__ import annotations

import pytest
from jigs.events import ModelCallStarted, UsageUpdated
from jigs.steps import run_agent
from jigs_testing import text, tool_call

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli("codex")]


async def test_usage_on_success_is_the_sum_of_the_turns_responses(
    model_server, descriptor, worktree, run_meta
):
    model_server.add(tool_call("exec_command", {"cmd": "true"}), text("done"))
    events: list[object] = []
    result = await run_agent(
        harness=descriptor(max_turns=2),
        cwd=worktree,
        prompt="go",
        run=run_meta,
        agents_env=[],
        on_event=events.append,
    )
    assert result.text == "done"
    updates = [e.usage for e in events if isinstance(e, UsageUpdated)]
    assert len(updates) == 2
    assert updates[1].input_tokens > updates[0].input_tokens  # cumulative over the turn
    assert result.usage == updates[-1]
    assert result.usage.output_tokens
    assert result.usage.cost_usd is None
    assert [type(e) for e in events].count(ModelCallStarted) == 2
