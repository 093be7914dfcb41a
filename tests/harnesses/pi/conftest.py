"""Fixtures for the pi kind: the real Pi (found the way users install it), a fake Pi for fault
injection, and a descriptor pointing at a :class:`jigs_testing.ModelServer`.

The root conftest keeps ``JIGS_CLI_DIR`` on the real CLI dir, so ``pi_cli`` finds the Pi that
``jigs install pi`` installed the way users' steps do.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

KEY_ENV = "JIGS_TEST_OPENAI_KEY"
KEY_VALUE = "sk-test-pi-key-4f1c9b7e2d"
FAKE_PI = Path(__file__).with_name("fake_pi.py")


@pytest.fixture
def pi_cli(require_cli: Callable[[str], Path]) -> Path:
    """The real Pi CLI (skips locally when missing, fails in CI)."""
    return require_cli("pi")


@pytest.fixture
def fake_pi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small Python stand-in for Pi; the prompt's first word picks the fault."""
    script = tmp_path / "fake-pi"
    script.write_text(f"#!{sys.executable}\n" + FAKE_PI.read_text())
    script.chmod(0o755)
    monkeypatch.setenv("JIGS_PI_EXECUTABLE", str(script))
    return script


@pytest.fixture
def model_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """Sets the model key variable the descriptors name; returns its value."""
    monkeypatch.setenv(KEY_ENV, KEY_VALUE)
    return KEY_VALUE


def make_descriptor(base_url: str, **settings: object) -> dict[str, object]:
    """Descriptor data for Pi against a local OpenAI-compatible server."""
    source: dict[str, object] = {
        "type": "openai-compatible",
        "name": "local",
        "base_url": base_url,
        "model": "fake-model",
        "api_key_env": KEY_ENV,
    }
    return {"kind": "pi", "model": source, **settings}


@pytest.fixture
def pi_descriptor() -> Callable[..., dict[str, object]]:
    """``pi_descriptor(base_url, **settings)`` -> descriptor data for a local server."""
    return make_descriptor
