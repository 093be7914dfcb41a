"""A SIGKILLed Python process takes the CLIs it launched with it (asyncio, Linux)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = """
import anyio, sys
from pathlib import Path
from jigs.processes import launch

async def main():
    proc = await launch(["sleep", "60"], cwd=Path.cwd(), env={"PATH": "/usr/bin:/bin"}, owner="t")
    print(proc.pgid, flush=True)
    await anyio.sleep(60)

anyio.run(main, backend=sys.argv[1])
"""


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in {"Z", "X"}


@pytest.mark.skipif(sys.platform != "linux", reason="parent-death signals are Linux only")
def test_sigkilled_worker_takes_its_cli_with_it(tmp_path: Path) -> None:
    worker = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, "asyncio"], stdout=subprocess.PIPE, cwd=tmp_path,
        start_new_session=True,
    )  # fmt: skip
    child = 0
    try:
        assert worker.stdout is not None
        child = int(worker.stdout.readline())
        assert _alive(child)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)
        deadline = time.monotonic() + 2
        while _alive(child):
            assert time.monotonic() < deadline, "the CLI outlived its SIGKILLed parent"
            time.sleep(0.02)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)
        if child and _alive(child):  # the failure case: do not leave the orphan behind
            os.kill(child, signal.SIGKILL)
        worker.stdout.close()  # type: ignore[union-attr]
