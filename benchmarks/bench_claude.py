"""One Claude Code turn through jigs against the same turn by the raw CLI.

    uv run python benchmarks/bench_claude.py [--runs N]

jigs: ``create_agent_runner`` + ``generate_text`` + ``close``. Raw: ``claude -p ...
--output-format stream-json --verbose`` with the same policy flags and environment, started with
stdin closed and read to the end. Both use the CLI jigs resolves and the same local
:class:`jigs_testing.ModelServer`; they alternate within one run so machine noise hits both
alike. Prints each median, the median of the per-pair ratios (jigs / raw; target at most 1.05)
and peak RSS: of a worker (a fresh process in the release-wheels venv, as ``pip install
jigs-harness-claude`` gives a user, that runs five such steps and nothing else; target at most
40 MiB) and of this benchmark's own process (which also holds the model server and the raw side).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid

import anyio
from _alternate import alternate, report

KEY_ENV = "JIGS_BENCH_CLAUDE_KEY"


async def main_async(runs: int) -> int:
    from jigs import RunMetadata, harnesses
    from jigs.env import build_env
    from jigs.models import generate_text
    from jigs.steps import create_agent_runner
    from jigs_harness_claude import resolve_executable
    from jigs_testing import ModelServer, text

    os.environ[KEY_ENV] = "sk-bench"
    exe = resolve_executable(os.environ)
    version = (await anyio.run_process([str(exe.path), "--version"])).stdout.decode().strip()
    print(f"claude: {exe.path} ({exe.source}), {version}")
    async with ModelServer() as server:
        descriptor = harnesses.claude(base_url=server.anthropic_base_url, api_key_env=KEY_ENV)
        with tempfile.TemporaryDirectory() as tree:
            await anyio.run_process(["git", "init", "-q", tree], check=True)
            env = build_env(["IS_SANDBOX"]) | {
                "CLAUDE_CODE_ENTRYPOINT": "sdk-py",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "CLAUDE_CODE_MAX_RETRIES": "2",
                "ANTHROPIC_BASE_URL": server.anthropic_base_url,
                "ANTHROPIC_API_KEY": "sk-bench",
            }

            async def raw() -> float:
                server.add(text("benchmark answer"))
                argv = [
                    str(exe.path),
                    "-p",
                    "--output-format",
                    "stream-json",
                    "--verbose",
                    "--permission-mode",
                    "bypassPermissions",
                    "--strict-mcp-config",
                    "--mcp-config",
                    '{"mcpServers":{}}',
                    "--setting-sources",
                    "project",
                    "--session-id",
                    str(uuid.uuid4()),
                    "--",
                    "say something",
                ]
                started = time.perf_counter()
                result = await anyio.run_process(
                    argv, cwd=tree, env=env, stdin=subprocess.DEVNULL, check=False
                )
                elapsed = time.perf_counter() - started
                last = result.stdout.splitlines()[-1] if result.stdout else b""
                assert b'"subtype":"success"' in last, (result.returncode, last, result.stderr)
                return elapsed

            async def jigs(i: int) -> float:
                server.add(text("benchmark answer"))
                started = time.perf_counter()
                async with create_agent_runner(
                    descriptor,
                    cwd=tree,
                    run=RunMetadata(workflow_run_id=f"bench-claude-{i}"),
                    agents_env=["IS_SANDBOX"],
                ) as runner:
                    result = await generate_text(runner.model, prompt="say something")
                elapsed = time.perf_counter() - started
                assert result.text == "benchmark answer", result.text
                return elapsed

            pairs = await alternate(raw, jigs, runs)
            worker = await worker_rss(server, descriptor.to_data(), tree, steps=5)
    report("raw claude -p stream-json turn", "jigs runner + generate + close", pairs)
    print(f"peak RSS (VmHWM) of a worker (fresh process, release venv, 5 steps): {worker:.1f} MiB")
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        f"peak RSS of this benchmark's process (model server and raw side included): "
        f"{peak_kib / 1024:.1f} MiB"
    )
    return 0


#: A worker: ``steps`` warm Claude steps in one fresh process, then its own peak RSS (MiB): the
#: high-water mark of its own memory (``VmHWM``).
WORKER = """
import asyncio, json, sys
from jigs import RunMetadata, harnesses
from jigs.models import generate_text
from jigs.steps import create_agent_runner

descriptor, tree, steps = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])

async def main():
    for i in range(steps):
        async with create_agent_runner(
            harnesses.load(descriptor), cwd=tree,
            run=RunMetadata(workflow_run_id=f"bench-claude-worker-{i}"), agents_env=["IS_SANDBOX"],
        ) as runner:
            result = await generate_text(runner.model, prompt="say something")
        assert result.text == "benchmark answer", result.text

asyncio.run(main())
# VmHWM, not ru_maxrss: Linux keeps ru_maxrss across execve, so a child started with vfork
# reports its parent's peak (this benchmark's process, model server included)
with open("/proc/self/status") as status:
    peak = next(line for line in status if line.startswith("VmHWM:"))
print(int(peak.split()[1]) / 1024)
"""


async def worker_rss(server: object, descriptor: dict[str, object], tree: str, steps: int) -> float:
    """Peak RSS (MiB) of a worker process that runs ``steps`` steps and nothing else."""
    import json

    from _release_env import jigs_env
    from jigs_testing import text

    env = jigs_env("release")
    for _ in range(steps):
        server.add(text("benchmark answer"))  # type: ignore[attr-defined]
    done = await anyio.run_process(
        [env.python, "-c", WORKER, json.dumps(descriptor), tree, str(steps)],
        env=env.child_env(os.environ),
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the worker failed: {done.stderr.decode()[-2000:]}")
    return float(done.stdout.decode().split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    os.environ.setdefault("JIGS_DATA_DIR", tempfile.mkdtemp(prefix="jigs-bench-"))
    os.environ["HOME"] = tempfile.mkdtemp(prefix="jigs-bench-home-")  # transcripts go here
    if os.geteuid() == 0:
        os.environ["IS_SANDBOX"] = "1"  # Claude Code accepts exactly 1
    sys.exit(anyio.run(main_async, args.runs))


if __name__ == "__main__":
    main()
