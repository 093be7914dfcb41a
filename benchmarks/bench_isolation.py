"""What the process namespace per step costs a launch, against the plain launch.

    uv run python benchmarks/bench_isolation.py [--runs N]

Both sides call :func:`jigs.processes.launch` on a fake agent (``sh`` that prints a line and
sleeps), read that line and stop it: one with the isolation this machine gets (the namespace
chain), one
with :data:`jigs.sandbox._isolation.PLAIN` (the launch as it was before namespaces). The sides
alternate in order each pair so drift hits both alike. Prints both medians, the median added
milliseconds per launch (start + stop; target < 5 ms) and the median ratio namespace / plain.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from jigs.processes import launch
from jigs.sandbox._isolation import PLAIN, Isolation, isolation

AGENT = ["/bin/sh", "-c", "echo ready; exec sleep 30"]


async def once(cwd: Path, mode: Isolation | None) -> tuple[float, float]:
    """(launch -> first output line, stop) in seconds for one fake agent."""
    started = time.perf_counter()
    process = await launch(AGENT, cwd=cwd, env={}, owner="bench", isolation_override=mode)
    assert await process.read_line() == b"ready"
    ready = time.perf_counter()
    await process.stop()
    return ready - started, time.perf_counter() - ready


async def main(runs: int) -> int:
    found = isolation()
    print(f"isolation: {found.mode} - {found.detail}")
    if not found.namespaced:
        print(f"no namespace here, nothing to compare; fix: {found.fix}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tree:
        cwd = Path(tree)
        await once(cwd, None)
        await once(cwd, PLAIN)
        spaced: list[tuple[float, float]] = []
        bare: list[tuple[float, float]] = []
        for i in range(runs):
            if i % 2 == 0:
                spaced.append(await once(cwd, None))
                bare.append(await once(cwd, PLAIN))
            else:
                bare.append(await once(cwd, PLAIN))
                spaced.append(await once(cwd, None))

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:.2f} ms"

    for label, pick in (("start (launch -> first line)", 0), ("stop", 1)):
        print(
            f"{label}: plain {ms([b[pick] for b in bare])}, namespace "
            f"{ms([s[pick] for s in spaced])}"
        )
    totals = [(sum(s), sum(b)) for s, b in zip(spaced, bare, strict=True)]
    added = [s - b for s, b in totals]
    print(
        f"start + stop: plain {ms([b for _, b in totals])}, namespace {ms([s for s, _ in totals])}"
    )
    print(f"added per launch (median of pair differences): {ms(added)} (target < 5 ms)")
    ratio = statistics.median(s / b for s, b in totals)
    print(f"median ratio namespace/plain over {runs} pairs: {ratio:.2f}")
    return 0 if statistics.median(added) < 0.005 else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    sys.exit(anyio.run(main, parser.parse_args().runs))
