"""The quicker exit (jigs._exit): a process that ran a step freezes the cyclic GC at exit, after
the application's own later atexit handlers ran; JIGS_FAST_EXIT=0 and a process that ran no step
keep CPython's full collection."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# registered before jigs is imported, so it runs after jigs' hook (atexit is last in, first out)
SCRIPT = textwrap.dedent(
    """
    import atexit, gc, sys

    def report():
        print(f"frozen={gc.get_freeze_count() > 0}", flush=True)

    atexit.register(report)

    import anyio
    from jigs import RunMetadata, harnesses
    from jigs.models import generate_text
    from jigs.steps import create_agent_runner

    class Cycle:
        def __del__(self):
            print("cycle finalized", flush=True)

    async def main():
        if sys.argv[2] == "step":
            async with create_agent_runner(
                harnesses.echo(), cwd=sys.argv[1], run=RunMetadata(workflow_run_id="exit")
            ) as runner:
                print((await generate_text(runner.model, prompt="hi")).text, flush=True)

    anyio.run(main)

    def later():  # registered after the step: runs before jigs' hook, with the GC intact
        c = Cycle()
        c.me = c
        del c
        gc.collect()
        print(f"later ran, frozen={gc.get_freeze_count() > 0}", flush=True)

    atexit.register(later)
    """
)


def _run(worktree: Path, what: str, **env: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(worktree), what],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


@pytest.mark.usefixtures("jigs_data_dir")
def test_a_process_that_ran_a_step_freezes_the_gc_after_later_atexit_handlers(worktree):
    lines = _run(worktree, "step")
    assert lines[0].startswith("echo: hi")
    # the application's later handler ran first, with a working collector
    assert lines[1:] == ["cycle finalized", "later ran, frozen=False", "frozen=True"]


@pytest.mark.usefixtures("jigs_data_dir")
def test_jigs_fast_exit_0_keeps_the_full_collection(worktree):
    assert _run(worktree, "step", JIGS_FAST_EXIT="0")[-1] == "frozen=False"


@pytest.mark.usefixtures("jigs_data_dir")
def test_importing_jigs_without_a_step_changes_nothing(worktree):
    assert _run(worktree, "none") == ["cycle finalized", "later ran, frozen=False", "frozen=False"]
