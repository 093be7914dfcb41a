"""Fixtures for the claude kind: the real CLI against ``jigs_testing.ModelServer``.

Every test gets a private ``HOME`` (so transcripts and Claude Code's own files never touch the
operator's), ``IS_SANDBOX=1`` in the parent (passed to the agent through ``agents_env``, since
the tests may run as root), and a dummy key in ``JIGS_TEST_ANTHROPIC_KEY`` that the descriptor
names.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from claude_helpers import KEY_ENV
from jigs_testing import ModelServer


@pytest.fixture
def claude_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("IS_SANDBOX", "1")
    monkeypatch.setenv(KEY_ENV, "sk-test")
    return home


@pytest.fixture
def claude_cli(require_cli: Callable[[str], Path], claude_home: Path) -> Path:
    return require_cli("claude")


@pytest.fixture
async def server(anyio_backend: object) -> AsyncIterator[ModelServer]:
    async with ModelServer() as running:
        yield running
