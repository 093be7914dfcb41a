"""With the step's own MCP server declared (Pi then loads its MCP extension, Codex and Claude
Code start servers), the planted config files of every kind still change nothing: the kit's
planted-config check, run against the real CLIs with a descriptor that declares a server."""

from __future__ import annotations

import pytest
from jigs_testing.conformance import CHECKS, kit_context
from mcp_configs import step_server

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("kind", ["claude", "codex", "pi", "opencode"])
async def test_planted_config_changes_nothing_with_step_mcp_servers(
    kind, require_cli, tmp_path, record_file
):
    require_cli(kind)

    def with_step_server(server):
        from jigs.registry._registry import default_registry
        from jigs_testing.plan import demo_plan_of

        base = demo_plan_of(default_registry().get(kind), server).descriptor
        return type(base).from_data({**base.to_data(), "mcp_servers": {"jigs": step_server()}})

    async with kit_context(kind, with_step_server, tmp_path=tmp_path) as ctx:
        await CHECKS["planted_config"](ctx)
