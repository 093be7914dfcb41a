"""``jigs demo`` against the codex kind (the conformance kit runs on it in
tests/harnesses/test_conformance_kinds.py)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli("codex")]


async def test_jigs_demo_shows_codex_end_to_end(codex_cli):
    from jigs_testing.demo import run_demo

    (report,) = await run_demo(["codex"])
    assert report.error is None, report.error
    assert report.skipped is None, report.skipped
    assert report.ok
    assert report.file_content == "written by the codex agent"
    assert report.session_id is not None
    assert report.resumed_session_id not in (None, report.session_id)  # a fork of it
    assert report.lock_released
