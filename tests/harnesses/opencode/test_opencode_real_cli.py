"""What the kit does not cover, through the real opencode CLI in one turn: the step's MCP server is
started and its tool called (opencode names it ``<server>_<tool>``), the descriptor's
instructions reach the model, and a disabled tool is not offered to it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jigs import RunMetadata
from jigs.steps import run_agent
from jigs_harness_opencode import OpencodeDescriptor
from jigs_testing import ModelServer, text, tool_call
from mcp_configs import records, step_server

pytestmark = pytest.mark.anyio
KEY_ENV = "JIGS_TEST_OPENCODE_KEY"


async def test_mcp_instructions_and_disabled_tools_reach_opencode(
    require_cli, worktree: Path, run_meta: RunMetadata, record_file: Path, monkeypatch
) -> None:
    require_cli("opencode")
    monkeypatch.setenv(KEY_ENV, "sk-test-opencode-0c1d2e3f")
    script = [tool_call("jigs_record", {"note": "NOTE-FROM-MODEL-7"}), text("recorded")]
    async with ModelServer(script) as server:
        descriptor = OpencodeDescriptor(
            base_url=server.openai_base_url,
            model="demo-model",
            api_key_env=KEY_ENV,
            instructions=("Always answer in the voice of INSTRUCTION-MARKER-31.",),
            disabled_tools=("webfetch",),
            mcp_servers={"jigs": step_server()},
        )
        result = await run_agent(harness=descriptor, cwd=worktree, prompt="record", run=run_meta)
        first = server.model_requests[0].body
    assert result.text == "recorded"
    assert records(record_file) == [{"note": "NOTE-FROM-MODEL-7"}]
    declared = [t.get("function", {}).get("name") for t in first.get("tools") or []]
    assert "jigs_record" in declared
    assert "bash" in declared
    assert "webfetch" not in declared
    assert "INSTRUCTION-MARKER-31" in json.dumps(first.get("messages"))
