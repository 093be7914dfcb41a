"""Shared fixtures. Every test gets its own jigs data dir, so locks and session stores never
leak between tests. Tests that drive a real CLI call ``require_cli``: in CI (``CI`` set) a
missing CLI fails the test; elsewhere it skips with the fix."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from jigs import RunMetadata

# The jigs-testing pytest plugin is opt-in (no pytest11 entry point): the ``model_server`` fixture
# and the conformance helpers.
pytest_plugins = ["jigs_testing.pytest_plugin"]

# The echo kind (tests/plugins/echo) is a test kind: jigs' listings (jigs harnesses, doctor, demo,
# --version) show it only with this set; processes the tests start inherit it.
os.environ["JIGS_SHOW_TEST_KINDS"] = "1"

# Installed CLIs (`jigs install pi`) live in the real data dir; every test gets its own data dir
# below, so pin the CLI dir to the real one first.
if "JIGS_CLI_DIR" not in os.environ:
    from jigs.policy._paths import data_dir

    os.environ["JIGS_CLI_DIR"] = str(data_dir() / "clis")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def jigs_data_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    path = tmp_path_factory.mktemp("jigs-data")
    monkeypatch.setenv("JIGS_DATA_DIR", str(path))
    return path


@pytest.fixture
def run_meta() -> RunMetadata:
    return RunMetadata(workflow_run_id=f"run-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    """A fresh git repository to run agents in."""
    path = tmp_path / "worktree"
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "README.md").write_text("scratch repo\n")
    return path


@pytest.fixture
def require_cli() -> Iterator[Callable[[str], Path]]:
    """``require_cli(kind)`` -> the resolved CLI path of an installed kind."""

    def require(kind: str) -> Path:
        from jigs.env import build_env
        from jigs.errors import CliNotFoundError
        from jigs.registry._registry import default_registry

        harness = default_registry().get(kind)
        resolve = getattr(harness, "resolve_executable", None)
        assert resolve is not None, f"the {kind} harness has no resolve_executable"
        try:
            return Path(resolve(build_env([])).path)
        except CliNotFoundError as exc:
            if os.environ.get("CI"):
                pytest.fail(f"CI must have the {kind} CLI: {exc}")
            pytest.skip(f"the {kind} CLI is not installed: {exc}")

    return require


@pytest.fixture
def record_file(worktree: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the test MCP server's ``record`` tool writes; its variable is set for the step.
    In the worktree: the CLI starts the server in the step's sandbox, where nothing else of
    the machine is writable."""
    from mcp_configs import RECORD_ENV

    path = worktree / ".mcp-record.jsonl"
    monkeypatch.setenv(RECORD_ENV, str(path))
    return path
