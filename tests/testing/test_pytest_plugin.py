"""The jigs-testing pytest plugin is opt-in: nothing is loaded into a pytest run that did not ask."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import distribution, entry_points
from pathlib import Path

USES_FIXTURE = """
import pytest

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_uses_model_server(model_server):
    from jigs_testing import text

    model_server.add(text("hi"))
    assert model_server.anthropic_base_url.startswith("http://127.0.0.1:")
"""


def _pytest(root: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(root)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_no_distribution_registers_a_pytest11_entry_point():
    ours = [
        ep for ep in entry_points(group="pytest11") if ep.value.startswith(("jigs", "jigs_testing"))
    ]
    assert not ours, f"a jigs distribution auto-loads into every pytest run: {ours}"
    assert not [ep for ep in distribution("jigs-testing").entry_points if ep.group == "pytest11"]
    assert not [ep for ep in distribution("jigs-core").entry_points if ep.group == "pytest11"]


def test_the_fixture_exists_only_after_opting_in(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_one.py").write_text(USES_FIXTURE)
    without = _pytest(tmp_path)
    assert without.returncode != 0, without.stdout
    assert "fixture 'model_server' not found" in without.stdout, without.stdout[-2000:]

    (tmp_path / "conftest.py").write_text('pytest_plugins = ["jigs_testing.pytest_plugin"]\n')
    opted = _pytest(tmp_path)
    assert opted.returncode == 0, opted.stdout[-2000:] + opted.stderr[-2000:]
    assert "1 passed" in opted.stdout
