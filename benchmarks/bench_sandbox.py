"""What a sandboxed launch costs, and what its listeners add: the setns way (a worker with
CAP_SYS_ADMIN) against the bridge (any other worker, :mod:`jigs.sandbox._bridge`).

    uv run python benchmarks/bench_sandbox.py [--runs N]

Every side calls :func:`jigs.processes.launch` on a fake agent (``sh`` that prints a line and
sleeps), reads that line and stops it:

- ``plain``: no isolation (:data:`jigs.sandbox._isolation.PLAIN`);
- ``namespace``: the process namespace of an unsandboxed step
  (:func:`jigs.sandbox._isolation.isolation`);
- ``sandbox``: bwrap, network ``deny``, no listener;
- ``sandbox+setns``: the same with one listener made by entering the namespace (root only);
- ``sandbox+bridge``: the same with one listener made by the bridge.

The sides run in a rotating order each round, so drift hits all alike. Prints, per side, the
median and the spread (10th-90th percentile) of launch -> first line and of stop, then the
median ratios of start + stop against ``plain`` and of the bridge against setns. Also the bare
``python -I -S -c pass`` a bridge costs at least. Figures, not a pass/fail.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio
from jigs.processes import launch
from jigs.sandbox import SandboxView, sandbox_problem
from jigs.sandbox._isolation import PLAIN, isolation
from jigs.sandbox._netns import _has_sys_admin, force_bridge

AGENT = ["/bin/sh", "-c", "echo ready; exec sleep 30"]
PORT = 47_123


def _view(cwd: Path, listen: bool) -> SandboxView:
    view = SandboxView(home=str(cwd / "home"), network="deny")
    view.expose(cwd, writable=True)
    if listen:
        view.listen[PORT] = socket.socket.close  # the server's side is not measured
    return view


def sides(cwd: Path) -> dict[str, Callable[[], object]]:
    """Each side's launch arguments (a thunk, so the bridge choice is made per launch)."""
    found: dict[str, Callable[[], object]] = {
        "plain": lambda: {"isolation_override": PLAIN},
        "namespace": lambda: {"isolation_override": isolation()},
        "sandbox": lambda: {"sandbox": _view(cwd, False)},
        "sandbox+bridge": lambda: (force_bridge(True), {"sandbox": _view(cwd, True)})[1],
    }
    if _has_sys_admin():
        found["sandbox+setns"] = lambda: (force_bridge(False), {"sandbox": _view(cwd, True)})[1]
    return found


async def once(cwd: Path, options: object) -> tuple[float, float]:
    """(launch -> first output line, stop) in seconds for one fake agent."""
    assert isinstance(options, dict)
    started = time.perf_counter()
    process = await launch(AGENT, cwd=cwd, env={}, owner="bench", **options)
    assert await process.read_line() == b"ready", process.stderr_tail()
    ready = time.perf_counter()
    await process.stop()
    return ready - started, time.perf_counter() - ready


def python_pass(runs: int) -> list[float]:
    real = os.path.realpath(sys.executable)
    took = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([real, "-I", "-S", "-c", "pass"], check=True)
        took.append(time.perf_counter() - started)
    return took


def spread(values: list[float]) -> str:
    cuts = statistics.quantiles(values, n=10)
    return (
        f"{statistics.median(values) * 1000:6.2f} ms [{cuts[0] * 1000:.2f}-{cuts[-1] * 1000:.2f}]"
    )


def report(results: dict[str, list[tuple[float, float]]], bare: list[float]) -> None:
    width = max(map(len, results))
    print(f"{'side':<{width}}  launch -> first line [p10-p90]   stop [p10-p90]")
    for name, pairs in results.items():
        print(f"{name:<{width}}  {spread([p[0] for p in pairs])}   {spread([p[1] for p in pairs])}")
    totals = {name: [sum(p) for p in pairs] for name, pairs in results.items()}
    for name, values in totals.items():
        if name != "plain":
            ratio = statistics.median(v / b for v, b in zip(values, totals["plain"], strict=True))
            print(f"start + stop, {name}/plain: median ratio {ratio:.2f}")
    for base in ("sandbox", "sandbox+setns"):
        if base in totals:
            added = [b - s for b, s in zip(totals["sandbox+bridge"], totals[base], strict=True)]
            print(
                f"sandbox+bridge - {base}: median {statistics.median(added) * 1000:+.2f} ms "
                f"per launch (start + stop)"
            )
    print(f"python -I -S -c pass (subprocess.run): {spread(bare)}")


async def main(runs: int) -> int:
    problem = sandbox_problem()
    if problem is not None:
        print(f"this host cannot sandbox: {problem}", file=sys.stderr)
        return 1
    print(f"worker uid {os.geteuid()}, CAP_SYS_ADMIN: {_has_sys_admin()}, {runs} rounds")
    with tempfile.TemporaryDirectory() as tree:
        cwd = Path(tree)
        chosen = sides(cwd)
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in chosen}
        names = list(chosen)
        for name in names:  # one warm-up each
            await once(cwd, chosen[name]())
        for i in range(runs):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                results[name].append(await once(cwd, chosen[name]()))
        force_bridge(None)
    report(results, python_pass(max(runs, 10)))
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60)
    sys.exit(anyio.run(main, parser.parse_args().runs))
