"""ask_agent with each kind's real CLI against the local model server: the kit's ``tool_free``
check (no tool offered, no planted file sent even when the model asks the shell to print it, no
lock, no session, no directory left), run with the sandbox off so that the CLI's own flags are
what is tested (the kit runs it sandboxed); and what an ask refuses."""

from __future__ import annotations

import pytest
from jigs import harnesses
from jigs.errors import InvalidInputError
from jigs.steps import ask_agent
from jigs_testing.conformance import CHECKS, kit_context
from mcp_configs import step_server

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("kind", ["claude", "codex", "pi", "opencode"])
async def test_an_ask_offers_no_tool_reads_no_planted_file_and_leaves_nothing(
    kind, require_cli, tmp_path
):
    require_cli(kind)

    def unsandboxed(server):
        from jigs.registry._registry import default_registry
        from jigs_testing.plan import demo_plan_of

        base = demo_plan_of(default_registry().get(kind), server).descriptor
        return type(base).from_data({**base.to_data(), "sandbox": "off"})

    async with kit_context(kind, unsandboxed, tmp_path=tmp_path) as ctx:
        assert ctx.harness.tool_free_problem(ctx.descriptor) is None
        await CHECKS["tool_free"](ctx)


async def test_an_ask_refuses_a_worktree_mcp_servers_and_a_kind_without_a_tool_free_mode(
    run_meta, worktree
):
    with pytest.raises(InvalidInputError, match="scratch directory"):
        await ask_agent(harness=harnesses.echo(), prompt="x", run=run_meta, cwd=worktree)  # type: ignore[call-overload]
    with pytest.raises(InvalidInputError, match="no MCP servers"):
        await ask_agent(
            harness={"kind": "claude", "mcp_servers": {"s": step_server()}},
            prompt="x",
            run=run_meta,
        )
    with pytest.raises(InvalidInputError, match="without tools"):
        await ask_agent(harness=harnesses.echo(), prompt="x", run=run_meta)
