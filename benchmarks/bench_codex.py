"""One Codex turn through jigs against the same turn by the raw CLI.

    uv run python benchmarks/bench_codex.py [--runs N]

jigs: ``create_agent_runner`` + ``generate_text`` + ``close`` (private home, ``codex app-server``,
initialize, thread/start, one turn). Raw: ``codex exec --json --skip-git-repo-check`` with stdin
closed, the same curated ``config.toml`` in a fresh ``CODEX_HOME`` and the same environment, read
to the end. Both use the CLI jigs resolves and the same local :class:`jigs_testing.ModelServer`,
alternating within one run. Prints each median, the median of the per-pair ratios (jigs / raw;
target at most 1.05), the raw median with a reused home (for reference), and the app server's
start time (launch to the ``initialize`` answer).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from _alternate import alternate, report

KEY_ENV = "JIGS_BENCH_CODEX_KEY"


async def app_server_start(exe: Path, env: dict[str, str], cwd: str) -> float:
    """Seconds from launching ``codex app-server`` to its ``initialize`` answer."""
    home = tempfile.mkdtemp(prefix="jigs-bench-codex-home-")
    try:
        started = time.perf_counter()
        async with await anyio.open_process(
            [str(exe), "app-server"],
            cwd=cwd,
            env=env | {"CODEX_HOME": home},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        ) as proc:
            assert proc.stdin is not None
            assert proc.stdout is not None
            init = {
                "id": 1,
                "method": "initialize",
                "params": {"clientInfo": {"name": "bench", "version": "0"}},
            }
            await proc.stdin.send((json.dumps(init) + "\n").encode())
            buffer = b""
            while b"\n" not in buffer:
                buffer += await proc.stdout.receive()
            elapsed = time.perf_counter() - started
            assert b'"id":1' in buffer.replace(b" ", b""), buffer[:200]
            proc.terminate()
        return elapsed
    finally:
        shutil.rmtree(home, ignore_errors=True)


async def main_async(runs: int) -> int:
    from jigs import RunMetadata, harnesses
    from jigs.env import build_env
    from jigs.models import generate_text
    from jigs.steps import create_agent_runner
    from jigs_harness_codex import CodexHarness
    from jigs_harness_codex._home import render_config
    from jigs_testing import ModelServer, text

    os.environ[KEY_ENV] = "sk-bench"
    exe = CodexHarness().resolve_executable(os.environ)
    version = (await anyio.run_process([str(exe.path), "--version"])).stdout.decode().strip()
    print(f"codex: {exe.path} ({exe.source}), {version}")
    async with ModelServer() as server:
        descriptor = harnesses.codex(
            model="bench-model",
            base_url=server.openai_base_url,
            api_key_env=KEY_ENV,
            max_retries=0,
        )
        config, _ = render_config(descriptor, os.environ)  # type: ignore[arg-type]
        with tempfile.TemporaryDirectory() as tree:
            await anyio.run_process(["git", "init", "-q", tree], check=True)
            env = build_env([KEY_ENV])
            reused_home = tempfile.mkdtemp(prefix="jigs-bench-codex-reused-")
            Path(reused_home, "config.toml").write_text(config)

            async def raw(*, fresh: bool = True) -> float:
                server.add(text("benchmark answer"))
                started = time.perf_counter()
                home = tempfile.mkdtemp(prefix="jigs-bench-codex-raw-") if fresh else reused_home
                try:
                    if fresh:
                        Path(home, "config.toml").write_text(config)
                    result = await anyio.run_process(
                        [str(exe.path), "exec", "--json", "--skip-git-repo-check", "say it"],
                        cwd=tree,
                        env=env | {"CODEX_HOME": home},
                        stdin=subprocess.DEVNULL,
                        check=False,
                    )
                finally:
                    if fresh:
                        shutil.rmtree(home, ignore_errors=True)
                elapsed = time.perf_counter() - started
                assert b'"turn.completed"' in result.stdout, (result.returncode, result.stderr)
                return elapsed

            async def jigs(i: int) -> float:
                server.add(text("benchmark answer"))
                started = time.perf_counter()
                async with create_agent_runner(
                    descriptor,
                    cwd=tree,
                    run=RunMetadata(workflow_run_id=f"bench-codex-{i}"),
                    agents_env=[],
                ) as runner:
                    result = await generate_text(runner.model, prompt="say it")
                elapsed = time.perf_counter() - started
                assert result.text == "benchmark answer", result.text
                return elapsed

            reused: list[float] = []
            starts: list[float] = []

            async def extra() -> None:
                reused.append(await raw(fresh=False))
                starts.append(await app_server_start(exe.path, env, tree))

            pairs = await alternate(raw, jigs, runs, each=extra)
            shutil.rmtree(reused_home, ignore_errors=True)

    def ms(values: list[float]) -> str:
        return f"median {statistics.median(values) * 1000:.1f} ms"

    report("raw codex exec --json turn (fresh home)", "jigs runner + generate + close", pairs)
    print(f"raw codex exec --json turn (reused home): {ms(reused)}")
    print(f"app server start (launch to initialize answer): {ms(starts)}")
    return 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    os.environ.setdefault("JIGS_DATA_DIR", tempfile.mkdtemp(prefix="jigs-bench-"))
    sys.exit(anyio.run(main_async, args.runs))


if __name__ == "__main__":
    main()
