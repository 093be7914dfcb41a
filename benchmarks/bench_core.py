"""The core's own costs, as ratios against a bare ``python -c pass`` measured in the same run.

    uv run python benchmarks/bench_core.py [--runs N]

Prints: ``import jigs``, ``import jigs.steps`` (what a step imports), resolving one kind through
its entry point, and one ``create_agent_runner`` + ``close`` round trip with the echo test kind
(the pipeline's own cost: env, checks, lock, open, close; no model call).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import anyio


def timed_python(code: str, runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


async def round_trips(runs: int) -> float:
    from jigs import RunMetadata, harnesses
    from jigs.steps import create_agent_runner

    descriptor = harnesses.echo()
    samples = []
    with tempfile.TemporaryDirectory() as tree:
        for i in range(runs):
            started = time.perf_counter()
            runner = await create_agent_runner(
                descriptor, cwd=tree, run=RunMetadata(workflow_run_id=f"bench-{i}")
            )
            await runner.close()
            samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    os.environ.setdefault("JIGS_DATA_DIR", tempfile.mkdtemp(prefix="jigs-bench-"))
    base = timed_python("pass", args.runs)
    rows = [
        ("import jigs", timed_python("import jigs", args.runs)),
        (
            "import jigs.steps, jigs.models",
            timed_python("import jigs.steps, jigs.models", args.runs),
        ),
        (
            "resolve one kind (harnesses.echo())",
            timed_python("from jigs import harnesses; harnesses.echo()", args.runs),
        ),
    ]
    trip = anyio.run(round_trips, args.runs)
    print(f"baseline python -c pass: {base * 1000:.1f} ms (median of {args.runs})")
    for label, seconds in rows:
        print(
            f"{label:<40} {seconds * 1000:7.1f} ms  ratio {seconds / base:5.2f}x  "
            f"(+{(seconds - base) * 1000:.1f} ms)"
        )
    print(
        f"{'create_agent_runner + close (in process)':<40} {trip * 1000:7.1f} ms  "
        f"ratio {trip / base:5.2f}x of python -c pass"
    )


if __name__ == "__main__":
    main()
