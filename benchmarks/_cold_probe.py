"""Where a cold step's time goes: one step in a fresh process, as a timeline, next to the raw CLI.

    uv run python benchmarks/_cold_probe.py --kind claude|codex|pi [--runs N] [--timeline]
        [--env release|workspace]

Each run starts a fresh Python process that imports jigs, runs one step (claude:
``create_agent_runner`` + ``generate_text`` + close; codex and pi: ``run_agent``) against a loopback
:class:`jigs_testing.ModelServer` in this process, and prints its stages (from jigs' structlog
events, plus the first byte the CLI wrote) as milliseconds since this process spawned it. The raw
CLI runs the same turn with the same flags it always runs with and a reused home. Both sides are
whole processes and alternate. A probe for the ``cold`` work of issue 18; ``bench`` owns the
real benchmark.
"""

from __future__ import annotations

import time

_STARTED = (time.time(), time.process_time())  # before anything else this file imports

import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

KEY_ENV = "JIGS_BENCH_COLD_KEY"


# ------------------------------------------------------------------ the child (one jigs step)


def child(kind: str, url: str, tree: str, t0: float) -> None:
    marks: list[tuple[str, float, float]] = [("interpreter up", *_STARTED)]
    import uuid

    import anyio
    from jigs import RunMetadata, harnesses
    from jigs.models import generate_text
    from jigs.steps import create_agent_runner, run_agent

    if os.environ.get("PROBE_PRE"):
        __import__(os.environ["PROBE_PRE"])

    marks.append(("imports done", time.time(), time.process_time()))

    # jigs' events, caught by a structlog processor (KeyValueRenderer: the console renderer
    # would import rich where it is installed, a cost no plain step pays)
    import structlog
    from jigs.processes import ManagedProcess

    def record(logger: Any, method: str, event_dict: Any) -> Any:
        now, cpu = time.time(), time.process_time()
        label = str(event_dict.get("event"))
        seconds = event_dict.get("seconds")
        if isinstance(seconds, float) and not label.startswith("turn."):
            marks.append((f"{label} (start)", now - seconds, math.nan))
        marks.append((label, now, cpu))
        if method in ("debug", "info"):
            raise structlog.DropEvent
        return event_dict

    structlog.configure(processors=[record, structlog.processors.KeyValueRenderer()])

    original = ManagedProcess.read_line
    first: list[float] = []

    async def read_line(self: ManagedProcess) -> bytes | None:
        line = await original(self)
        if not first:
            first.append(time.time())
            marks.append(("first line from CLI", first[0], time.process_time()))
            _thread_cpu(marks, first[0])
        return line

    ManagedProcess.read_line = read_line  # type: ignore[method-assign]

    async def step() -> None:
        run = RunMetadata(workflow_run_id=f"cold-{uuid.uuid4().hex[:8]}")
        if kind == "claude":
            descriptor = harnesses.claude(base_url=url, api_key_env=KEY_ENV)
            async with create_agent_runner(
                descriptor, cwd=tree, run=run, agents_env=["IS_SANDBOX"]
            ) as runner:
                result = await generate_text(runner.model, prompt="say something")
                marks.append(("turn done", time.time(), time.process_time()))
            text = result.text
        elif kind == "codex":
            descriptor = harnesses.codex(
                model="fake-model", base_url=url, api_key_env=KEY_ENV, max_retries=0
            )
            text = (
                await run_agent(
                    harness=descriptor, cwd=tree, prompt="say something", run=run, agents_env=[]
                )
            ).text
        else:
            descriptor = harnesses.pi(
                model={
                    "type": "openai-compatible",
                    "name": "local",
                    "base_url": url,
                    "model": "fake-model",
                    "api_key_env": KEY_ENV,
                }
            )
            text = (
                await run_agent(
                    harness=descriptor, cwd=tree, prompt="say something", run=run, agents_env=[]
                )
            ).text
        marks.append(("close done", time.time(), time.process_time()))
        assert text == "cold answer", text

    if os.environ.get("PROBE_PROFILE"):  # CPU of the main thread by function, to stderr
        import cProfile
        import pstats

        timer = time.perf_counter if os.environ.get("PROBE_TIMER") == "wall" else time.thread_time
        profile = cProfile.Profile(timer)
        profile.runcall(anyio.run, step)
        main_cpu = time.thread_time()
        if os.environ.get("PROBE_DUMP"):  # for pstats' callers / callees views
            profile.dump_stats(os.environ["PROBE_DUMP"])
        stats = pstats.Stats(profile, stream=sys.stderr)
        stats.sort_stats(os.environ["PROBE_PROFILE"]).print_stats(
            os.environ.get("PROBE_FILTER", ""), 40
        )
        print(
            f"main thread CPU {main_cpu * 1000:.0f} ms, process CPU "
            f"{time.process_time() * 1000:.0f} ms",
            file=sys.stderr,
        )
    else:
        anyio.run(step)
    import resource

    cli = resource.getrusage(resource.RUSAGE_CHILDREN)
    marks.append(("exit (cpu: the CLI tree's)", time.time(), cli.ru_utime + cli.ru_stime))
    print(json.dumps([(n, round((at - t0) * 1000, 1), round(c * 1000, 1)) for n, at, c in marks]))
    sys.stdout.flush()
    if os.environ.get("PROBE_EXIT") == "hard":  # how long the interpreter's shutdown takes
        os._exit(0)
    if os.environ.get("PROBE_EXIT") == "freeze":  # ... and how much of it is the cyclic GC
        import gc

        gc.freeze()


def _thread_cpu(marks: list[tuple[str, float, float]], at: float) -> None:
    """One mark per live thread of this process: its CPU so far (what competes with the CLI)."""
    import threading

    for thread in threading.enumerate():
        if thread.ident is None:
            continue
        try:
            used = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
        except (OSError, AttributeError):
            continue
        marks.append((f"  CPU of thread {thread.name.split('-')[0]}", at, used))


# ------------------------------------------------------------------ the parent


async def main_async(
    kind: str, runs: int, show: bool, bytecode: str, versus: list[str], *, python: str
) -> None:
    import resource
    import statistics
    import subprocess
    import tempfile
    import uuid

    import anyio
    from jigs.env import build_env
    from jigs_testing import ModelServer, text

    os.environ[KEY_ENV] = "sk-cold"
    timelines: list[list[tuple[str, float, float]]] = []
    jigs_times: list[float] = []
    raw_times: list[float] = []
    variant_times: list[float] = []
    variant_spans: list[float] = []
    variant_launched: list[float] = []
    floor_times: list[float] = []
    cpu: dict[str, list[float]] = {"jigs": [], "raw": []}

    def used() -> float:
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return children.ru_utime + children.ru_stime

    async with ModelServer() as server:
        url = server.anthropic_base_url if kind == "claude" else server.openai_base_url
        tree = tempfile.mkdtemp(prefix="jigs-cold-tree-")
        await anyio.run_process(["git", "init", "-q", tree], check=True)
        raw_argv, raw_env = _raw(kind, url, tree, build_env)
        # as installed packages run: with their bytecode (pip compiles it at install time; this
        # sandbox sets PYTHONDONTWRITEBYTECODE, which makes every import compile from source)
        child_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        if bytecode == "off":
            child_env["PYTHONDONTWRITEBYTECODE"] = "1"

        variant_env = dict(child_env)
        for assignment in versus:
            name, _, value = assignment.partition("=")
            variant_env[name] = value

        async def jigs(variant: bool = False) -> float:
            server.add(text("cold answer"))
            before = used()
            t0 = time.time()
            result = await anyio.run_process(
                [python, __file__, "--child", kind, url, tree, repr(t0)],
                env=variant_env if variant else child_env,
                check=False,
            )
            elapsed = time.time() - t0
            if result.returncode != 0:
                raise SystemExit(result.stderr.decode()[-3000:])
            if variant:
                variant_times.append(elapsed)
                variant_timeline = json.loads(result.stdout.splitlines()[-1])
                variant_spans.append(_cli_span(variant_timeline))
                variant_launched.append(_at(variant_timeline, "turn.launched"))
                return elapsed
            cpu["jigs"].append(used() - before)
            timelines.append(json.loads(result.stdout.splitlines()[-1]))
            return elapsed

        async def floor() -> float:
            # the interpreter alone: `python -c pass` in the same conditions as the jigs side
            t0 = time.time()
            await anyio.run_process([python, "-c", "pass"], env=child_env, check=True)
            return time.time() - t0

        async def raw() -> float:
            server.add(text("cold answer"))
            argv = [*raw_argv]
            if "SESSION" in argv:  # codex exec names no session
                argv[argv.index("SESSION")] = str(uuid.uuid4())
            before = used()
            t0 = time.time()
            result = await anyio.run_process(
                argv, cwd=tree, env=raw_env, stdin=subprocess.DEVNULL, check=False
            )
            elapsed = time.time() - t0
            cpu["raw"].append(used() - before)
            assert b"cold answer" in result.stdout, (result.returncode, result.stderr[-2000:])
            return elapsed

        await raw()
        await jigs()
        timelines.clear()
        cpu["jigs"].clear()
        cpu["raw"].clear()
        for i in range(runs):
            sides = ["raw", "jigs", "floor", *(["variant"] if versus else [])]
            for side in sides if i % 2 == 0 else reversed(sides):
                if side == "floor":
                    floor_times.append(await floor())
                elif side == "raw":
                    raw_times.append(await raw())
                elif side == "jigs":
                    jigs_times.append(await jigs())
                else:
                    await jigs(variant=True)
    _print(kind, timelines, jigs_times, raw_times, show)
    print(f"python -c pass:      median {statistics.median(floor_times) * 1000:.0f} ms")
    jc, rc = statistics.median(cpu["jigs"]), statistics.median(cpu["raw"])
    print(f"CPU of the whole process tree: jigs {jc * 1000:.0f} ms, raw {rc * 1000:.0f} ms")
    if versus:
        vm, jm = statistics.median(variant_times), statistics.median(jigs_times)
        diffs = [v - j for v, j in zip(variant_times, jigs_times, strict=True)]
        print(
            f"jigs with {' '.join(versus)}: median {vm * 1000:.0f} ms ({(vm - jm) * 1000:+.0f} ms; "
            f"median pair difference {statistics.median(diffs) * 1000:+.0f} ms)"
        )
        print(
            f"  its CLI span (launch to turn finished): {statistics.median(variant_spans):.0f} ms"
        )
        launched = statistics.median(_at(t, "turn.launched") for t in timelines)
        print(
            f"  its turn.launched at {statistics.median(variant_launched):.0f} ms "
            f"(plain jigs: {launched:.0f} ms)"
        )
    print(f"load average: {os.getloadavg()}")


def _raw(kind: str, url: str, tree: str, build_env: Any) -> tuple[list[str], dict[str, str]]:
    import tempfile

    if kind == "claude":
        from jigs_harness_claude import resolve_executable

        exe = resolve_executable(os.environ)
        env = build_env(["IS_SANDBOX"]) | {
            "CLAUDE_CODE_ENTRYPOINT": "sdk-py",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_MAX_RETRIES": "2",
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": "sk-cold",
        }
        argv = [str(exe.path), "-p", "--output-format", "stream-json", "--verbose"]
        argv += ["--permission-mode", "bypassPermissions", "--strict-mcp-config"]
        argv += ["--mcp-config", '{"mcpServers":{}}', "--setting-sources", ""]
        return [*argv, "--session-id", "SESSION", "--", "say something"], env
    if kind == "codex":  # `codex exec` with a reused home holding the config jigs writes
        from jigs import harnesses
        from jigs_harness_codex import CodexHarness
        from jigs_harness_codex._home import render_config

        exe = CodexHarness().resolve_executable(os.environ)
        descriptor = harnesses.codex(
            model="fake-model", base_url=url, api_key_env=KEY_ENV, max_retries=0
        )
        codex_home = tempfile.mkdtemp(prefix="jigs-cold-codex-home-")
        config, _ = render_config(descriptor, os.environ)  # type: ignore[arg-type]
        Path(codex_home, "config.toml").write_text(config)
        env = build_env([KEY_ENV]) | {"CODEX_HOME": codex_home}
        return [str(exe.path), "exec", "--json", "--skip-git-repo-check", "say something"], env
    from jigs import harnesses
    from jigs_harness_pi import resolve_pi
    from jigs_harness_pi._home import PiHome, model_flag

    pi = resolve_pi(os.environ)
    descriptor = harnesses.pi(
        model={
            "type": "openai-compatible",
            "name": "local",
            "base_url": url,
            "model": "fake-model",
            "api_key_env": KEY_ENV,
        }
    )
    home = PiHome(descriptor)  # type: ignore[arg-type]  # reused by every raw run
    sessions = tempfile.mkdtemp(prefix="jigs-cold-pi-sessions-")
    env = build_env([KEY_ENV]) | {
        "PI_CODING_AGENT_DIR": str(home.path),
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
        "PI_TELEMETRY": "0",
    }
    argv = [*pi.argv, "--mode", "json", "--model", model_flag(descriptor)]  # type: ignore[arg-type]
    argv += ["--session-dir", sessions, "--session-id", "SESSION"]
    argv += ["-ne", "-ns", "-np", "--no-themes", "-na", "--no-mcp", "-nc", "--", "say something"]
    return argv, env


def _at(timeline: list[tuple[str, float, float]], name: str) -> float:
    return next((ms for n, ms, _ in timeline if n == name), math.nan)


def _cli_span(timeline: list[tuple[str, float, float]]) -> float:
    at = {name: ms for name, ms, _ in timeline}
    return at["turn.finished"] - at["process.launched (start)"]


def _print(
    kind: str,
    timelines: list[list[tuple[str, float, float]]],
    jigs_times: list[float],
    raw_times: list[float],
    show: bool,
) -> None:
    import statistics

    names: list[str] = []
    values: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    for timeline in timelines:
        for name, ms, cpu in timeline:
            if name not in values:
                names.append(name)
                values[name], cpus[name] = [], []
            values[name].append(ms)
            if not math.isnan(cpu):
                cpus[name].append(cpu)
    print(f"{kind}: medians over {len(timelines)} fresh processes, ms")
    print(f"  {'wall since spawn':>16}  {'CPU of python':>13}  stage")
    for name in sorted(names, key=lambda n: statistics.median(values[n])):
        shown = f"{statistics.median(cpus[name]):13.1f}" if cpus[name] else " " * 13
        print(f"  {statistics.median(values[name]):16.1f}  {shown}  {name}")
    if show:
        for timeline in timelines:
            print("  ", timeline)
    spans = [_cli_span(timeline) for timeline in timelines]
    print(
        f"CLI span under jigs (launch to turn finished): median {statistics.median(spans):.0f} ms"
    )
    jm, rm = statistics.median(jigs_times), statistics.median(raw_times)
    ratios = [j - r for j, r in zip(jigs_times, raw_times, strict=True)]
    print(f"jigs fresh process: median {jm * 1000:.0f} ms")
    print(f"raw {kind} CLI:      median {rm * 1000:.0f} ms")
    print(f"overhead (median of pair differences): {statistics.median(ratios) * 1000:+.0f} ms")


def main() -> None:
    import argparse
    import functools
    import tempfile

    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, url, tree, t0 = sys.argv[2:6]
        child(kind, url, tree, float(t0))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--kind", choices=["claude", "codex", "pi"], required=True)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--timeline", action="store_true", help="print every run's timeline")
    parser.add_argument(
        "--bytecode",
        choices=["on", "off"],
        default="on",
        help="off: the jigs process compiles every module from source (PYTHONDONTWRITEBYTECODE)",
    )
    parser.add_argument(
        "--vs",
        nargs="*",
        default=[],
        metavar="NAME=VALUE",
        help="also run jigs with these variables set (alternated; compared with plain jigs)",
    )
    parser.add_argument(
        "--env",
        choices=["release", "workspace"],
        default="release",
        help="where the jigs child runs: the release-wheels venv (as bench_cold) or the workspace",
    )
    args = parser.parse_args()
    from _release_env import jigs_env

    python = jigs_env(args.env)
    print(python.note)
    if args.kind == "pi":
        from jigs_harness_pi import resolve_pi

        # the Pi `jigs install pi` put in the real data dir, before switching to a scratch one
        os.environ.setdefault("JIGS_PI_EXECUTABLE", str(resolve_pi(os.environ).path))
    # a scratch HOME (and so data dir): the step finds its data dir the way a user's step does
    for name in ("JIGS_DATA_DIR", "XDG_DATA_HOME"):
        os.environ.pop(name, None)
    os.environ["HOME"] = tempfile.mkdtemp(prefix="jigs-cold-home-")
    if os.geteuid() == 0:
        os.environ["IS_SANDBOX"] = "1"
    import anyio

    anyio.run(
        functools.partial(main_async, python=python.python),
        args.kind,
        args.runs,
        args.timeline,
        args.bytecode,
        args.vs,
    )
    Path(os.environ["HOME"]).exists()


if __name__ == "__main__":
    main()
