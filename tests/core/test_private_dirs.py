"""A step's private temp dirs name their worker (``.jigs-owner``); those a SIGKILLed worker left
are swept at a later step's start and by ``jigs runs prune``; a live worker's never are."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from functools import partial
from pathlib import Path

import anyio
import pytest
from jigs import harnesses
from jigs.sandbox import _private_dirs
from jigs.steps import run_agent

WORKER = textwrap.dedent(
    """
    import sys, anyio
    from jigs import RunMetadata, harnesses
    from jigs.steps import create_agent_runner

    async def main():
        run = RunMetadata(workflow_run_id=sys.argv[2])
        async with create_agent_runner(harnesses.echo(), cwd=sys.argv[1], run=run):
            print("open", flush=True)
            await anyio.sleep(600)

    anyio.run(main)
    """
)


def _start_worker(tmp: Path, tree: Path, run_id: str) -> tuple[subprocess.Popen[str], Path]:
    """A worker holding an echo runner open (its private dir made); returns it and that dir."""
    tree.mkdir()
    before = set(tmp.glob("jigs-echo-*"))
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(tree), run_id],
        env={**os.environ, "TMPDIR": str(tmp)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    assert worker.stdout.readline() == "open\n"
    made = set(tmp.glob("jigs-echo-*")) - before
    assert len(made) == 1, made
    return worker, made.pop()


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=120)


def _kill(worker: subprocess.Popen[str]) -> None:
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=30)
    if worker.stdout is not None:
        worker.stdout.close()


@pytest.mark.skipif(not Path("/proc/self/ns/pid").exists(), reason="the sweep reads /proc")
def test_a_killed_workers_private_dir_is_swept_and_a_live_ones_is_kept(
    tmp_path, monkeypatch, run_meta
):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    dead, dead_dir = _start_worker(tmp, tmp_path / "dead-tree", "dead-run")
    live, live_dir = _start_worker(tmp, tmp_path / "live-tree", "live-run")
    try:
        record = (dead_dir / _private_dirs.MARKER).read_text().split()
        assert int(record[0]) == dead.pid
        _kill(dead)
        assert dead_dir.is_dir()  # nothing could remove it when the worker died

        # the next step's start sweeps it (the step's own dir is made and removed as usual)
        monkeypatch.setattr(tempfile, "tempdir", str(tmp))
        monkeypatch.setattr(_private_dirs, "_last", [])
        tree = tmp_path / "tree"
        tree.mkdir()
        result = anyio.run(
            partial(run_agent, harness=harnesses.echo(), cwd=tree, prompt="hi", run=run_meta)
        )
        assert result.text
        assert not dead_dir.exists()
        assert live_dir.is_dir()  # its worker is alive
        assert (live_dir / _private_dirs.MARKER).is_file()

        # jigs runs prune sweeps too, once the worker is gone; a dir without a marker stays
        foreign = tmp / "jigs-claude-notmine"
        foreign.mkdir()
        env = {**os.environ, "TMPDIR": str(tmp)}
        prune = [sys.executable, "-m", "jigs.cli", "runs", "prune", "--older-than", "999w"]
        kept = _run([*prune, "--json"], env)
        assert kept.returncode == 0, kept.stderr
        assert json.loads(kept.stdout)["stale_private_dirs"] == []
        _kill(live)
        dry = _run([*prune, "--dry-run"], env)
        assert f"would remove {live_dir}: a private dir its killed worker left" in dry.stdout
        assert live_dir.is_dir()
        done = _run([*prune, "--json"], env)
        assert json.loads(done.stdout)["stale_private_dirs"] == [str(live_dir)]
        assert not live_dir.exists()
        assert foreign.is_dir()
    finally:
        for worker in (dead, live):
            if worker.poll() is None:
                _kill(worker)


def test_a_reused_pid_is_not_the_owner(tmp_path):
    """A marker whose pid now belongs to another process (another start time) is stale; one
    from another PID namespace is left alone (its pid means nothing here)."""
    reused = tmp_path / "jigs-x-reused"
    other_ns = tmp_path / "jigs-x-elsewhere"
    mine = tmp_path / "jigs-x-mine"
    for path in (reused, other_ns, mine):
        path.mkdir()
    namespace = os.readlink("/proc/self/ns/pid")
    (reused / _private_dirs.MARKER).write_text(f"{os.getpid()} 1 {namespace}\n")
    (other_ns / _private_dirs.MARKER).write_text("1 1 pid:[1]\n")
    made = _private_dirs.make_owned_dir("jigs-x-")
    try:
        assert _private_dirs.stale_dirs(tmp_path) == [reused]
        assert made.is_dir()
    finally:
        _private_dirs.remove_tree(made)
