"""A worker under load: N concurrent jigs steps against N raw CLIs, CPU and memory of each side.

    uv run python benchmarks/bench_load.py [--kinds claude,codex,pi,opencode] [--levels 1,4,16]
        [--rounds R] [--echo-steps S] [--echo-rounds E] [--stages]

Per kind, against one loopback :class:`jigs_testing.ModelServer`, two long-lived worker
processes (``_load_worker.py``), each in a cgroup of its own (:mod:`_cgroup`): **raw** starts N
raw CLIs from plain asyncio (``_kinds.py``: the CLI the way people run it, a reused home) and
gathers them; **jigs** runs N ``run_agent`` steps at once in one event loop. Both use the same N
git worktrees and the same prompt. For each level N, after one warm-up round per side, the sides
alternate for R rounds. Per side and level it prints the median wall time of a round with its
spread (min-max), steps/min (N / wall), the CPU of every process of the side (the cgroup's
counter: the worker, the CLIs, the Codex app server and whatever the sandbox holds, those that
die unreaped in a namespace too) and the peak RSS summed over the worker's process tree (sampled
every 50 ms); then the ratios jigs / raw (median of the per-round ratios, with their spread).
The server is scripted with one answer a step and each round's model requests are counted: the
benchmark prints them per step and exits when a side did not make exactly one a step (the sides
would not be doing the same work). When the wall-time ratio is over 1.05 (or with
``--stages``), one more jigs round runs with jigs' structlog events captured, outside the timed
rounds, and the slowest stages of a step are printed (the median gap before each event, over the
round's steps).

Then trivial steps: the echo kind (``tests/plugins/echo``) one at a time, S steps a round, E
rounds alternated with its raw stand-in (``python -m jigs_harness_echo._cli``, the CLI the echo
kind launches, from plain asyncio): steps/min of each and the ratio (target >= 0.95 of raw).

The machine's load is printed before and after. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _cgroup
import anyio
import anyio.abc
from _kinds import ANSWER, KINDS, PROMPT, base_env, prepare_environ, setup
from jigs.sandbox._proctree import descendants

PAGE = os.sysconf("SC_PAGE_SIZE")
WORKER = Path(__file__).with_name("_load_worker.py")
TARGET = 1.05


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def tree_rss(root: int) -> int:
    """RSS of ``root`` and all its descendants, in bytes."""
    return _rss(root) + sum(_rss(pid) for pid, _ in descendants([root]))


class Sampler:
    """Peak RSS of ``root``'s tree while the ``with`` block runs, sampled every 50 ms."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            self.peak = max(self.peak, tree_rss(self.root))
            if self._stop.wait(0.05):
                return

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Round:
    wall: float
    cpu: float
    #: The worker process's own CPU seconds (the rest of ``cpu`` is its children's).
    own_cpu: float
    rss: int
    steps: dict[str, list[tuple[float, str, float | None]]]
    #: The model requests the server received during the round (None: no model server).
    requests: int | None = None


class SideWorker:
    """One side's worker process in its own cgroup."""

    def __init__(self, side: str, spec_path: Path, env: dict[str, str]) -> None:
        self.side = side
        self.spec_path = spec_path
        self.env = env
        self.group = _cgroup.CpuGroup(f"{side}-{time.monotonic_ns()}")
        self.proc: anyio.abc.Process | None = None
        self._buffer = b""

    async def start(self) -> None:
        argv = self.group.wrap([sys.executable, str(WORKER), self.side, str(self.spec_path)])
        self.proc = await anyio.open_process(argv, env=self.env, stderr=None)

    async def _line(self) -> bytes:
        assert self.proc is not None
        assert self.proc.stdout is not None
        while b"\n" not in self._buffer:
            chunk = await self.proc.stdout.receive()
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    async def settle(self, wait: float = 3.0) -> None:
        """Until only the worker is left in the group (a namespace's processes die just after
        the step that held them), so a round's CPU is not billed to the next."""
        assert self.proc is not None
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            procs = (self.group.path / "cgroup.procs").read_text().split()
            if procs == [str(self.proc.pid)]:
                return
            await anyio.sleep(0.02)

    async def round(self, n: int, waves: int, tag: str, *, capture: bool = False) -> Round:
        assert self.proc is not None
        assert self.proc.stdin is not None
        await self.settle()
        cpu = self.group.seconds()
        with Sampler(self.proc.pid) as sampler:
            await self.proc.stdin.send(f"ROUND {n} {waves} {tag} {int(capture)}\n".encode())
            answer = json.loads(await self._line())
        await self.settle()
        cpu = self.group.seconds() - cpu
        return Round(answer["wall"], cpu, answer["own_cpu"], sampler.peak, answer["steps"])

    async def stop(self) -> None:
        if self.proc is not None:
            assert self.proc.stdin is not None
            await self.proc.stdin.aclose()
            await self.proc.wait()
        self.group.remove()


def spread(values: list[float], scale: float = 1.0, fmt: str = "{:.2f}") -> str:
    """The median and the range, as ``median (min-max)``."""
    med, lo, hi = (f(values) * scale for f in (statistics.median, min, max))
    return f"{fmt.format(med)} ({fmt.format(lo)}-{fmt.format(hi)})"


@dataclass
class Level:
    label: str
    n: int
    waves: int
    raw: list[Round] = field(default_factory=list)
    jigs: list[Round] = field(default_factory=list)

    def ratios(self, attr: str) -> list[float]:
        pairs = zip(self.jigs, self.raw, strict=True)
        return [getattr(j, attr) / max(getattr(r, attr), 1e-9) for j, r in pairs]

    def report(self) -> float:
        steps = self.n * self.waves
        count = len(self.raw)
        print(f"\n{self.label}: {steps} step(s) a round ({self.n} at a time), {count} rounds")
        for name, rounds in (("raw ", self.raw), ("jigs", self.jigs)):
            walls = [r.wall for r in rounds]
            per_min = [steps * 60 / w for w in walls]
            cpu = [r.cpu / steps for r in rounds]
            own = statistics.median(r.own_cpu / steps for r in rounds) * 1000
            rss = statistics.median(r.rss for r in rounds) / 2**20
            print(
                f"  {name} wall {spread(walls, 1.0, '{:.3f}')} s, {spread(per_min, 1.0, '{:.0f}')}"
                f" steps/min, CPU/step {spread(cpu, 1000, '{:.1f}')} ms (the worker's own "
                f"{own:.1f}), peak RSS {rss:.0f} MiB"
            )
        wall = self.ratios("wall")
        print(
            f"  jigs/raw: wall {spread(wall)}, CPU {spread(self.ratios('cpu'))}, "
            f"peak RSS {spread(self.ratios('rss'))}"
        )
        self.same_requests(steps)
        return statistics.median(wall)

    def same_requests(self, steps: int) -> None:
        """Print the model requests a step of each side; exit when the sides differ (they
        would not be doing the same work)."""
        raw = [r.requests for r in self.raw]
        jigs = [r.requests for r in self.jigs]
        if None in raw or None in jigs:
            return
        print(
            f"  model requests a step: raw {', '.join(f'{n / steps:g}' for n in raw)}; "
            f"jigs {', '.join(f'{n / steps:g}' for n in jigs)}"
        )
        if set(raw) != {steps} or set(jigs) != {steps}:
            raise SystemExit(f"{self.label}: the sides did not make one model request a step")


def stages(steps: dict[str, list[tuple[float, str, float | None]]], top: int = 6) -> None:
    """The slowest stages of a step: the median gap before each event (from the step's previous
    event) and the median ``seconds`` of each timed event, over the captured steps."""
    gaps: dict[str, list[float]] = {}
    timed: dict[str, list[float]] = {}
    totals = []
    for run_id, unsorted in steps.items():
        if run_id == "?":  # events bound to no step (the credential proxy's)
            continue
        events = sorted(unsorted)
        totals.append(events[-1][0] - events[0][0])
        for (before, _, _), (at, name, seconds) in itertools.pairwise(events):
            gaps.setdefault(name, []).append(at - before)
            if seconds is not None:
                timed.setdefault(name, []).append(float(seconds))
    if not totals:
        print("  (no events captured)")
        return
    print(
        f"  a jigs step's stages ({len(totals)} steps, events captured; first to last event "
        f"{statistics.median(totals) * 1000:.0f} ms):"
    )
    for title, table in (("gap before the event", gaps), ("timed by the event", timed)):
        ranked = sorted(table.items(), key=lambda kv: -statistics.median(kv[1]))[:top]
        cells = ", ".join(f"{k} {statistics.median(v) * 1000:.1f}" for k, v in ranked)
        print(f"    {title} (ms): {cells}")


class Script:
    """The model server's answers for a round (one scripted answer a step) and the model
    requests the round made; ``server`` None: a kind without a model server (echo)."""

    def __init__(self, server: Any | None) -> None:
        self.server = server

    def prepare(self, count: int) -> None:
        if self.server is None:
            return
        from jigs_testing import text

        self.server.script.skip_remaining()  # a side that asked for less leaves none behind
        self.server.clear_log()
        self.server.add(*(text(ANSWER) for _ in range(count)))

    def requests(self, side: str) -> int | None:
        if self.server is None:
            return None
        if self.server.failures:
            raise SystemExit(f"{side} round: the model server failed: {self.server.failures}")
        return len(self.server.model_requests)


async def run_level(
    level: Level, workers: dict[str, SideWorker], rounds: int, script: Script, force: bool
) -> None:
    count = level.n * level.waves

    async def one(side: str, tag: str, capture: bool = False) -> Round:
        script.prepare(count)
        result = await workers[side].round(level.n, level.waves, tag, capture=capture)
        result.requests = script.requests(side)
        return result

    for side in ("raw", "jigs"):  # warm-up: page cache, homes, seeds, the worker's imports
        await one(side, f"warm{level.n}")
    for r in range(rounds):
        order = ("raw", "jigs") if r % 2 == 0 else ("jigs", "raw")
        for side in order:
            getattr(level, side).append(await one(side, f"n{level.n}r{r}"))
    ratio = level.report()
    if ratio > TARGET or force:
        stages((await one("jigs", f"s{level.n}", capture=True)).steps)


async def with_workers(
    spec: dict[str, Any], jigs_env: dict[str, str], root: Path, body: Any
) -> None:
    spec_path = root / "spec.json"
    spec_path.write_text(json.dumps(spec))
    workers = {
        "raw": SideWorker("raw", spec_path, jigs_env),
        "jigs": SideWorker("jigs", spec_path, jigs_env),
    }
    try:
        for worker in workers.values():
            await worker.start()
        await body(workers)
    finally:
        for worker in workers.values():
            await worker.stop()


async def trees(root: Path, count: int) -> list[str]:
    out = []
    for i in range(count):
        tree = root / f"tree-{i}"
        tree.mkdir()
        await anyio.run_process(["git", "init", "-q", str(tree)], check=True)
        out.append(str(tree))
    return out


async def bench_kind(name: str, levels: list[int], rounds: int, root: Path, force: bool) -> None:
    from jigs_testing import ModelServer

    async with ModelServer() as server:
        kind = setup(name, server, root)
        spec = {
            "kind": name,
            "settings": kind.settings,
            "agents_env": kind.agents_env,
            "prompt": PROMPT,
            "jigs_expect": ANSWER,
            "raw_argv": kind.raw_argv,
            "raw_env": kind.raw_env,
            "raw_expect": kind.raw_expect,
            "trees": await trees(root, max(levels)),
        }

        async def body(workers: dict[str, SideWorker]) -> None:
            script = Script(server)
            for side in ("raw", "jigs"):  # the homes' first use, one step alone: 16 first
                script.prepare(1)  # opencode runs at once race on creating its database
                await workers[side].round(1, 1, "first")
            for n in levels:
                level = Level(f"{name} x{n}", n, 1)
                await run_level(level, workers, rounds, script, force)

        try:
            await with_workers(spec, kind.jigs_env, root, body)
        finally:
            kind.remove()


async def bench_echo(steps: int, rounds: int, root: Path, force: bool) -> None:
    home = root / "home"
    home.mkdir()
    env = base_env(home)
    from jigs_harness_echo._harness import _CLI, EchoHarness

    # the argv the echo kind launches (its launch_turn), from plain asyncio
    executable = EchoHarness().resolve_executable(os.environ).path
    cli = [str(executable), "-I", str(_CLI), "--sessions", str(root / "sessions")]
    spec = {
        "kind": "echo",
        "settings": {},
        "agents_env": [],
        "prompt": PROMPT,
        "jigs_expect": f"echo: {PROMPT} (turn 1)",
        "raw_argv": [*cli, "--", PROMPT],
        "raw_env": env,
        "raw_expect": [f"echo: {PROMPT}"],
        "trees": await trees(root, 1),
    }

    # bytecode caches next to the sources for what the CLI imports, as an installed wheel has
    # them: the sandboxed CLI sees its sources read-only, and this machine's environment says
    # PYTHONDONTWRITEBYTECODE, so otherwise both sides would compile every module every step
    writes = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    await anyio.run_process([*cli, "--", "warm"], env=writes, check=True)

    async def body(workers: dict[str, SideWorker]) -> None:
        level = Level("echo (trivial steps)", 1, steps)
        await run_level(level, workers, rounds, Script(None), force)

    await with_workers(spec, env, root, body)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def main_async(args: argparse.Namespace, kinds: list[str], levels: list[int]) -> None:
    print(f"load before: {load()} ({os.cpu_count()} cores)")
    with tempfile.TemporaryDirectory(prefix="jigs-bench-load-") as tmp:
        for kind in kinds:
            started = time.perf_counter()
            (Path(tmp) / kind).mkdir()
            await bench_kind(kind, levels, args.rounds, Path(tmp) / kind, args.stages)
            print(f"  ({time.perf_counter() - started:.0f} s for {kind}; load {load()})")
        if args.echo_rounds:
            (Path(tmp) / "echo").mkdir()
            await bench_echo(args.echo_steps, args.echo_rounds, Path(tmp) / "echo", args.stages)
    print(f"\nload after: {load()}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated kinds ('' none)")
    parser.add_argument("--levels", default="1,4,16", help="concurrent steps, comma-separated")
    parser.add_argument("--rounds", type=int, default=5, help="alternated rounds per level")
    parser.add_argument("--echo-steps", type=int, default=20, help="echo steps a round")
    parser.add_argument("--echo-rounds", type=int, default=7, help="echo rounds (0: none)")
    parser.add_argument("--stages", action="store_true", help="print stages at every level")
    args = parser.parse_args()
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    for kind in kinds:
        if kind not in KINDS:
            parser.error(f"unknown kind {kind!r}: choose from {', '.join(KINDS)}")
    if not _cgroup.available():
        parser.error("needs cgroup v1 cpuacct groups (root): the CPU of every process is the point")
    levels = [int(n) for n in args.levels.split(",") if n.strip()]
    prepare_environ()
    try:
        anyio.run(main_async, args, kinds, levels)
    finally:  # the scratch data dir prepare_environ made (sessions, seeds' spares, step logs)
        shutil.rmtree(os.environ["XDG_DATA_HOME"], ignore_errors=True)


if __name__ == "__main__":
    main()
