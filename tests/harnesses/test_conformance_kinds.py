"""Every shipped kind passes the conformance kit third-party kinds run, with its real CLI."""

import pytest
from jigs_testing.conformance import check_harness

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("kind", ["claude", "codex", "pi"])
async def test_kind_passes_the_conformance_kit(kind, require_cli, tmp_path):
    require_cli(kind)
    await check_harness(kind, tmp_path=tmp_path)
