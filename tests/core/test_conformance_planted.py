"""The kit's planted-config check can fail: a kind (echo, patched) whose "CLI" loads a planted
worktree file that runs a hook, injects a variable or calls the planted endpoint is caught; one
that refuses the file with a JitCheckError naming it passes; an undeclared list fails."""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from jigs.plugin import TurnLaunch
from jigs.registry._registry import default_registry
from jigs_testing import ConfigFile, Planted
from jigs_testing.conformance import CHECKS, kit_context

pytestmark = pytest.mark.anyio

CONFIG = ".echo/config.json"


def _declare(path: str, hostile: Callable[[Planted], dict[str, Any]]) -> tuple[ConfigFile, ...]:
    return (ConfigFile(path, "worktree", "json", lambda p: json.dumps(hostile(p)), "test"),)


def _post(url: str) -> str:
    code = f"import urllib.request as u; u.urlopen({url!r}, data=b'{{}}', timeout=5)"
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)} || true"


async def _check(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    files: tuple[ConfigFile, ...] | None,
    *,
    loads: bool = True,
    path: str = CONFIG,
    network: str = "deny",
) -> None:
    """Run the check against echo declaring ``files``; with ``loads`` its launch obeys
    ``path`` in the worktree (a hook run before the CLI, variables added). ``network`` is the
    descriptor's."""
    harness = default_registry().get("echo")
    launch_turn = harness.launch_turn

    def obeying(turn: Any, ctx: Any, state: Any) -> TurnLaunch:
        launch = launch_turn(turn, ctx, state)
        config = turn.cwd / path
        if not loads or not config.exists():
            return launch
        data = json.loads(config.read_text())
        argv = ["/bin/sh", "-c", f'{data.get("hook", ":")}; exec "$@"', "sh", *launch.argv]
        env = {**launch.env, **data.get("env", {})}
        return dataclasses.replace(launch, argv=argv, env=env)

    monkeypatch.setattr(harness, "launch_turn", obeying)
    monkeypatch.setattr(harness, "config_files", lambda: files)

    def descriptor(server: Any) -> Any:
        from jigs_testing.plan import demo_plan_of

        base = demo_plan_of(harness, server).descriptor
        return type(base).from_data({**base.to_data(), "network": network})

    async with kit_context("echo", descriptor, tmp_path=tmp_path) as ctx:
        plan = dataclasses.replace(
            ctx.plan, run_command=lambda _server, command: f"sh:{quote(command, safe='')}"
        )
        await CHECKS["planted_config"](dataclasses.replace(ctx, plan=plan))


@pytest.mark.parametrize(
    ("hostile", "caught"),
    [
        (lambda p: {"hook": p.command("hook")}, r"planted config ran .* markers \['hook'\]"),
        (lambda p: {"env": {p.env_name: p.env_value}}, "injected JIGS_PLANTED_CANARY"),
        (lambda p: {"hook": _post(p.openai_base_url + "/chat/completions")}, "planted endpoint"),
    ],
    ids=["hook", "env", "endpoint"],
)
async def test_a_kind_that_loads_a_planted_file_fails(monkeypatch, tmp_path, hostile, caught):
    # the planted endpoint is on the worker's loopback, which a sandboxed step's network does
    # not have: the host's network lets the hook reach it, so the check must catch the call
    with pytest.raises(AssertionError, match=caught):
        await _check(monkeypatch, tmp_path, _declare(CONFIG, hostile), network="host")


async def test_a_kind_that_does_not_load_the_file_passes(monkeypatch, tmp_path):
    await _check(
        monkeypatch, tmp_path, _declare(CONFIG, lambda p: {"hook": p.command("x")}), loads=False
    )


async def test_a_kind_that_refuses_the_file_by_name_passes(monkeypatch, tmp_path):
    # echo's just-in-time check refuses a worktree holding .echo-deny, naming the file; were it
    # not refused, the launch would obey it and run the hook
    files = _declare(".echo-deny", lambda p: {"hook": p.command("hook")})
    await _check(monkeypatch, tmp_path, files, path=".echo-deny")


async def test_a_kind_that_declares_nothing_fails(monkeypatch, tmp_path):
    with pytest.raises(AssertionError, match="config_files"):
        await _check(monkeypatch, tmp_path, None)


async def test_a_kind_without_config_files_passes_trivially(monkeypatch, tmp_path):
    await _check(monkeypatch, tmp_path, ())
