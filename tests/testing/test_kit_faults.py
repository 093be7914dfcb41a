"""The kit's fault checks fail for the kinds they are meant to catch: ``bad_output`` (a crash
read as bad output, a secret shown in an error, a kind that ignores ``resolve_executable``),
``turn_deadline`` (a turn that is not stopped at ``turn_timeout``: the kit's own bound ends it)
and ``stray_mcp_configs`` (a CLI that starts a server from a config it found); they leave HOME
as they found it."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest
from jigs_testing.conformance import STRAY_MCP_CONFIGS, check_harness

pytestmark = pytest.mark.anyio


async def test_bad_output_fails_a_crash_read_as_bad_output(tmp_path, monkeypatch):
    from jigs.processes import ManagedProcess

    # the engine no longer knows that the cut last line came with the end of the stream
    monkeypatch.setattr(ManagedProcess, "stdout_ended", property(lambda self: False))
    with pytest.raises(
        AssertionError,
        match=r"bad_output round 'crash': the step raised AgentOutputError instead of "
        r"AgentCrashedError",
    ):
        await check_harness("echo", tmp_path=tmp_path, only=["bad_output"])


async def test_bad_output_fails_an_error_that_shows_a_secret(tmp_path, monkeypatch):
    import jigs.policy._secrets

    monkeypatch.setattr(jigs.policy._secrets, "redact_known", lambda text, extra=(): text)
    with pytest.raises(
        AssertionError,
        match=r"round 'garbage': the AgentOutputError's message holds the value of "
        r"\$JIGS_CONFORMANCE_SECRET_TOKEN",
    ):
        await check_harness("echo", tmp_path=tmp_path, only=["bad_output"])


async def test_bad_output_fails_a_kind_that_ignores_resolve_executable(tmp_path, monkeypatch):
    from jigs_harness_echo._harness import EchoHarness

    launch_turn = EchoHarness.launch_turn

    def fixed(self, turn, ctx, state):
        spec = launch_turn(self, turn, ctx, state)
        return dataclasses.replace(spec, argv=[sys.executable, *spec.argv[1:]])

    monkeypatch.setattr(EchoHarness, "launch_turn", fixed)
    with pytest.raises(AssertionError, match=r"round 'crash': the step succeeded"):
        await check_harness("echo", tmp_path=tmp_path, only=["bad_output"])


async def test_turn_deadline_fails_a_turn_not_stopped_at_turn_timeout(tmp_path, monkeypatch):
    import time

    from jigs.policy._lock import worktree_locked
    from jigs.processes import live_groups
    from jigs_harness_echo._harness import EchoDescriptor

    replace = EchoDescriptor.replace

    def without_the_deadline(self, **changes):  # the kit's turn_timeout never reaches the step
        changes.pop("turn_timeout", None)
        return replace(self, **changes)

    monkeypatch.setattr(EchoDescriptor, "replace", without_the_deadline)
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"check turn_deadline failed: .* still running after"):
        await check_harness("echo", tmp_path=tmp_path, only=["turn_deadline"])
    assert time.monotonic() - started < 30  # the kit's own bound, not the command's 10 minutes
    assert not live_groups()
    assert not any(worktree_locked(p) for p in tmp_path.glob("turn-deadline-*"))


STARTER = """\
import json, os, subprocess, sys
server = json.load(open(".cursor/mcp.json"))["mcpServers"]["stray"]
subprocess.run([server["command"], *server["args"]], check=False)
os.execv(sys.argv[1], sys.argv[1:])
"""


async def test_stray_mcp_configs_fails_a_cli_that_starts_a_server_it_found(tmp_path, monkeypatch):
    from jigs_harness_echo._harness import EchoHarness

    # an executable of its own, in a directory of its own: the sandbox shows the step what
    # its executable runs from (that directory, its #! interpreter), and nothing else of tmp_path
    starter = tmp_path / "starter" / "start"
    starter.parent.mkdir()
    starter.write_text(f"#!{sys.executable}\n{STARTER}")
    starter.chmod(0o755)
    launch_turn = EchoHarness.launch_turn

    def starting(self, turn, ctx, state):  # the CLI starts what .cursor/mcp.json names
        spec = launch_turn(self, turn, ctx, state)
        return dataclasses.replace(spec, argv=[str(starter), *spec.argv])

    monkeypatch.setattr(EchoHarness, "launch_turn", starting)
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text("# the operator's own\n")
    with pytest.raises(
        AssertionError,
        match=r"check stray_mcp_configs failed: .*started MCP servers from configs the step "
        r"does not declare: \['worktree \.cursor/mcp\.json \(Cursor\)'\]",
    ):
        await check_harness("echo", tmp_path=tmp_path, only=["stray_mcp_configs"])
    # HOME is as it was: a file that was there is restored, the others are gone
    assert (home / ".codex" / "config.toml").read_text() == "# the operator's own\n"
    planted_home = [c.path for c in STRAY_MCP_CONFIGS if c.root == "home"]
    assert ".claude.json" in planted_home
    left = [p for p in planted_home if (home / p).exists() and p != ".codex/config.toml"]
    assert not left, left


async def test_stray_mcp_configs_plants_parseable_configs(tmp_path):
    import tomllib

    for config in STRAY_MCP_CONFIGS:
        text = config.write(["/bin/sh", "-c", "touch /nonexistent/marker"])
        data = tomllib.loads(text) if config.path.endswith(".toml") else json.loads(text)
        assert data, config.path
        if "settings.local" not in config.path:
            assert "touch /nonexistent/marker" in text, config.path
