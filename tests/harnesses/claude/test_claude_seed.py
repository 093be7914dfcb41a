"""The seed ``.claude.json`` a sandboxed Claude step starts from (jigs_harness_claude._seed):
made once per binary by the binary itself, with no model and no network, checked on every read,
and never a way for one step's writes to reach another (the kit's ``home_per_step`` check,
tests/harnesses/test_containment_kinds.py, attacks that with the real CLI)."""

import json
import time

import pytest
from jigs_harness_claude import _seed, resolve_executable

pytestmark = pytest.mark.anyio


class _Log:
    def __init__(self):
        self.events = []

    def info(self, event, **fields):
        self.events.append(event)

    warning = info


@pytest.fixture
def seeds_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("JIGS_CLI_DIR", str(tmp_path / "clis"))
    _seed._FAILED.clear()
    yield tmp_path / "clis" / "claude" / "home-seeds"
    _seed._FAILED.clear()


def _real_claude(require_cli, monkeypatch):
    require_cli("claude")
    return resolve_executable(dict(__import__("os").environ)).path


async def test_the_seed_is_what_the_real_cli_writes_at_its_first_start(require_cli, monkeypatch):
    exe = _real_claude(require_cli, monkeypatch)
    data = json.loads(await _seed.build_seed(exe, {"IS_SANDBOX": "1"}))
    assert isinstance(data, dict)
    assert data
    assert not {"projects", "mcpServers"} & data.keys()


async def test_the_seed_is_made_once_and_a_damaged_one_again(require_cli, monkeypatch, seeds_dir):
    exe = _real_claude(require_cli, monkeypatch)
    log = _Log()
    first = await _seed.ensure_seed(exe, {"IS_SANDBOX": "1"}, log)
    assert first is not None
    assert log.events == ["claude.home_seed.built"]
    assert _seed.seed_path(exe).parent == seeds_dir
    built = _seed.build_seed

    async def no_second_build(*args):
        raise AssertionError("built again")

    monkeypatch.setattr(_seed, "build_seed", no_second_build)
    assert await _seed.ensure_seed(exe, {}, log) == first
    assert log.events == ["claude.home_seed.built"]
    _seed.seed_path(exe).write_text('{"firstStartTime": "x"} and garbage')
    monkeypatch.setattr(_seed, "build_seed", built)
    again = await _seed.ensure_seed(exe, {"IS_SANDBOX": "1"}, log)
    assert again is not None
    assert log.events == ["claude.home_seed.built"] * 2
    assert json.loads(_seed.seed_path(exe).read_bytes()) == json.loads(again)


@pytest.mark.parametrize(
    "script",
    [
        "exit 1",  # writes nothing
        "echo not json; exec sleep 60",  # not Claude Code: given up at its first line
        "exec sleep 60",  # says nothing: given up after the first line's bound, not the build's
    ],
)
async def test_a_seed_that_cannot_be_made_is_done_without_and_not_tried_again(
    script, tmp_path, seeds_dir
):
    not_claude = tmp_path / "claude"
    not_claude.write_text(f"#!/bin/sh\n{script}\n")
    not_claude.chmod(0o755)
    log = _Log()
    started = time.monotonic()
    assert await _seed.ensure_seed(not_claude, {}, log, timeout=60) is None
    assert time.monotonic() - started < _seed._FIRST_LINE + 5
    assert log.events == ["claude.home_seed.unavailable"]
    assert await _seed.ensure_seed(not_claude, {}, log) is None
    assert log.events == ["claude.home_seed.unavailable"]  # not tried (nor logged) again
    assert not seeds_dir.exists() or not list(seeds_dir.iterdir())


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"[1, 2]", "not a non-empty JSON object"),
        (b"{}", "not a non-empty JSON object"),
        (b"{" + b" " * (300 * 1024) + b"}", "bytes"),
    ],
)
def test_only_a_json_object_of_bounded_size_is_a_seed(raw, problem):
    with pytest.raises(ValueError, match=problem):
        _seed._checked(raw)


def test_keys_that_configure_a_step_never_reach_the_seed():
    raw = json.dumps(
        {"migrationVersion": 15, "projects": {"/x": {}}, "mcpServers": {"evil": {}}}
    ).encode()
    assert json.loads(_seed._checked(raw)) == {"migrationVersion": 15}


async def test_a_sandboxed_step_starts_from_a_copy_of_the_seed(
    require_cli, worktree, run_meta, monkeypatch
):
    # the real CLI, scripted to show its ~/.claude.json: a link into the step's private dir
    # (never the seed itself) whose state is the seed's, so the CLI did not start afresh
    import os

    from jigs.steps import run_agent
    from jigs_harness_claude import ClaudeHarness
    from jigs_testing import ModelServer

    require_cli("claude")
    async with ModelServer() as server:
        plan = ClaudeHarness().demo_plan(server)
        command = 'readlink "$HOME/.claude.json" > seen.txt; cat "$HOME/.claude.json" >> seen.txt'
        prompt = plan.run_command(server, command)
        for name, value in plan.host_env.items():
            monkeypatch.setenv(name, value)
        await run_agent(
            harness=plan.descriptor,
            cwd=worktree,
            prompt=prompt,
            run=run_meta,
            agents_env=list(plan.agents_env),
        )
    link, _, content = (worktree / "seen.txt").read_text().partition("\n")
    assert link.endswith("/claude.json")
    assert "home-seeds" not in link
    seed = json.loads(_seed.seed_path(resolve_executable(dict(os.environ)).path).read_bytes())
    assert seed.get("firstStartTime")
    assert json.loads(content).get("firstStartTime") == seed["firstStartTime"]
