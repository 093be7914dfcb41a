"""``jigs install`` builds what a fresh worker's first step would otherwise build (issue 35):
each kind's :meth:`~jigs.plugin.Harness.warm`, with the real CLIs, in a data dir of its own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import structlog
from jigs.env import build_env
from jigs_harness_pi import PiHarness

pytestmark = [pytest.mark.real_cli("claude"), pytest.mark.real_cli("codex")]


def _install(env: dict[str, str], *kinds: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "jigs.cli", "install", *kinds],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.splitlines()


def test_jigs_install_makes_the_claude_and_codex_home_seeds(
    tmp_path: Path, require_cli: Callable[[str], Path]
) -> None:
    require_cli("claude")
    require_cli("codex")
    clis = tmp_path / "clis"  # a fresh container: nothing built yet
    env = {**os.environ, "JIGS_CLI_DIR": str(clis), "HOME": str(tmp_path / "home")}
    first = _install(env, "claude", "codex")
    seeds = {}
    for kind in ("claude", "codex"):
        line = next(line for line in first if line.startswith(f"{kind}: home seed"))
        match = re.fullmatch(rf"{kind}: home seed in place at (\S+) \(\d+\.\ds\)", line)
        assert match, first
        seeds[kind] = Path(match.group(1))
        assert seeds[kind].is_relative_to(clis / kind / "home-seeds")
    assert seeds["claude"].stat().st_size > 0
    assert any(seeds["codex"].glob("state_*.sqlite"))  # what Codex made on its first start
    # a second install finds them and builds nothing anew
    mtimes = {kind: path.stat().st_mtime_ns for kind, path in seeds.items()}
    again = _install(env, "claude", "codex")
    for kind, path in seeds.items():
        assert f"{kind}: home seed in place at {path} " in "\n".join(again) + " "
        assert path.stat().st_mtime_ns == mtimes[kind]


@pytest.mark.real_cli("pi")
@pytest.mark.anyio
async def test_pi_warm_makes_the_compile_cache(
    tmp_path: Path, require_cli: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    pi = require_cli("pi")
    monkeypatch.setenv("JIGS_PI_EXECUTABLE", str(pi))
    monkeypatch.setenv("JIGS_CLI_DIR", str(tmp_path / "clis"))
    said = await PiHarness().warm(build_env([]), structlog.get_logger())
    assert said is not None
    match = re.fullmatch(r"compile cache in place at (\S+)", said)
    assert match, said
    cache = Path(match.group(1))
    assert cache.is_relative_to(tmp_path)
    assert any(path.is_file() for path in cache.rglob("*"))
