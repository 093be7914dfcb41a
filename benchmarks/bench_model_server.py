"""Throughput of the scripted model server: streamed ~1 KB replies over loopback.

    python benchmarks/bench_model_server.py [--requests 2000] [--concurrency 16] [--seconds 20]

Starts ``jigs model-server`` in a subprocess (so client and server do not share a GIL) with one
~1 KB text reply per request, then sends streamed Anthropic Messages and OpenAI Responses
requests from a bounded pool of concurrent httpx clients on 127.0.0.1. Each format stops after
``--requests`` requests or ``--seconds`` seconds, whichever comes first. Prints requests per
second and latency; it checks that every stream reached its terminal event, and prints numbers,
not a verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx

SRC = Path(__file__).resolve().parents[1] / "core" / "src"
REPLY = ("The fake model streams this sentence as part of a one kilobyte reply. " * 15)[:1024]

FORMATS = {
    "anthropic": (
        "/v1/messages",
        {"model": "fake-model", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
        b"event: message_stop",
    ),
    "responses": (
        "/v1/responses",
        {"model": "fake-model", "input": "hi"},
        b"event: response.completed",
    ),
}


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process (Linux ``/proc``; ``None`` elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(replies: int) -> tuple[subprocess.Popen[str], str, Path]:
    script = Path(tempfile.mkdtemp(prefix="jigs-bench-ms-")) / "script.json"
    script.write_text(json.dumps([{"text": REPLY}] * replies))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    process = subprocess.Popen(
        [sys.executable, "-m", "jigs_testing._server.cli", "--script", str(script)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    if not url.startswith("http://"):
        process.kill()
        raise SystemExit(f"the model server did not start (got {url!r})")
    return process, url, script


async def run_format(
    url: str, name: str, requests: int, concurrency: int, seconds: float
) -> dict[str, float]:
    path, body, terminal = FORMATS[name]
    payload = {**body, "stream": True}
    latencies: list[float] = []
    failures = 0
    issued = 0
    deadline = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as client:
        # one warm-up request per connection slot
        for _ in range(concurrency):
            await client.post(path, json=payload)

        async def worker() -> None:
            nonlocal issued, failures
            while issued < requests and time.perf_counter() < deadline:
                issued += 1
                started = time.perf_counter()
                response = await client.post(path, json=payload)
                latencies.append(time.perf_counter() - started)
                if response.status_code != 200 or terminal not in response.content:
                    failures += 1

        started = time.perf_counter()
        async with anyio.create_task_group() as group:
            for _ in range(concurrency):
                group.start_soon(worker)
        elapsed = time.perf_counter() - started

    ordered = sorted(latencies)
    return {
        "requests": len(latencies),
        "failures": failures,
        "seconds": elapsed,
        "rps": len(latencies) / elapsed if elapsed else 0.0,
        "mean_ms": statistics.fmean(latencies) * 1000 if latencies else 0.0,
        "p50_ms": ordered[len(ordered) // 2] * 1000 if ordered else 0.0,
        "p95_ms": ordered[int(len(ordered) * 0.95)] * 1000 if ordered else 0.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="per format (default 2000)")
    parser.add_argument("--concurrency", type=int, default=8, help="clients (default 8)")
    parser.add_argument("--seconds", type=float, default=20.0, help="cap per format (default 20)")
    args = parser.parse_args()

    replies = (args.requests + args.concurrency) * len(FORMATS)
    process, url, script = start_server(replies)
    try:
        clients = f"{args.concurrency} concurrent clients"
        print(f"server {url}; reply {len(REPLY)} chars; {clients}", flush=True)
        for name in FORMATS:
            cpu_before = cpu_seconds(process.pid)
            result = anyio.run(run_format, url, name, args.requests, args.concurrency, args.seconds)
            cpu_after = cpu_seconds(process.pid)
            server_cpu = ""
            if cpu_before is not None and cpu_after is not None:
                served = result["requests"] + args.concurrency
                server_cpu = f"  server CPU {(cpu_after - cpu_before) / served * 1000:5.2f} ms/req"
            print(
                f"{name:10s} {result['requests']:5.0f} requests in {result['seconds']:5.2f} s"
                f"  {result['rps']:7.1f} req/s  mean {result['mean_ms']:6.2f} ms"
                f"  p50 {result['p50_ms']:6.2f} ms  p95 {result['p95_ms']:6.2f} ms"
                f"  failures {result['failures']:.0f}{server_cpu}",
                flush=True,
            )
    finally:
        process.terminate()
        process.wait(timeout=10)
        script.unlink(missing_ok=True)
        script.parent.rmdir()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
