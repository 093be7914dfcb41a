"""One side of ``bench_load.py``: a long-lived process that runs rounds of steps on command.

    python _load_worker.py jigs|raw SPEC.json

``bench_load.py`` starts one per side inside a cgroup of its own (:mod:`_cgroup`), so the CPU
of the side (this process, every CLI, every process a CLI's namespace holds) is one counter.
Each stdin line ``ROUND N WAVES TAG CAPTURE`` runs ``WAVES`` waves of ``N`` concurrent steps
one after another and answers one JSON line: the round's wall seconds, this process's own CPU
seconds and, with ``CAPTURE`` 1 (jigs only), each step's structlog events as ``[seconds since
the round started, event, seconds field or null]``. The raw side starts the CLI from plain
asyncio, the jigs side runs ``run_agent`` in this process, both on the spec's worktrees, as a
worker would.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import structlog


class Capture:
    """jigs' events per step (keyed by the step's run id) while ``on``; off, the application
    has not configured structlog, as in a worker that never looks at jigs' events."""

    def __init__(self) -> None:
        self.on = False
        self.started = 0.0
        self.steps: dict[str, list[tuple[float, str, float | None]]] = {}

    def processor(self, logger: Any, method: str, event_dict: Any) -> Any:
        now = time.perf_counter() - self.started
        run_id = str(event_dict.get("run_id", "?"))
        seconds = event_dict.get("seconds", event_dict.get("total_seconds"))
        self.steps.setdefault(run_id, []).append((now, str(event_dict.get("event")), seconds))
        raise structlog.DropEvent


class Worker:
    def __init__(self, side: str, spec: dict[str, Any]) -> None:
        self.side = side
        self.spec = spec
        self.capture = Capture()

    async def raw_step(self, tree: str, run_id: str) -> None:
        proc = await asyncio.create_subprocess_exec(
            *self.spec["raw_argv"],
            cwd=tree,
            env=self.spec["raw_env"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = await proc.communicate()
        if proc.returncode != 0 or not all(m.encode() in out for m in self.spec["raw_expect"]):
            raise SystemExit(f"raw step failed (exit {proc.returncode}): {err[-1500:]!r}")

    async def jigs_step(self, tree: str, run_id: str) -> None:
        from jigs import RunMetadata, harnesses
        from jigs.steps import run_agent

        result = await run_agent(
            harness=getattr(harnesses, self.spec["kind"])(**self.spec["settings"]),
            cwd=tree,
            prompt=self.spec["prompt"],
            run=RunMetadata(workflow_run_id=run_id),
            agents_env=self.spec["agents_env"],
        )
        if result.text != self.spec["jigs_expect"]:
            raise SystemExit(f"jigs step answered {result.text!r}")

    async def round(self, n: int, waves: int, tag: str, capture: bool) -> dict[str, Any]:
        step = self.jigs_step if self.side == "jigs" else self.raw_step
        trees = self.spec["trees"]
        if capture:
            structlog.configure(processors=[self.capture.processor])
            self.capture.steps = {}
        started, cpu = time.perf_counter(), time.process_time()
        self.capture.started = started
        for wave in range(waves):
            await asyncio.gather(*(step(trees[i], f"{tag}-{wave}-{i}") for i in range(n)))
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        if capture:
            structlog.reset_defaults()
        return {"wall": wall, "own_cpu": cpu, "steps": self.capture.steps if capture else {}}

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            _, n, waves, tag, capture = line.split()
            answer = await self.round(int(n), int(waves), tag, capture == "1")
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()


def main() -> None:
    side, spec = sys.argv[1], json.loads(Path(sys.argv[2]).read_text())
    asyncio.run(Worker(side, spec).serve())


if __name__ == "__main__":
    main()
