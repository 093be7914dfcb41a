"""Fixtures for the pi kind: the real Pi (found the way users install it), a fake Pi for fault
injection, and a descriptor pointing at a :class:`jigs.testing.ModelServer`.

The root conftest gives every test its own ``JIGS_DATA_DIR``, where no Pi is installed; ``pi_cli``
looks for the Pi that ``jigs install pi`` put in the host's data dir (or ``$JIGS_PI_EXECUTABLE``,
or ``pi`` on PATH) and pins it with ``$JIGS_PI_EXECUTABLE`` for the test.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from jigs.errors import CliNotFoundError

HOST_DATA_DIR = os.environ.get("JIGS_DATA_DIR")
KEY_ENV = "JIGS_TEST_OPENAI_KEY"
KEY_VALUE = "sk-test-pi-key-4f1c9b7e2d"
FAKE_PI = Path(__file__).with_name("fake_pi.py")


@pytest.fixture
def pi_cli(
    require_cli: Callable[[str], Path], jigs_data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """The real Pi CLI, pinned through ``$JIGS_PI_EXECUTABLE`` (skips locally when missing,
    fails in CI)."""
    from jigs_harness_pi import resolve_pi

    if not os.environ.get("JIGS_PI_EXECUTABLE"):
        with monkeypatch.context() as m:
            if HOST_DATA_DIR:
                m.setenv("JIGS_DATA_DIR", HOST_DATA_DIR)
            else:
                m.delenv("JIGS_DATA_DIR", raising=False)
            try:
                found = resolve_pi({"PATH": os.environ.get("PATH", "")})
            except CliNotFoundError:
                found = None
        if found is not None:
            monkeypatch.setenv("JIGS_PI_EXECUTABLE", str(found.path))
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
