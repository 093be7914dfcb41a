"""The jigs command, run as a user runs it (a subprocess)."""

import json
import os
import subprocess
import sys
from pathlib import Path

SERVER = str(Path(__file__).resolve().parents[1] / "fixtures" / "mcp_server.py")


def jigs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigs.cli", *args],
        capture_output=True,
        text=True,
        # the output's width is the terminal's: a COLUMNS inherited from the test runner (xdist's
        # workers have one) would fold the lines these tests read
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
        check=False,
        timeout=120,
    )


def test_harnesses_json_lists_the_echo_kind():
    result = jigs("harnesses", "--json")
    assert result.returncode == 0, result.stderr
    rows = {r["kind"]: r for r in json.loads(result.stdout)}
    assert rows["echo"]["distribution"] == "jigs-harness-echo"
    assert rows["echo"]["has_model"] is True


def test_doctor_passes_for_echo_and_fails_with_the_fix_for_a_bad_mcp_server(tmp_path):
    ok = jigs("doctor", "--harness", "echo")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "Echo CLI" in ok.stdout
    assert "model route" in ok.stdout
    assert "sandbox and network" in ok.stdout
    assert ok.stdout.rstrip().endswith("3 passed, 0 failed")
    settings = {
        "mcp_servers": {
            "t": {
                "command": sys.executable,
                "args": [SERVER, "--no-probe"],
                "probe": {"tool": "probe"},
            }
        }
    }
    bad = jigs(
        "doctor", "--harness", "echo", "--cwd", str(tmp_path), "--settings", json.dumps(settings)
    )
    assert bad.returncode == 1
    assert "exposes no tool 'probe'" in bad.stdout
    assert "fix: echo / MCP server t:" in bad.stdout


def test_doctor_names_an_unknown_kind():
    result = jigs("doctor", "--harness", "nosuchkind")
    assert result.returncode == 1
    assert "pip install jigs-harness-nosuchkind" in result.stdout


def test_run_prints_the_answer_and_resumes_by_session_id(tmp_path):
    first = jigs("run", "--harness", "echo", "--cwd", str(tmp_path), "--run-id", "cli-run", "one")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "echo: one (turn 1)"
    session = first.stderr.split("session: ")[1].split()[0]
    second = jigs(
        "run",
        "--harness",
        "echo",
        "--cwd",
        str(tmp_path),
        "--run-id",
        "cli-run",
        "--resume",
        session,
        "two",
    )
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "echo: two (turn 2)"


def test_run_with_a_stale_session_fails_cleanly(tmp_path):
    result = jigs("run", "--harness", "echo", "--cwd", str(tmp_path), "--resume", "gone", "x")
    assert result.returncode == 1
    assert result.stderr.startswith("jigs: AgentSessionError: echo session gone is missing")
    assert "Traceback" not in result.stderr


def test_bad_settings_json_is_a_clear_error(tmp_path):
    result = jigs("run", "--harness", "echo", "--cwd", str(tmp_path), "--settings", "{nope", "x")
    assert result.returncode == 2  # a usage error (docs/cli.md)
    assert "--settings is not valid JSON" in result.stderr
    assert "Traceback" not in result.stderr


def test_disabled_kinds_are_left_out_of_doctor(tmp_path):
    env = os.environ | {"JIGS_DISABLE_PLUGINS": "claude,codex,pi"}
    result = subprocess.run(
        [sys.executable, "-m", "jigs.cli", "doctor"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout
    assert "claude" not in result.stdout
