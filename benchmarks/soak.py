"""A worker full of agents, for a long while: many steps in one process, with faults mixed in,
and what the process holds before and after.

    uv run python benchmarks/soak.py [--echo N] [--real M] [--kinds claude,codex,pi[,opencode]]
        [--concurrency C] [--check]

One process is the worker. It runs ``N`` steps of the echo kind (``C`` at a time, each worker
task on its own git worktree) and then ``M`` steps of each real CLI one after another against
one loopback :class:`jigs_testing.ModelServer`. Both mix in, in a fixed rotation, the faults a
worker meets: a CLI that crashes, a turn over its deadline, a step cancelled mid-turn, a CLI
that leaves a grandchild behind, and for the real CLIs a model API error. Runs reuse eight run
ids, so the store holds at most eight runs whatever ``N`` is.

It prints steps run, outcomes by type, a step's median seconds by what it met and, measured after
a warm-up and again at the end: open file descriptors, sockets, namespace handles, threads (not
counting anyio's pool), RSS (and its trend every 10% of the steps), live Python objects, child
processes, temporary dirs (the worker's ``TMPDIR`` is a scratch dir of its own) and the store's
runs. ``--check`` exits 1 when an outcome is not typed (not a :class:`~jigs.errors.JigsError` and
not the cancellation the soak made itself) or when a count grew (RSS by more than 16 MiB, Python
objects by more than 10%); the suite runs a short version that way (``tests/core/test_soak.py``).
Figures, not timings.
"""

from __future__ import annotations

import argparse
import collections
import gc
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from _kinds import KINDS, prepare_environ, setup
from jigs.sandbox._proctree import descendants

RUNS = 8
RSS_SLACK_KIB = 16 * 1024
ECHO_FAULTS = ("ok", "ok", "crash", "timeout", "cancel", "child", "ok")
REAL_FAULTS = ("ok", "api-error", "ok", "timeout", "cancel")
#: The real CLIs by default; opencode (~4 s of CPU a step) only when asked, so the short
#: version (tests/core/test_soak.py) keeps its length.
DEFAULT_KINDS = ("claude", "codex", "pi")


def _local_ports() -> dict[str, int]:
    """Socket inode -> its local TCP port, for this network namespace."""
    ports = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as lines:
                next(lines)
                for line in lines:
                    fields = line.split()
                    ports[fields[9]] = int(fields[1].rsplit(":", 1)[1], 16)
        except (OSError, StopIteration, IndexError, ValueError):
            continue
    return ports


def _fd_kinds(skip_port: int) -> collections.Counter[str]:
    """This process's open descriptors by kind; the model server's own sockets (its port) are
    the test rig's, not the worker's, and are left out."""
    kinds: collections.Counter[str] = collections.Counter()
    ports = _local_ports()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        kind = target.split(":", 1)[0] if ":" in target and not target.startswith("/") else "file"
        if kind == "socket" and ports.get(target[len("socket:[") : -1]) == skip_port:
            continue
        kinds[kind] += 1
    return kinds


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _objects() -> int:
    """Live objects the collector tracks, after a collection: what a leak in Python grows."""
    gc.collect()
    return len(gc.get_objects())


def snapshot(data_home: Path, server_port: int) -> dict[str, int]:
    """What this worker holds now."""
    fds = _fd_kinds(server_port)
    tmp = Path(tempfile.gettempdir())  # the soak's own (see main)
    runs = data_home / "jigs" / "runs"
    return {
        "file descriptors": sum(fds.values()),
        "sockets": fds["socket"],
        "namespace handles": sum(n for kind, n in fds.items() if kind in ("pid", "net", "mnt")),
        # anyio's idle worker threads stay a while for the next call; they are a pool, not a leak
        "threads": len(os.listdir("/proc/self/task"))
        - sum(1 for thread in threading.enumerate() if thread.name == "AnyIO worker thread"),
        "RSS (KiB)": _rss_kib(),
        "python objects": _objects(),
        "child processes": len(descendants([os.getpid()])),
        "temp dirs": sum(1 for p in tmp.iterdir() if not p.name.startswith("soak-")),
        "store runs": sum(1 for _ in runs.iterdir()) if runs.is_dir() else 0,
    }


class Soak:
    def __init__(self, server: Any, root: Path) -> None:
        self.server = server
        self.root = root
        self.outcomes: collections.Counter[str] = collections.Counter()
        self.untyped: list[str] = []
        self.steps = 0
        self.seconds: dict[str, list[float]] = collections.defaultdict(list)
        #: (steps run, RSS in KiB) every 10% of the steps: a leak climbs, a warm heap levels off
        self.trend: list[tuple[int, int]] = []
        self.trend_every = 0

    async def step(self, run: Callable[[], Awaitable[Any]], fault: str, label: str) -> None:
        """One step; its outcome counted by type (a cancellation only when the soak made it)."""
        self.steps += 1
        began = time.monotonic()
        try:
            await self._step(run, fault, label)
        finally:
            self.seconds[f"{label} {fault}"].append(time.monotonic() - began)
            if self.trend_every and self.steps % self.trend_every == 0:
                self.trend.append((self.steps, _rss_kib()))

    async def _step(self, run: Callable[[], Awaitable[Any]], fault: str, label: str) -> None:
        from jigs.errors import JigsError

        with anyio.CancelScope() as scope:
            if fault == "cancel":
                scope.deadline = anyio.current_time() + 0.8
            try:
                await run()
            except JigsError as exc:
                self.outcomes[f"{label} {type(exc).__name__}"] += 1
                return
            except Exception as exc:  # the soak's finding: an untyped failure
                self.untyped.append(f"{label} {fault}: {type(exc).__name__}: {exc}")
                self.outcomes[f"{label} untyped {type(exc).__name__}"] += 1
                return
            self.outcomes[f"{label} ok"] += 1
        if scope.cancelled_caught:
            self.outcomes[f"{label} cancelled"] += 1


def _worktree(root: Path, name: str) -> Path:
    import subprocess

    path = root / name
    if not (path / ".git").is_dir():
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def _run_id(n: int) -> Any:
    from jigs import RunMetadata

    return RunMetadata(workflow_run_id=f"soak-{n % RUNS}")


async def echo_steps(soak: Soak, count: int, concurrency: int) -> None:
    from jigs import harnesses
    from jigs.steps import run_agent

    counter = iter(range(count))

    async def worker(tree: Path) -> None:
        for n in counter:
            fault = ECHO_FAULTS[n % len(ECHO_FAULTS)]
            prompt = {"crash": "crash", "timeout": "sleep:5", "cancel": "sleep:5"}.get(fault, "hi")
            prompt = "child hi" if fault == "child" else prompt
            timeout = 0.5 if fault == "timeout" else 60.0
            descriptor = harnesses.echo(turn_timeout=timeout)

            async def run(prompt: str = prompt, descriptor: Any = descriptor, n: int = n) -> Any:
                return await run_agent(harness=descriptor, prompt=prompt, cwd=tree, run=_run_id(n))

            await soak.step(run, fault, "echo")

    async with anyio.create_task_group() as group:
        for index in range(concurrency):
            group.start_soon(worker, _worktree(soak.root, f"echo-{index}"))


async def real_steps(soak: Soak, kind: str, count: int) -> None:
    from jigs import harnesses
    from jigs.steps import run_agent
    from jigs_testing import error, text

    spec = setup(kind, soak.server, soak.root / f"{kind}-setup")
    tree = _worktree(soak.root, f"{kind}-tree")
    for n in range(count):
        fault = REAL_FAULTS[n % len(REAL_FAULTS)]
        settings = dict(spec.settings)
        if fault == "timeout":
            settings["turn_timeout"] = 1.0
        if fault == "api-error":
            soak.server.add(error(400, "soak: a refused request"))
        else:
            soak.server.add(text("soak answer", delay=5.0 if fault != "ok" else 0.0))
        descriptor = getattr(harnesses, kind)(**settings)

        async def run(descriptor: Any = descriptor, n: int = n) -> Any:
            return await run_agent(
                harness=descriptor,
                prompt="say something",
                cwd=tree,
                run=_run_id(n),
                agents_env=spec.agents_env,
            )

        await soak.step(run, fault, kind)
        soak.server.script.skip_remaining()  # what a killed turn never asked for
        soak.server.clear_log()  # the rig's record of each request body is not the worker's
    spec.remove()


def report(before: dict[str, int], after: dict[str, int], soak: Soak, seconds: float) -> list[str]:
    """Print the figures; the counts that grew (the soak's failures with ``--check``)."""
    print(f"\nsteps run: {soak.steps} in {seconds:.1f} s")
    for outcome, number in sorted(soak.outcomes.items()):
        print(f"  {number:6d}  {outcome}")
    print("\n  median seconds of a step, by what it met")
    for what, times in sorted(soak.seconds.items()):
        print(f"  {statistics.median(times):6.2f}  {what}")
    print(f"\n  {'held':20s} {'after warm-up':>14s} {'at the end':>11s}")
    grew = []
    for name, value in before.items():
        print(f"  {name:20s} {value:14d} {after[name]:11d}")
        slack = {"RSS (KiB)": RSS_SLACK_KIB, "python objects": value // 10}.get(name, 0)
        limit = RUNS if name == "store runs" else value + slack
        if after[name] > max(limit, value + slack):
            grew.append(f"{name}: {value} -> {after[name]}")
    print("  RSS (KiB) by steps run: " + ", ".join(f"{n}: {kib}" for n, kib in soak.trend))
    for line in soak.untyped:
        print(f"  untyped: {line}")
    return grew


async def main_async(args: argparse.Namespace) -> int:
    from jigs_testing import ModelServer

    root = Path(tempfile.mkdtemp(prefix="soak-"))
    data_home = Path(os.environ["XDG_DATA_HOME"])
    async with ModelServer() as server:
        soak = Soak(server, root)
        # warm-up: lazy imports, caches and seeds are not growth
        await echo_steps(soak, len(ECHO_FAULTS), 1)
        for kind in args.kinds:
            await real_steps(soak, kind, min(args.real, 1))  # one answer: its imports and seeds
        soak.outcomes.clear()
        soak.seconds.clear()
        soak.steps = 0
        soak.trend_every = max(1, (args.echo + args.real * len(args.kinds)) // 10)
        before = snapshot(data_home, server.port)
        started = time.monotonic()
        await echo_steps(soak, args.echo, args.concurrency)
        print(f"echo: {args.echo} steps in {time.monotonic() - started:.1f} s", flush=True)
        for kind in args.kinds:
            began = time.monotonic()
            await real_steps(soak, kind, args.real)
            print(f"{kind}: {args.real} steps in {time.monotonic() - began:.1f} s", flush=True)
        await anyio.sleep(0.5)  # a reaped process's entry leaves /proc a moment later
        after = snapshot(data_home, server.port)
    grew = report(before, after, soak, time.monotonic() - started)
    for line in grew:
        print(f"  grew: {line}")
    return 1 if args.check and (grew or soak.untyped) else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--echo", type=int, default=2000)
    parser.add_argument("--real", type=int, default=100)
    parser.add_argument("--kinds", default=",".join(DEFAULT_KINDS), help=f"of {','.join(KINDS)}")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    args.kinds = [kind for kind in args.kinds.split(",") if kind]
    for kind in args.kinds:
        if kind not in KINDS:
            parser.error(f"unknown kind {kind!r}: choose from {', '.join(KINDS)}")
    prepare_environ()
    # a temp dir of its own, so what other processes leave in /tmp does not count
    os.environ["TMPDIR"] = tempfile.mkdtemp(prefix="jigs-soak-tmp-")
    tempfile.tempdir = None
    sys.exit(anyio.run(main_async, args))


if __name__ == "__main__":
    main()
