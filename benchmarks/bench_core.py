"""The core's own costs, against a bare ``python -c pass`` measured alternately in the same run.

    uv run python benchmarks/bench_core.py [--runs N] [--kind KIND] [--top N]
        [--env release|workspace]

Each round runs every fresh-process side once (``python -c pass``, ``import jigs``, ``import
jigs.steps, jigs.models``, and that import plus resolving one kind through its entry point), with
bytecode caches as on a user's machine (see ``_pycache.py``), rotating the order every round so
drift spreads over all sides; each side's figure is the median of its per-round difference and
ratio to ``pass`` in the same round. Target: the import plus resolving one kind at most +100 ms
over ``python -c pass``. With ``--env release`` (the default) every fresh process runs in a venv
of the release wheels only (jigs-core and the three kinds, compiled bytecode; see
``_release_env.py``), as a user installs jigs; with ``--env workspace`` in the workspace's venv,
where every dev tool is installed (``import httpx`` there also imports its CLI, and httpcore
imports trio).

Then one ``create_agent_runner`` + ``close`` round trip with the echo test kind, in process (the
pipeline's own cost: env, checks, lock, open, close; no model call; always in the workspace: the
echo kind is a test kind), and an import-time report (in the chosen environment): the top entries
of ``python -X importtime -c "import jigs.steps, jigs.models"`` by cumulative time (median over 3
runs) and the self time summed per top-level package, so regressions show.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections import defaultdict

import anyio
from _pycache import describe
from _release_env import ENVS, PythonEnv, describe_env, jigs_env

IMPORT = "import jigs.steps, jigs.models"


def run_python(env: PythonEnv, code: str) -> float:
    started = time.perf_counter()
    subprocess.run([env.python, "-c", code], check=True, env=env.child_env(os.environ))
    return time.perf_counter() - started


def alternated(env: PythonEnv, sides: list[tuple[str, str]], runs: int) -> dict[str, list[float]]:
    """``runs`` rounds of every side once, the order rotated (and reversed every other lap)."""
    for _, code in sides:  # warm-up: page cache, bytecode caches
        run_python(env, code)
    samples: dict[str, list[float]] = {label: [] for label, _ in sides}
    for i in range(runs):
        shift = i % len(sides)
        order = sides[shift:] + sides[:shift]
        if (i // len(sides)) % 2:
            order.reverse()
        for label, code in order:
            samples[label].append(run_python(env, code))
    return samples


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


def import_times(env: PythonEnv, code: str, runs: int = 3) -> dict[str, tuple[float, float]]:
    """Per module: the median (self, cumulative) microseconds over ``runs`` runs of
    ``python -X importtime -c code``."""
    seen: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for _ in range(runs):
        out = subprocess.run(
            [env.python, "-X", "importtime", "-c", code],
            check=True,
            env=env.child_env(os.environ),
            capture_output=True,
            text=True,
        ).stderr
        for line in out.splitlines():
            if not line.startswith("import time:") or "imported package" in line:
                continue
            self_us, cumulative, name = line.removeprefix("import time:").split("|", 2)
            seen[name.strip()].append((int(self_us), int(cumulative)))
    return {
        name: (statistics.median(s for s, _ in pairs), statistics.median(c for _, c in pairs))
        for name, pairs in seen.items()
    }


def import_report(env: PythonEnv, top: int) -> None:
    times = import_times(env, IMPORT)
    total = sum(s for s, _ in times.values())
    print(
        f'\npython -X importtime -c "{IMPORT}" in the {env.name} venv '
        f"(median of 3; all modules: {total / 1000:.0f} ms)"
    )
    print(f"  top {top} by cumulative time:")
    ranked = sorted(times.items(), key=lambda item: item[1][1], reverse=True)
    for name, (self_us, cumulative) in ranked[:top]:
        print(f"    {cumulative / 1000:7.1f} ms cumulative {self_us / 1000:6.1f} ms self  {name}")
    packages: dict[str, float] = defaultdict(float)
    for name, (self_us, _) in times.items():
        packages[name.split(".")[0]] += self_us
    print("  self time by top-level package:")
    for name, self_us in sorted(packages.items(), key=lambda item: item[1], reverse=True)[:10]:
        print(f"    {self_us / 1000:7.1f} ms  {name}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--kind", default="claude", help="the kind to resolve (default claude)")
    parser.add_argument("--top", type=int, default=15, help="import-time entries to print")
    parser.add_argument(
        "--env",
        choices=ENVS,
        default="release",
        help="where the fresh processes run: a venv of the release wheels only (default) "
        "or the workspace",
    )
    args = parser.parse_args()
    # a scratch XDG data home, not JIGS_DATA_DIR: jigs finds its data dir as a user's step does
    os.environ.pop("JIGS_DATA_DIR", None)
    os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="jigs-bench-")
    # a kind whose descriptor needs a setting gets the one it needs (Pi: a model)
    settings = {
        "pi": "model={'type': 'openai-compatible', 'name': 'local', 'model': 'm', "
        "'base_url': 'http://127.0.0.1:9/v1', 'api_key_env': 'BENCH_KEY'}"
    }.get(args.kind, "")
    resolve = f"{IMPORT}; from jigs import harnesses; harnesses.{args.kind}({settings})"
    sides = [
        ("python -c pass", "pass"),
        ("import jigs", "import jigs"),
        (IMPORT, IMPORT),
        (f"{IMPORT} + harnesses.{args.kind}()", resolve),
    ]
    env = jigs_env(args.env)
    for line in describe_env(env):
        print(line)
    if env.name == "workspace":
        print(describe())
    samples = alternated(env, sides, args.runs)
    base = samples["python -c pass"]
    print(f"python -c pass: median {statistics.median(base) * 1000:.1f} ms ({args.runs} rounds)")
    width = max(len(label) for label, _ in sides)
    for label, _ in sides[1:]:
        ours = samples[label]
        ratio = statistics.median(o / b for o, b in zip(ours, base, strict=True))
        extra = statistics.median(o - b for o, b in zip(ours, base, strict=True))
        line = (
            f"{label:<{width}} {statistics.median(ours) * 1000:7.1f} ms  ratio {ratio:5.2f}x  "
            f"({extra * 1000:+.1f} ms)"
        )
        if label == sides[-1][0]:
            line += "  target <= +100 ms"
        print(line)
    trip = anyio.run(round_trips, args.runs)
    print(f"{'create_agent_runner + close (echo, in process)':<{width}} {trip * 1000:7.1f} ms")
    import_report(env, args.top)
    print(f"\nload: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")


if __name__ == "__main__":
    main()
