"""Many agents at once: N jigs steps in parallel against N raw CLIs started from plain asyncio.

    uv run python benchmarks/bench_concurrency.py [--kinds claude,codex,pi] [--agents N]
        [--rounds R]

Per kind, against one loopback :class:`jigs_testing.ModelServer`, each on its own git worktree
with the same prompt: raw, N raw CLIs (``_kinds.py``: the CLI the way people run it, reused home)
started with ``asyncio.create_subprocess_exec`` and gathered; jigs, N ``run_agent`` steps in one
task group in this process. The two alternate for R rounds; then one sequential pass of each
(N one after another) gives the scaling (parallel / sequential; 1/N is perfect, the machine has
2 cores). While a side runs, a thread samples the RSS summed over this process's whole tree
(this process and every descendant) every 50 ms; the peaks are printed for the whole tree and
for the descendants alone (this process is the same for both sides). Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import anyio
from _kinds import ANSWER, KINDS, PROMPT, Kind, prepare_environ, setup

PAGE = os.sysconf("SC_PAGE_SIZE")


def _ppids() -> dict[int, int]:
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                rest = fh.read().rsplit(")", 1)[-1].split()
            table[int(entry)] = int(rest[1])
        except (OSError, IndexError, ValueError):
            continue
    return table


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def tree_rss(root: int) -> tuple[int, int]:
    """(RSS of ``root`` and all its descendants, RSS of the descendants alone), in bytes."""
    children: dict[int, list[int]] = {}
    for pid, ppid in _ppids().items():
        children.setdefault(ppid, []).append(pid)
    below, stack = 0, list(children.get(root, []))
    while stack:
        pid = stack.pop()
        below += _rss(pid)
        stack.extend(children.get(pid, []))
    return _rss(root) + below, below


class Sampler:
    """Peak tree RSS while the ``with`` block runs, sampled every ``interval`` seconds."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.peak_tree = 0
        self.peak_children = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = os.getpid()
        while True:
            tree, below = tree_rss(me)
            self.peak_tree = max(self.peak_tree, tree)
            self.peak_children = max(self.peak_children, below)
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def raw_step(kind: Kind, tree: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        *kind.raw_argv,
        cwd=tree,
        env=kind.raw_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await proc.communicate()
    if proc.returncode != 0 or not kind.raw_ok(out):
        raise SystemExit(f"raw {kind.kind} failed (exit {proc.returncode}): {err[-1500:]!r}")


async def jigs_step(kind: Kind, tree: Path, run_id: str) -> None:
    from jigs import RunMetadata, harnesses
    from jigs.steps import run_agent

    result = await run_agent(
        harness=getattr(harnesses, kind.kind)(**kind.settings),
        cwd=tree,
        prompt=PROMPT,
        run=RunMetadata(workflow_run_id=run_id),
        agents_env=kind.agents_env,
    )
    assert result.text == ANSWER, result.text


class Side:
    def __init__(self, label: str, step: Callable[[Path, str], Coroutine[Any, Any, None]]) -> None:
        self.label = label
        self.step = step
        self.parallel: list[float] = []
        self.sequential: list[float] = []
        self.peak_tree: list[int] = []
        self.peak_children: list[int] = []

    async def run(
        self, server: object, trees: list[Path], tag: str, *, parallel: bool, record: bool = True
    ) -> None:
        from jigs_testing import text

        for _ in trees:
            server.add(text(ANSWER))  # type: ignore[attr-defined]
        with Sampler() as sampler:
            started = time.perf_counter()
            if parallel:
                async with anyio.create_task_group() as tg:
                    for i, tree in enumerate(trees):
                        tg.start_soon(self.step, tree, f"{tag}-{i}")
            else:
                for i, tree in enumerate(trees):
                    await self.step(tree, f"{tag}-{i}")
            elapsed = time.perf_counter() - started
        if not record:
            return
        (self.parallel if parallel else self.sequential).append(elapsed)
        if parallel:
            self.peak_tree.append(sampler.peak_tree)
            self.peak_children.append(sampler.peak_children)


def mib(values: list[int]) -> str:
    return f"{statistics.median(values) / 2**20:6.0f} MiB"


async def bench(kind_name: str, agents: int, rounds: int, root: Path) -> None:
    from jigs_testing import ModelServer

    async with ModelServer() as server:
        kind = setup(kind_name, server, root)
        os.environ["HOME"] = kind.jigs_env["HOME"]
        trees = []
        for i in range(agents):
            tree = root / f"tree-{i}"
            tree.mkdir()
            await anyio.run_process(["git", "init", "-q", str(tree)], check=True)
            trees.append(tree)
        raw = Side(f"raw {kind_name} x{agents} (asyncio)", lambda tree, _: raw_step(kind, tree))
        ours = Side(
            f"jigs run_agent x{agents}",
            lambda tree, run_id: jigs_step(kind, tree, f"{kind_name}-{run_id}"),
        )
        try:
            for side in (raw, ours):  # warm-up
                await side.run(server, trees[:1], "warm", parallel=True, record=False)
            for r in range(rounds):
                order = (raw, ours) if r % 2 == 0 else (ours, raw)
                for side in order:
                    await side.run(server, trees, f"par{r}", parallel=True)
            for side in (ours, raw) if rounds % 2 else (raw, ours):
                await side.run(server, trees, "seq", parallel=False)
        finally:
            kind.remove()
    print(f"\n{kind_name}: {agents} agents, {rounds} alternated rounds (medians)")
    width = max(len(raw.label), len(ours.label))
    for side in (raw, ours):
        par, seq = statistics.median(side.parallel), statistics.median(side.sequential)
        print(
            f"  {side.label:<{width}} parallel {par:6.2f} s, sequential {seq:6.2f} s, "
            f"scaling {par / seq:.2f} (1/{agents} = {1 / agents:.2f} is perfect); "
            f"peak RSS tree {mib(side.peak_tree)}, descendants {mib(side.peak_children)}"
        )
    ratios = [o / r for o, r in zip(ours.parallel, raw.parallel, strict=True)]
    print(f"  jigs / raw, parallel wall time: {statistics.median(ratios):.2f}")
    tree_ratio = statistics.median(ours.peak_tree) / statistics.median(raw.peak_tree)
    below_ratio = statistics.median(ours.peak_children) / statistics.median(raw.peak_children)
    print(f"  jigs / raw, peak tree RSS: {tree_ratio:.2f} (descendants alone {below_ratio:.2f})")


async def main_async(kinds: list[str], agents: int, rounds: int) -> None:
    print(f"load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="jigs-bench-conc-") as tmp:
        for kind in kinds:
            kind_root = Path(tmp) / kind
            kind_root.mkdir()
            await bench(kind, agents, rounds, kind_root)
    print(f"\nload after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated kinds")
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    for kind in kinds:
        if kind not in KINDS:
            parser.error(f"unknown kind {kind!r}: choose from {', '.join(KINDS)}")
    prepare_environ()
    anyio.run(main_async, kinds, args.agents, args.rounds)


if __name__ == "__main__":
    main()
