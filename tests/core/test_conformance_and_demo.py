import pytest
from jigs_testing.conformance import CHECKS, check_harness
from jigs_testing.demo import run_demo

pytestmark = pytest.mark.anyio


async def test_the_echo_kind_passes_the_conformance_kit(tmp_path):
    report = await check_harness("echo", tmp_path=tmp_path)
    assert [o.name for o in report.outcomes] == list(CHECKS)
    # every check ran but the one for kinds without a model, which is reported by name, the
    # credential proxy's (the echo descriptor names no model key: no proxy to check) and the
    # deferred approval's (echo has no tool gate: tool_gate checks that it refuses one)
    skipped = {
        "no_model_refusal",
        "model_only",
        "key_not_relayed",
        "approval_pending",
        "step_tools",
    }
    assert report.skipped.keys() == skipped
    assert "has a model" in report.skipped["no_model_refusal"]
    assert "no credential proxy" in report.skipped["model_only"]
    assert "has no tool gate" in report.skipped["approval_pending"]
    assert "calls no MCP tools" in report.skipped["step_tools"]
    assert {"bad_output", "stray_mcp_configs", "tool_gate"} <= set(report.passed)


async def test_the_kit_catches_a_kind_that_leaks_the_host_environment(tmp_path, monkeypatch):
    import jigs.plugin

    original = jigs.plugin.HarnessContext.launch

    async def leaky(self, argv, *, cwd, env=None, stdin="closed", owner=None):
        import os

        return await original(self, argv, cwd=cwd, env=dict(os.environ), stdin=stdin, owner=owner)

    monkeypatch.setattr(jigs.plugin.HarnessContext, "launch", leaky)
    with pytest.raises(AssertionError, match=r"outside the allowlist|host canaries"):
        await check_harness("echo", tmp_path=tmp_path)


async def test_demo_runs_the_echo_kind_end_to_end(capsys):
    (report,) = await run_demo(["echo"])
    assert report.ok, report.error
    assert report.lock_released
    assert report.file_content == "written by the echo agent"
    # resuming forks: the second step continues a copy under a new id
    assert report.resumed_session_id is not None
    assert report.session_id != report.resumed_session_id
    assert report.answers[1] == "echo: recall (turn 2)"
    out = capsys.readouterr().out
    assert "environment passed (names only): " in out
    assert "result: ok" in out


async def test_demo_reports_an_unknown_kind_without_a_traceback(capsys):
    (report,) = await run_demo(["nosuchkind"])
    assert not report.ok
    assert "pip install jigs-harness-nosuchkind" in (report.error or "")
