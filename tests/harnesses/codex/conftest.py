"""Fixtures for the codex kind: the real CLI against ``jigs_testing.ModelServer``.

Every test that opens a runner gets: the model server (also the refusing HTTPS proxy), a key
variable the descriptor names, and a descriptor pointing at the server with retries off.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from codex_helpers import KEY_ENV, KEY_VALUE
from jigs_testing import ModelServer


@pytest.fixture
def codex_cli(require_cli: Callable[[str], Path]) -> Path:
    return require_cli("codex")


@pytest.fixture
async def model_server(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[ModelServer]:
    async with ModelServer() as server:
        monkeypatch.setenv(KEY_ENV, KEY_VALUE)
        # any outside connection goes through the refusing proxy and is recorded
        monkeypatch.setenv("HTTPS_PROXY", server.proxy_url)
        monkeypatch.setenv("HTTP_PROXY", server.proxy_url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        for name in ("https_proxy", "http_proxy", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        yield server


@pytest.fixture
def descriptor(model_server: ModelServer, codex_cli: Path) -> Callable[..., Any]:
    """``descriptor(**overrides)`` -> a codex descriptor aimed at the model server."""
    from jigs import harnesses

    def build(**overrides: Any) -> Any:
        settings: dict[str, Any] = {
            "model": "fake-model",
            "base_url": model_server.openai_base_url,
            "api_key_env": KEY_ENV,
            "max_retries": 0,
            "startup_timeout": 30,
            "idle_timeout": 30,
        }
        settings.update(overrides)
        return harnesses.codex(**settings)

    return build
