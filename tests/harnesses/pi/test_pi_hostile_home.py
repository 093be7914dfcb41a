"""The real Pi CLI with a hostile HOME: a ``~/.bashrc`` (and profiles) that export a canary and
sleep 60 s are never read by the agent's shell (jigs' ``shellPath`` runs bash with
``--noprofile --norc`` and without ``BASH_ENV``), so they change nothing and cost no time.

Pi 1.6's own ``bash -c`` does not source ``~/.bashrc`` (its stdin is not a socket), but it does
read ``$BASH_ENV``: the test passes one through ``agents_env`` so it fails without the script."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jigs import RunMetadata
from jigs.steps import run_agent
from jigs_testing import ModelServer, text, tool_call

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("pi_cli", "model_key")]


async def test_a_hostile_bashrc_changes_nothing_and_costs_no_time(
    pi_descriptor: Callable[..., dict[str, Any]],
    worktree: Path,
    run_meta: RunMetadata,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    markers = tmp_path / "rc-markers"
    markers.mkdir()
    for rc in (".bashrc", ".bash_profile", ".profile", ".bash_login"):
        (home / rc).write_text(f"export BASHRC_CANARY=from-{rc}\ntouch {markers / rc}\nsleep 60\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("BASH_ENV", str(home / ".bashrc"))
    script = [tool_call("bash", {"command": "env; echo END"}), text("done")]
    started = time.monotonic()
    async with ModelServer(script) as server:
        result = await run_agent(
            harness=pi_descriptor(server.openai_base_url),
            cwd=worktree,
            prompt="env",
            run=run_meta,
            agents_env=["BASH_ENV"],
        )
        seen = server.model_requests[1].text()
    seconds = time.monotonic() - started
    assert result.text == "done"
    assert "END" in seen  # the command ran and its output reached the model
    assert "BASHRC_CANARY" not in seen
    assert sorted(p.name for p in markers.iterdir()) == [], "an rc or profile file was read"
    assert seconds < 30, f"a turn took {seconds:.1f}s with a sleeping ~/.bashrc"
