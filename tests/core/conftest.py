import tempfile
from pathlib import Path

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The core runs on both anyio backends."""
    return str(request.param)


@pytest.fixture
def scratch_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME for the real CLIs: no config dir of the host's is named, and Claude Code,
    run as root here, needs IS_SANDBOX."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.setenv("IS_SANDBOX", "1")
    return home


@pytest.fixture
def scratch_tmp(scratch_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """:func:`scratch_home` and a private TMPDIR (the kinds' private dirs land there)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp
