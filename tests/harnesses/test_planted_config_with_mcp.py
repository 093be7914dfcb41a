"""With the step's own MCP server declared (Pi then loads its MCP extension, Codex and Claude
Code start servers), the planted config files of every kind still change nothing: the kit's
planted-config check, run against the real CLIs with a descriptor that declares a server."""

from __future__ import annotations

import uuid

import pytest
from jigs import RunMetadata
from jigs._registry import default_registry
from jigs_testing import ModelServer
from jigs_testing.conformance import _check_planted_config
from mcp_configs import step_server

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("kind", ["claude", "codex", "pi"])
async def test_planted_config_changes_nothing_with_step_mcp_servers(
    kind, require_cli, tmp_path, record_file, monkeypatch
):
    require_cli(kind)
    harness = default_registry().get(kind)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    async with ModelServer() as server:
        plan = harness.demo_plan(server)
        for name, value in plan.host_env.items():
            monkeypatch.setenv(name, value)
        base = plan.descriptor
        descriptor = type(base).from_data(
            {**base.to_data(), "mcp_servers": {"jigs": step_server()}}
        )
        await _check_planted_config(
            kind,
            harness,
            descriptor,
            plan,
            server,
            run=RunMetadata(workflow_run_id=f"planted-mcp-{uuid.uuid4().hex[:8]}"),
            tmp_path=tmp_path,
            home=home,
        )
