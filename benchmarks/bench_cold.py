"""A cold step per kind: whole fresh processes, jigs against the raw CLI and the official SDKs.

    uv run python benchmarks/bench_cold.py [--runs N] [--kinds claude,codex,pi]
        [--env release|workspace]

(``--kinds opencode`` with ``--env workspace``: the release venv holds the other three kinds.)

Every sample is one whole process, started and read to its exit, against one loopback
:class:`jigs_testing.ModelServer` scripted with one answer per step:

- raw: the CLI the way people run it, with a reused home (``claude -p PROMPT``; ``codex exec``
  with a reused ``CODEX_HOME``; ``pi -p`` with a reused agent dir; ``opencode run`` with a reused
  ``HOME``), see ``_kinds.py``;
- jigs: a fresh ``python -c`` that runs one ``run_agent`` step, and (claude, codex) one
  ``create_agent_runner`` + ``generate_text`` step; with ``--env release`` (the default) in a
  venv holding only the release wheels of jigs-core and the three kinds, as ``pip install
  jigs-harness-claude`` gives a user, with ``--env workspace`` in the workspace's venv (every dev
  tool installed: ``import httpx`` there also imports its CLI, httpcore imports trio); see
  ``_release_env.py``;
- SDK: a fresh ``python -c`` that runs one ``claude_agent_sdk.query`` or one ``openai_codex``
  ``Codex().thread_start().run()``, each in its own venv under ``$JIGS_BENCH_CACHE`` or
  ``~/.cache/jigs-bench`` holding only that SDK (``claude-agent-sdk`` at the workspace's version;
  ``openai-codex`` pinned to the workspace's ``openai-codex-cli-bin`` version); with ``--env
  workspace`` the claude SDK runs in the workspace, as before.

All sides run the same CLI executable (the release venv's jigs resolves its own copies from the
same pinned wheels: the benchmark prints both paths and checks the bytes are the same). The sides
rotate their order every round so machine drift spreads over all of them. Python children run
with bytecode caches, as on a user's machine (the release venv's compiled ones; elsewhere see
``_pycache.py``: this machine sets ``PYTHONDONTWRITEBYTECODE=1``). Prints each side's median wall
time and CPU time (user + system of every process of the run, counted in a cgroup of its own where
the benchmark may make one, else of the tree it waited for; steadier than wall time on a loaded
machine), its ratio to raw, its overhead (median minus the raw median) and, per kind, jigs' overhead
divided by the SDK's (issue 30: at most 1/3 for claude and codex; it was 1/6) or, for Pi, jigs minus
raw (target at most +150 ms). A floor side (a fresh interpreter that imports anyio and runs the raw
CLI as a subprocess, no jigs) shows what any Python step pays, so the report also says how much of
each target is left for jigs' own work; then the outermost imports of one jigs
process by ``-X importtime``, so a heavy import on the step's path shows. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import _cgroup
import anyio
from _kinds import ANSWER, KINDS, PROMPT, Kind, prepare_environ, setup
from _pycache import cache_dir, describe, with_bytecode_cache
from _release_env import (
    ENVS,
    RELEASE_KINDS,
    PythonEnv,
    compare_clis,
    describe_env,
    jigs_env,
    uv_command,
)

#: The jigs children write this marker and three wall-clock stamps to stderr: started, top-level
#: imports done, step done (the parent adds spawn and exit).
PHASES = "jigs-bench-phases"

JIGS_RUN_AGENT = """
import time; T0 = time.time()
import asyncio, json, sys
from jigs import RunMetadata, harnesses
from jigs.steps import run_agent

kind, cwd, settings, agents_env, run_id = sys.argv[1:6]

async def main():
    result = await run_agent(
        harness=getattr(harnesses, kind)(**json.loads(settings)),
        cwd=cwd,
        prompt=PROMPT_LITERAL,
        run=RunMetadata(workflow_run_id=run_id),
        agents_env=json.loads(agents_env),
    )
    print(result.text)

T1 = time.time()
asyncio.run(main())
sys.stderr.write(f"{PHASES} {T0} {T1} {time.time()}\\n")
""".replace("PROMPT_LITERAL", repr(PROMPT)).replace("{PHASES}", PHASES)

JIGS_RUNNER = """
import time; T0 = time.time()
import asyncio, json, sys
from jigs import RunMetadata, harnesses
from jigs.models import generate_text
from jigs.steps import create_agent_runner

kind, cwd, settings, agents_env, run_id = sys.argv[1:6]

async def main():
    async with create_agent_runner(
        getattr(harnesses, kind)(**json.loads(settings)),
        cwd=cwd,
        run=RunMetadata(workflow_run_id=run_id),
        agents_env=json.loads(agents_env),
    ) as runner:
        result = await generate_text(runner.model, prompt=PROMPT_LITERAL)
    print(result.text)

T1 = time.time()
asyncio.run(main())
sys.stderr.write(f"{PHASES} {T0} {T1} {time.time()}\\n")
""".replace("PROMPT_LITERAL", repr(PROMPT)).replace("{PHASES}", PHASES)

#: The floor of any Python step that launches the CLI: a fresh interpreter that imports anyio,
#: starts an event loop and runs the raw CLI (same argv, env and reused home) as a subprocess.
FLOOR = """
import json, subprocess, sys
import anyio

async def main():
    done = await anyio.run_process(json.loads(sys.argv[1]), stdin=subprocess.DEVNULL, check=False)
    sys.stdout.buffer.write(done.stdout)
    sys.exit(done.returncode)

anyio.run(main)
"""

CLAUDE_SDK = """
import asyncio, sys
from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query

cwd, exe = sys.argv[1:3]

async def main():
    text = None
    options = ClaudeAgentOptions(cwd=cwd, cli_path=exe)
    async for message in query(prompt=PROMPT_LITERAL, options=options):
        if isinstance(message, ResultMessage):
            text = message.result
    print(text)

asyncio.run(main())
""".replace("PROMPT_LITERAL", repr(PROMPT)).replace("{PHASES}", PHASES)

CODEX_SDK = """
import sys
from openai_codex import Codex, CodexConfig

cwd, exe = sys.argv[1:3]
with Codex(CodexConfig(codex_bin=exe, cwd=cwd)) as codex:
    result = codex.thread_start(cwd=cwd).run(PROMPT_LITERAL)
print(result.final_response)
""".replace("PROMPT_LITERAL", repr(PROMPT)).replace("{PHASES}", PHASES)


@dataclass
class Side:
    label: str
    argv: Callable[[int], list[str]]
    env: dict[str, str]
    ok: Callable[[bytes], bool]
    samples: list[float] = field(default_factory=list)
    #: CPU seconds (user + system) of the process and the children it waited for.
    cpu: list[float] = field(default_factory=list)
    #: Per run, for the jigs sides: (interpreter start, top-level imports, step, exit) seconds.
    phases: list[tuple[float, float, float, float]] = field(default_factory=list)


FLOOR_LABEL = "floor: python + anyio.run_process(raw CLI)"


def sdk_python(distribution: str, version: str) -> tuple[str | None, str]:
    """The python of a venv holding only ``distribution==version`` (made on first use), or None
    and why not."""
    venv = cache_dir() / f"{distribution}-{version}"
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    if marker.exists() and python.exists():
        return str(python), f"{distribution} {version} in {venv}"
    uv = uv_command()
    try:
        subprocess.run(
            [*uv, "venv", "-q", "--python", sys.executable, str(venv)],
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [*uv, "pip", "install", "-q", "--python", str(python), f"{distribution}=={version}"],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        return None, f"could not install {distribution}=={version}: {exc} {detail.decode()[-300:]}"
    marker.write_text(version)
    return str(python), f"{distribution} {version} installed into {venv}"


def sides_for(
    kind: Kind, tree: str, env: PythonEnv, sdk_pythons: dict[str, str | None]
) -> list[Side]:
    py = env.python
    settings = json.dumps(kind.settings)
    agents_env = json.dumps(kind.agents_env)
    jigs_env = env.child_env(kind.jigs_env)
    sdk_env = with_bytecode_cache(kind.sdk_env)

    def says(out: bytes) -> bool:
        return out.strip().endswith(ANSWER.encode())

    def jigs(code: str, tag: str) -> Callable[[int], list[str]]:
        return lambda i: [py, "-c", code, kind.kind, tree, settings, agents_env, f"cold-{tag}-{i}"]

    floor = [py, "-c", FLOOR, json.dumps(kind.raw_argv)]
    sides = [
        Side(f"raw {kind.kind} (reused home)", lambda i: kind.raw_argv, kind.raw_env, kind.raw_ok),
        Side("jigs run_agent (fresh python)", jigs(JIGS_RUN_AGENT, "run"), jigs_env, says),
        Side(FLOOR_LABEL, lambda i: floor, env.child_env(kind.raw_env), kind.raw_ok),
    ]
    if kind.kind in ("claude", "codex"):
        sides.append(Side("jigs runner + generate_text", jigs(JIGS_RUNNER, "gen"), jigs_env, says))
    claude_python = sdk_pythons.get("claude")
    if kind.kind == "claude" and claude_python is not None:
        claude = [claude_python, "-c", CLAUDE_SDK, tree, kind.exe]
        label = "claude_agent_sdk.query (fresh python)"
        sides.append(Side(label, lambda i: claude, sdk_env, says))
    codex_python = sdk_pythons.get("codex")
    if kind.kind == "codex" and codex_python is not None:
        codex = [codex_python, "-c", CODEX_SDK, tree, kind.exe]
        label = "openai_codex thread.run (fresh python)"
        sides.append(Side(label, lambda i: codex, sdk_env, says))
    return sides


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def timed(
    side: Side, i: int, tree: str, server: object, *, argv: list[str] | None = None
) -> tuple[float, float, bytes]:
    """Wall and CPU seconds of one whole run, and its stderr. The CPU is every process of the
    run, counted in a cgroup of its own where this process may make one (:mod:`_cgroup`), else
    the growth of this process's reaped-children usage (one run at a time)."""
    from jigs_testing import text

    server.add(text(ANSWER))  # type: ignore[attr-defined]
    command = argv or side.argv(i)
    group = _cgroup.CpuGroup(f"{i}-{time.monotonic_ns()}") if _cgroup.available() else None
    cpu = children_cpu()
    spawned = time.time()
    started = time.perf_counter()
    result = await anyio.run_process(
        group.wrap(command) if group else command,
        cwd=tree,
        env=side.env,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    elapsed = time.perf_counter() - started
    cpu = children_cpu() - cpu
    exited = time.time()
    if group is not None:  # every process of the run, those that died in a namespace too
        await anyio.sleep(0.1)  # a namespace's last processes die just after the run's own
        cpu = group.seconds()
        group.remove()
    if result.returncode != 0 or not side.ok(result.stdout):
        raise SystemExit(
            f"{side.label} failed (exit {result.returncode}):\n"
            f"stdout: {result.stdout.decode(errors='replace')[-600:]}\n"
            f"stderr: {result.stderr.decode(errors='replace')[-1500:]}"
        )
    for line in result.stderr.decode(errors="replace").splitlines():
        if line.startswith(PHASES):
            t0, t1, t2 = (float(x) for x in line.split()[1:4])
            side.phases.append((t0 - spawned, t1 - t0, t2 - t1, exited - t2))
    return elapsed, cpu, result.stderr


def top_imports(stderr: bytes, top: int) -> list[str]:
    """The ``top`` outermost imports by cumulative time in ``-X importtime`` output."""
    rows = []
    for line in stderr.decode(errors="replace").splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        _, cumulative, name = line.removeprefix("import time:").split("|", 2)
        if not name[1:].startswith(" "):  # depth 0: imported by the step's own code
            rows.append((int(cumulative), name.strip()))
    rows.sort(reverse=True)
    return [f"{us / 1000:6.0f} ms  {name}" for us, name in rows[:top]]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.0f} ms"


def report(kind: str, sides: list[Side], runs: int, sdk_note: str | None, env: str) -> None:
    raw = statistics.median(sides[0].samples)
    raw_cpu = statistics.median(sides[0].cpu)
    print(
        f"\n{kind}: medians of {runs} alternated runs, each a whole process (wall; CPU); "
        f"jigs sides in the {env} venv"
    )
    width = max(len(s.label) for s in sides)
    overheads: dict[str, float] = {}
    cpu_overheads: dict[str, float] = {}
    for side in sides:
        med, cpu = statistics.median(side.samples), statistics.median(side.cpu)
        ratios = [s / r for s, r in zip(side.samples, sides[0].samples, strict=True)]
        line = f"  {side.label:<{width}} {ms(med)}; CPU {ms(cpu)}"
        if side is not sides[0]:
            overheads[side.label] = med - raw
            cpu_overheads[side.label] = cpu - raw_cpu
            over = (med - raw) * 1000
            line += f"  {statistics.median(ratios):5.2f}x raw  overhead {over:+6.0f} ms"
        print(line)
    for side in sides:
        if side.phases:
            start, imports, step, end = (
                statistics.median(p[k] for p in side.phases) for k in range(4)
            )
            print(
                f"  {side.label.split(' (')[0]} phases: interpreter start {start * 1000:.0f} ms, "
                f"top-level imports {imports * 1000:.0f} ms, step {step * 1000:.0f} ms "
                f"(lazy imports included), exit {end * 1000:.0f} ms"
            )
    if sdk_note:
        print(f"  ({sdk_note})")
    floor = overheads.pop(FLOOR_LABEL)
    cpu_overheads.pop(FLOOR_LABEL)
    jigs_over = overheads["jigs run_agent (fresh python)"]
    print(
        f"  floor (no jigs: interpreter, anyio, event loop, subprocess) {floor * 1000:+.0f} ms "
        f"over raw; jigs run_agent over the floor {(jigs_over - floor) * 1000:+.0f} ms"
    )
    sdk = [label for label in overheads if not label.startswith("jigs")]
    if kind == "pi":
        print(
            f"  Pi: jigs - raw = {jigs_over * 1000:+.0f} ms (target <= +150 ms: at most "
            f"{(0.150 - floor) * 1000:+.0f} ms over the floor)"
        )
        return
    if not sdk:
        print("  no SDK side: jigs overhead / SDK overhead not measured")
        return
    sdk_over, sdk_cpu = overheads[sdk[0]], cpu_overheads[sdk[0]]
    for label, over in overheads.items():
        if label.startswith("jigs"):
            print(
                f"  jigs overhead / SDK overhead ({label.split(' (')[0]}): "
                f"{over / sdk_over:.3f} (target <= 1/3 = 0.333); "
                f"in CPU time {cpu_overheads[label] / sdk_cpu:.3f}"
            )
    print(
        f"  the floor alone / SDK overhead: {floor / sdk_over:.3f} (so 1/3 leaves jigs "
        f"{(sdk_over / 3 - floor) * 1000:+.0f} ms over the floor)"
    )


async def bench_kind(
    kind_name: str,
    runs: int,
    root: Path,
    *,
    env: PythonEnv,
    sdk_pythons: dict[str, str | None],
    top: int,
) -> tuple[list[Side], list[str]]:
    from jigs_testing import ModelServer

    async with ModelServer() as server:
        kind_root = root / kind_name
        tree = kind_root / "tree"
        tree.mkdir(parents=True)
        await anyio.run_process(["git", "init", "-q", str(tree)], check=True)
        kind = setup(kind_name, server, kind_root)
        try:
            sides = sides_for(kind, str(tree), env, sdk_pythons)
            for side in sides:  # warm-up: page cache, first-run files in the reused homes
                await timed(side, -1, str(tree), server)
            for i in range(runs):
                shift = i % len(sides)
                order = sides[shift:] + sides[:shift]
                if (i // len(sides)) % 2:
                    order.reverse()
                for side in order:
                    elapsed, cpu, _ = await timed(side, i, str(tree), server)
                    side.samples.append(elapsed)
                    side.cpu.append(cpu)
            jigs = sides[1]
            argv = jigs.argv(runs)
            argv[1:1] = ["-X", "importtime"]
            _, _, stderr = await timed(jigs, runs, str(tree), server, argv=argv)
        finally:
            kind.remove()
    return sides, top_imports(stderr, top)


def uptime() -> str:
    try:
        return subprocess.run(
            ["uptime"], check=False, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        return f"load average {os.getloadavg()}"


async def main_async(
    kinds: list[str], runs: int, codex_sdk_version: str, top: int, env_name: str
) -> int:
    env = jigs_env(env_name)
    for line in describe_env(env):
        print(line)
    for line in compare_clis(env):
        print(line)
    print(f"  pi CLI for every side: JIGS_PI_EXECUTABLE={os.environ['JIGS_PI_EXECUTABLE']}")
    sdk_pythons: dict[str, str | None] = {}
    notes: dict[str, str | None] = {}
    if "codex" in kinds:
        sdk_pythons["codex"], notes["codex"] = sdk_python("openai-codex", codex_sdk_version)
        print(f"codex SDK side runs in: {notes['codex']}")
    if "claude" in kinds:
        claude_version = importlib.metadata.version("claude-agent-sdk")
        if env_name == "release":
            sdk_pythons["claude"], notes["claude"] = sdk_python("claude-agent-sdk", claude_version)
        else:
            sdk_pythons["claude"] = sys.executable
            notes["claude"] = f"claude-agent-sdk {claude_version} in workspace venv {sys.prefix}"
        print(f"claude SDK side runs in: {notes['claude']}")
    print(describe())
    print(f"before: {uptime()}")
    results = []
    with tempfile.TemporaryDirectory(prefix="jigs-bench-cold-") as tmp:
        for kind in kinds:
            started = time.perf_counter()
            sides, imports = await bench_kind(
                kind, runs, Path(tmp), env=env, sdk_pythons=sdk_pythons, top=top
            )
            results.append((kind, sides, imports, time.perf_counter() - started))
    for kind, sides, imports, seconds in results:
        report(kind, sides, runs, notes.get(kind), env.name)
        print(f"  outermost imports of one jigs run_agent process (-X importtime, top {top}):")
        for line in imports:
            print(f"    {line}")
        print(f"  ({seconds:.0f} s for this kind)")
    print(f"\nafter: {uptime()}")
    return 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--kinds",
        default="",
        help=f"comma-separated kinds (default: {','.join(RELEASE_KINDS)}; with --env workspace, "
        f"{','.join(KINDS)})",
    )
    parser.add_argument(
        "--codex-sdk-version",
        default=importlib.metadata.version("openai-codex-cli-bin"),
        help="openai-codex version for the SDK side (default: the workspace's CLI version)",
    )
    parser.add_argument("--top", type=int, default=8, help="import-time entries per kind")
    parser.add_argument(
        "--env",
        choices=ENVS,
        default="release",
        help="where jigs' side runs: a venv of the release wheels only (default) or the workspace",
    )
    args = parser.parse_args()
    known = KINDS if args.env == "workspace" else RELEASE_KINDS
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()] or list(known)
    for kind in kinds:
        if kind not in known:
            parser.error(f"kind {kind!r} with --env {args.env}: choose from {', '.join(known)}")
    prepare_environ()
    sys.exit(anyio.run(main_async, kinds, args.runs, args.codex_sdk_version, args.top, args.env))


if __name__ == "__main__":
    main()
