"""Every shipped kind passes the conformance kit third-party kinds run, with its real CLI."""

import pytest
from jigs_testing.conformance import check_harness

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("kind", ["claude", "codex", "pi"])
async def test_kind_passes_the_conformance_kit(kind, require_cli, tmp_path):
    require_cli(kind)
    report = await check_harness(kind, tmp_path=tmp_path)
    # a shipped kind writes files and has a shell: only the checks that do not apply to it skip
    assert report.skipped.keys() <= {"no_model_refusal"}, report.skipped
    # the kit is where the engine's faults are tested on real CLIs (the kinds' own tests keep to
    # their decoder, argv/env and transport): none of these may be skipped
    assert {
        "lock_and_close",
        "hung_endpoint",
        "hung_cli",
        "turn_deadline",
        "cancelled_turn",
        "interrupt",
        "steer",
        "max_turns",
        "bad_output",
        "worker_death",
        "process_view",
        "planted_config",
        "stray_mcp_configs",
        "tool_free",
        "model_only",
        "key_not_relayed",
    } <= set(report.passed)
