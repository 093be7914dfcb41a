"""One Claude Code turn through jigs against the same turn by the raw CLI.

    uv run python benchmarks/bench_claude.py [--runs N]

jigs: ``create_agent_runner`` + ``generate_text`` + ``close``. Raw: ``claude -p ...
--output-format stream-json --verbose`` with the same policy flags and environment, started with
stdin closed and read to the end. Both use the CLI jigs resolves and the same local
:class:`jigs_testing.ModelServer`; they alternate within one run so machine noise hits both
alike. Prints each median, the median of the per-pair ratios (jigs / raw; target at most 1.05)
and the peak RSS of the Python process.
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
    report("raw claude -p stream-json turn", "jigs runner + generate + close", pairs)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"peak RSS of the Python process: {peak_kib / 1024:.1f} MiB")
    return 0


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
