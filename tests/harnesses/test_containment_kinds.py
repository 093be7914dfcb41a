"""Every shipped kind's agent, attacking its machine from its own shell with its real CLI, is
contained by a sandboxed step (the kit's ``containment`` check)."""

import pytest
from jigs_testing.conformance import check_harness

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("kind", ["claude", "codex", "pi"])
async def test_kind_is_contained_by_the_sandbox(kind, require_cli, tmp_path):
    require_cli(kind)
    report = await check_harness(kind, tmp_path=tmp_path, only=["containment"])
    assert report.passed == ["containment"], report.skipped


@pytest.mark.parametrize("kind", ["claude", "codex", "pi"])
async def test_what_an_agent_writes_in_its_home_reaches_no_later_step(kind, require_cli, tmp_path):
    require_cli(kind)
    report = await check_harness(kind, tmp_path=tmp_path, only=["home_per_step"])
    assert report.passed == ["home_per_step"], report.skipped
