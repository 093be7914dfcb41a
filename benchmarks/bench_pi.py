"""One ``run_agent`` turn on Pi against the raw ``pi --mode json`` doing the same turn.

    uv run python benchmarks/bench_pi.py [--runs N]

Both talk to the same local :class:`jigs_testing.ModelServer` and run the same Pi (the one jigs
resolves: ``$JIGS_PI_EXECUTABLE``, ``pi`` on PATH, or ``jigs install pi``) on the same Node, with
the same flags and an equivalent private agent dir. The two are alternated within one run, so
machine noise hits both alike. Prints each median and the median of the per-pair ratios
(jigs / raw; the target is at most 1.05).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import anyio
from _alternate import alternate, report

KEY_ENV = "JIGS_BENCH_PI_KEY"


async def main_async(runs: int) -> int:
    from jigs import RunMetadata, harnesses
    from jigs.env import build_env
    from jigs.steps import run_agent
    from jigs_harness_pi import resolve_pi
    from jigs_harness_pi._home import PiHome, model_flag
    from jigs_testing import ModelServer, text

    os.environ[KEY_ENV] = "sk-bench"
    pi = resolve_pi(os.environ)
    print(f"pi: {pi.path} ({pi.source}), version {pi.version}, argv {pi.argv[0]}")
    async with ModelServer() as server:
        descriptor = harnesses.pi(
            model={
                "type": "openai-compatible",
                "name": "local",
                "base_url": server.openai_base_url,
                "model": "fake-model",
                "api_key_env": KEY_ENV,
            }
        )
        raw_home = PiHome(descriptor)  # type: ignore[arg-type]
        raw_sessions = Path(tempfile.mkdtemp(prefix="jigs-bench-pi-sessions-"))
        with tempfile.TemporaryDirectory() as tree:
            await anyio.run_process(["git", "init", "-q", tree], check=True)
            env = build_env([KEY_ENV]) | {
                "PI_CODING_AGENT_DIR": str(raw_home.path),
                "PI_OFFLINE": "1",
                "PI_SKIP_VERSION_CHECK": "1",
                "PI_TELEMETRY": "0",
            }

            async def raw() -> float:
                server.add(text("benchmark answer"))
                argv = [
                    *pi.argv,
                    "--mode",
                    "json",
                    "--model",
                    model_flag(descriptor),  # type: ignore[arg-type]
                    "--session-dir",
                    str(raw_sessions),
                    "--session-id",
                    str(uuid.uuid4()),
                    "-ne",
                    "-ns",
                    "-np",
                    "--no-themes",
                    "-na",
                    "--no-mcp",
                    "-nc",
                    "--",
                    "say something",
                ]
                started = time.perf_counter()
                result = await anyio.run_process(
                    argv, cwd=tree, env=env, stdin=subprocess.DEVNULL, check=True
                )
                elapsed = time.perf_counter() - started
                last = json.loads(result.stdout.splitlines()[-1])
                assert last["type"] == "agent_settled", last
                return elapsed

            async def jigs(i: int) -> float:
                server.add(text("benchmark answer"))
                started = time.perf_counter()
                result = await run_agent(
                    harness=descriptor,
                    cwd=tree,
                    prompt="say something",
                    run=RunMetadata(workflow_run_id=f"bench-pi-{i}"),
                    agents_env=[],
                )
                elapsed = time.perf_counter() - started
                assert result.text == "benchmark answer", result.text
                return elapsed

            pairs = await alternate(raw, jigs, runs)
        raw_home.remove()
    report("raw pi --mode json turn", "jigs run_agent turn", pairs)
    return 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    from jigs_harness_pi import resolve_pi

    # find the Pi `jigs install pi` put in the real data dir before switching to a scratch one
    os.environ.setdefault("JIGS_PI_EXECUTABLE", str(resolve_pi(os.environ).path))
    os.environ.setdefault("JIGS_DATA_DIR", tempfile.mkdtemp(prefix="jigs-bench-"))
    sys.exit(anyio.run(main_async, args.runs))


if __name__ == "__main__":
    main()
