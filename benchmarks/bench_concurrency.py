"""Many agents at once: N steps on N worktrees in parallel, against the same N one after another.

    uv run python benchmarks/bench_concurrency.py [--harness KIND ...] [--agents N]

For each kind (default: every installed kind with a demo plan) it runs N single-turn steps
(create_agent_runner + generate_text + close, or run_agent for kinds without a model) against
one local model server, first sequentially, then concurrently in one event loop, and prints the
ratio parallel/sequential wall time (1/N would be perfect scaling; the machine has 2 cores) and
the same turn's median latency in both modes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import anyio


async def one_turn(kind: str, server: object, plan: object, tree: Path, i: int) -> float:
    from jigs import RunMetadata
    from jigs.steps import run_agent
    from jigs_testing import text

    server.add(text(f"answer {i}"))  # type: ignore[attr-defined]
    started = time.perf_counter()
    result = await run_agent(
        harness=plan.descriptor,  # type: ignore[attr-defined]
        cwd=tree,
        prompt="say something",
        run=RunMetadata(workflow_run_id=f"bench-{kind}-{i}"),
        agents_env=plan.agents_env,  # type: ignore[attr-defined]
    )
    assert result.text, result
    return time.perf_counter() - started


async def bench(kind: str, agents: int, root: Path) -> None:
    from jigs._registry import default_registry
    from jigs_testing import ModelServer
    from jigs_testing._environ import patched_environ

    harness = default_registry().get(kind)
    async with ModelServer() as server:
        plan = harness.demo_plan(server)
        if plan is None:
            print(f"{kind}: no demo plan, skipped")
            return
        trees = []
        for i in range(agents):
            tree = root / f"{kind}-{i}"
            tree.mkdir()
            subprocess.run(["git", "init", "-q", str(tree)], check=True)
            trees.append(tree)
        with patched_environ(dict(plan.host_env)):
            await one_turn(kind, server, plan, trees[0], -1)  # warm up
            started = time.perf_counter()
            sequential = [await one_turn(kind, server, plan, t, i) for i, t in enumerate(trees)]
            seq_wall = time.perf_counter() - started
            parallel: list[float] = []

            async def run(i: int, tree: Path) -> None:
                parallel.append(await one_turn(kind, server, plan, tree, 100 + i))

            started = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for i, tree in enumerate(trees):
                    tg.start_soon(run, i, tree)
            par_wall = time.perf_counter() - started
    print(
        f"{kind:<7} {agents} agents: sequential {seq_wall:6.2f} s, parallel {par_wall:6.2f} s, "
        f"ratio {par_wall / seq_wall:.2f} (1/{agents} = {1 / agents:.2f} is perfect); "
        f"median turn {statistics.median(sequential) * 1000:.0f} ms alone, "
        f"{statistics.median(parallel) * 1000:.0f} ms under load"
    )


async def main_async(kinds: list[str], agents: int) -> None:
    with tempfile.TemporaryDirectory(prefix="jigs-bench-conc-") as tmp:
        for kind in kinds:
            kind_root = Path(tmp) / kind
            kind_root.mkdir()
            await bench(kind, agents, kind_root)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--harness", action="append", metavar="KIND")
    parser.add_argument("--agents", type=int, default=4)
    args = parser.parse_args()
    from jigs._registry import default_registry
    from jigs.executables import installed_dir

    kinds = args.harness or default_registry().kinds()
    # keep finding installed CLIs while the locks and session stores go to a scratch dir
    os.environ.setdefault("JIGS_CLI_DIR", str(installed_dir("_").parent))
    os.environ.setdefault("JIGS_DATA_DIR", tempfile.mkdtemp(prefix="jigs-bench-"))
    anyio.run(main_async, kinds, args.agents)


if __name__ == "__main__":
    main()
