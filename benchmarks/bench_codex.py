"""A warm Codex step through jigs against the same turn by the raw CLI.

    uv run python benchmarks/bench_codex.py [--runs N (21)] [--breakdown N]

jigs: ``create_agent_runner`` + ``generate_text`` + ``close`` in a worker that already ran a step
(private home, ``codex app-server``, initialize, thread/start, one turn, close). Raw: ``codex exec
--json --skip-git-repo-check`` with stdin closed, the same curated ``config.toml`` and the same
environment, read to the end. Both use the CLI jigs resolves and the same local
:class:`jigs_testing.ModelServer`, alternating within one run.

The headline ratio (target at most 1.05) is against ``codex exec`` with a **reused** home, warmed
once before timing: how people run ``codex``; its quartiles over the pairs show the spread. A
second set of pairs then times the same turn through a bare ``codex app-server`` driven with
jigs' JSON-RPC and nothing else (reused home, no namespace, proxy, lock or private home), so
the headline splits into what Codex's app-server path costs against ``codex exec`` and jigs'
share. The raw CLI with a **fresh** home per run (which
pays the set-up jigs' seeded home avoids) is a labelled reference line, as are the app server's
start time (launch to the ``initialize`` answer) and raw ``codex exec``'s own end (its
``turn.completed`` line to its exit: the teardown jigs' close waits for too), all measured after
the pairs (interleaved
with them, they slowed the next step). Then ``--breakdown`` more jigs steps run with
jigs' structlog events captured (outside the timed pairs, so capturing costs the headline
nothing) and the median of each stage of the step is printed: open (checks and lock, proxy, home
seed, app-server spawn, initialize, thread start), turn, close (app server kill, home removal
and session store during its teardown, its end, proxy stop, lock release).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from _alternate import alternate, report

KEY_ENV = "JIGS_BENCH_CODEX_KEY"

#: (label, the structlog event that ends the stage); a stage runs from the previous mark.
OPEN_MARKS = (
    ("resolve, env, lock, checks", "runner.checks.jit"),
    ("credential proxy start", "runner.proxy.started"),
    ("home seed", "codex.home.built"),
    ("app-server spawn", "codex.app_server.launched"),
    ("initialize", "codex.app_server.ready"),
    ("thread start", "codex.thread.opened"),
    ("rest of open", "runner.opened"),
)
TURN_MARKS = (("turn (turn/start to completed)", "turn.finished"), ("result", "*turned"))
CLOSE_MARKS = (
    # a settled thread: the app server is killed, its home removed and the session stored while
    # the kernel tears it down, then its end awaited (otherwise: its exit at end of input, then
    # the home removal, the session stored last)
    ("app server kill, home removal", "codex.home.removed"),
    ("session stored (while it dies)", "store.session.saved"),
    ("app server gone", "codex.app_server.stopped"),
    ("proxy stop", "jigs.proxy.stopped"),
    ("lock release", "runner.closed"),
    ("rest of close", "*closed"),
)


async def open_app_server(exe: Path, env: dict[str, str], cwd: str) -> anyio.abc.Process:
    """``codex app-server`` with pipes for its JSON-RPC, stderr discarded."""
    return await anyio.open_process(
        [str(exe), "app-server"],
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


async def app_server_start(exe: Path, env: dict[str, str], cwd: str) -> float:
    """Seconds from launching ``codex app-server`` to its ``initialize`` answer."""
    import json

    home = tempfile.mkdtemp(prefix="jigs-bench-codex-home-")
    try:
        started = time.perf_counter()
        async with await open_app_server(exe, env | {"CODEX_HOME": home}, cwd) as proc:
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


async def exec_teardown(exe: Path, env: dict[str, str], cwd: str) -> float:
    """Seconds from the ``turn.completed`` line of a raw ``codex exec --json`` to its exit: the
    CLI's own end, which a raw run pays as jigs' close pays the killed app server's."""
    async with await anyio.open_process(
        [str(exe), "exec", "--json", "--skip-git-repo-check", "say it"],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as proc:
        assert proc.stdout is not None
        buffer, completed = b"", None
        async for chunk in proc.stdout:
            buffer += chunk
            if completed is None and b'"turn.completed"' in buffer:
                completed = time.perf_counter()
        await proc.wait()
    assert completed is not None, buffer[-300:]
    return time.perf_counter() - completed


async def bare_app_server_turn(exe: Path, env: dict[str, str], cwd: str) -> None:
    """One turn through ``codex app-server`` with no jigs: initialize, thread/start with the
    params jigs sends, turn/start, read to ``turn/completed``, then kill it and wait (as jigs'
    close does once the rollout is complete)."""
    import json

    async with await open_app_server(exe, env, cwd) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        stdout = proc.stdout
        buffer = b""

        async def send(message: dict[str, Any]) -> None:
            assert proc.stdin is not None
            await proc.stdin.send((json.dumps(message) + "\n").encode())

        async def until(done: Any) -> dict[str, Any]:
            nonlocal buffer
            while True:
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    message = json.loads(line)
                    if done(message):
                        return message  # type: ignore[no-any-return]
                buffer += await stdout.receive()

        await send({"id": 1, "method": "initialize", "params": {"clientInfo": _CLIENT}})
        await until(lambda m: m.get("id") == 1)
        await send({"method": "initialized"})
        thread = {"cwd": cwd, "approvalPolicy": "never", "sandbox": "danger-full-access"}
        thread["model"] = "bench-model"
        await send({"id": 2, "method": "thread/start", "params": thread})
        started = await until(lambda m: m.get("id") == 2)
        text = [{"type": "text", "text": "say it", "text_elements": []}]
        turn = {"threadId": started["result"]["thread"]["id"], "input": text}
        await send({"id": 3, "method": "turn/start", "params": turn})
        await until(lambda m: m.get("method") == "turn/completed")
        proc.kill()
        await proc.wait()


_CLIENT = {"name": "bench", "version": "0"}


def quartiles(values: list[float]) -> str:
    q1, q2, q3 = statistics.quantiles(values, n=4)
    return f"{q1:.3f} / {q2:.3f} / {q3:.3f}"


class Capture:
    """jigs' structlog events with the time each was emitted (only while ``on``)."""

    def __init__(self) -> None:
        self.on = False
        self.events: list[tuple[float, str]] = []

    def processor(self, logger: Any, method: str, event_dict: Any) -> Any:
        import structlog

        if self.on:
            self.events.append((time.perf_counter(), str(event_dict.get("event"))))
        raise structlog.DropEvent

    def mark(self, name: str) -> None:
        if self.on:
            self.events.append((time.perf_counter(), name))


def stages(
    started: float, events: list[tuple[float, str]], marks: tuple[tuple[str, str], ...]
) -> tuple[dict[str, float], float]:
    """Each stage's seconds (from the previous mark found, in order) and the last mark's time."""
    out: dict[str, float] = {}
    previous = started
    for label, name in marks:
        found = [t for t, event in events if event == name and t >= previous]
        if not found:
            continue
        out[label] = found[0] - previous
        previous = found[0]
    return out, previous


def print_breakdown(runs: list[tuple[float, list[tuple[float, str]]]]) -> None:
    per: dict[str, list[float]] = {}
    totals: dict[str, list[float]] = {"open": [], "turn": [], "close": [], "step": []}
    for started, events in runs:
        mark = started
        for section, marks in (("open", OPEN_MARKS), ("turn", TURN_MARKS), ("close", CLOSE_MARKS)):
            found, end = stages(mark, events, marks)
            for label, seconds in found.items():
                per.setdefault(f"{section}: {label}", []).append(seconds)
            totals[section].append(end - mark)
            mark = end
        totals["step"].append(mark - started)
    width = max(len(k) for k in per) + 2
    print(f"jigs step breakdown (medians over {len(runs)} steps, events captured):")
    for section in ("open", "turn", "close"):
        print(f"  {section:<{width}} {statistics.median(totals[section]) * 1000:7.1f} ms")
        for label, values in per.items():
            if label.startswith(section + ":"):
                name = label.split(": ", 1)[1]
                print(f"    {name:<{width - 2}} {statistics.median(values) * 1000:7.1f} ms")
    print(f"  {'step':<{width}} {statistics.median(totals['step']) * 1000:7.1f} ms")


async def main_async(runs: int, breakdown: int) -> int:
    import structlog

    capture = Capture()

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

            async def raw(*, fresh: bool) -> float:
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

            async def raw_reused() -> float:
                return await raw(fresh=False)

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
                    capture.mark("*turned")
                elapsed = time.perf_counter() - started
                capture.mark("*closed")
                assert result.text == "benchmark answer", result.text
                return elapsed

            bare_home = tempfile.mkdtemp(prefix="jigs-bench-codex-bare-")
            Path(bare_home, "config.toml").write_text(config)

            async def bare(i: int) -> float:
                server.add(text("benchmark answer"))
                started = time.perf_counter()
                await bare_app_server_turn(exe.path, env | {"CODEX_HOME": bare_home}, tree)
                return time.perf_counter() - started

            await raw_reused()  # the reused home's first run (``alternate`` warms both once more)
            pairs = await alternate(raw_reused, jigs, runs)
            bare_pairs = await alternate(raw_reused, bare, runs) if runs else None

            # the references after the pairs: interleaved, a fresh-home run and an app server
            # killed at once left work behind that slowed the next jigs step
            fresh: list[float] = []
            starts: list[float] = []
            ends: list[float] = []
            for _ in range(max(3, runs // 2)):
                fresh.append(await raw(fresh=True))
                starts.append(await app_server_start(exe.path, env, tree))
                server.add(text("benchmark answer"))
                ends.append(await exec_teardown(exe.path, env | {"CODEX_HOME": reused_home}, tree))

            broken: list[tuple[float, list[tuple[float, str]]]] = []
            # jigs' events carry the stage timings; captured only now (the application's
            # logging configuration is what the timed pairs above ran with)
            structlog.configure(processors=[capture.processor])
            for i in range(breakdown):
                capture.events = []
                capture.on = True
                started = time.perf_counter()
                await jigs(10_000 + i)
                capture.on = False
                broken.append((started, capture.events))
            structlog.reset_defaults()
            shutil.rmtree(reused_home, ignore_errors=True)
            shutil.rmtree(bare_home, ignore_errors=True)

    def ms(values: list[float]) -> str:
        return f"median {statistics.median(values) * 1000:.1f} ms"

    ratio = report(
        "raw codex exec --json turn (reused home)", "jigs warm step (runner+turn+close)", pairs
    )
    print(f"  ratio quartiles over the pairs: {quartiles(pairs.ratios)}")
    if bare_pairs is not None:
        print(
            "reference, measured after: the same turn through a bare `codex app-server` (the "
            "JSON-RPC jigs sends, a reused home; no namespace, proxy, lock or private home), "
            "alternated with raw `codex exec`:"
        )
        bare_ratio = statistics.median(bare_pairs.ratios)
        print(
            f"  raw codex exec median {statistics.median(bare_pairs.raws) * 1000:.1f} ms, bare "
            f"app server median {statistics.median(bare_pairs.ours) * 1000:.1f} ms, median "
            f"ratio {bare_ratio:.3f} over {len(bare_pairs.ratios)} pairs"
        )
        print(
            f"  so Codex's app-server path alone is {bare_ratio:.3f}x `codex exec` here, and "
            f"jigs' own share of the headline about {ratio / bare_ratio:.3f}x"
        )
    print(f"raw codex exec --json turn (fresh home, reference): {ms(fresh)}")
    print(f"app server start (launch to initialize answer): {ms(starts)}")
    print(
        f"raw codex exec's own end (its turn.completed line to its exit; the close's 'app "
        f"server gone' is the same teardown): {ms(ends)}"
    )
    if broken:
        print_breakdown(broken)
    return 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--breakdown", type=int, default=7, help="jigs steps with events captured")
    args = parser.parse_args()
    os.environ.setdefault("JIGS_DATA_DIR", tempfile.mkdtemp(prefix="jigs-bench-"))
    sys.exit(anyio.run(main_async, args.runs, args.breakdown))


if __name__ == "__main__":
    main()
