"""``jigs demo --workflow dbos``: a two-step workflow on DBOS (SQLite), its worker SIGKILLed
during step 2 and the workflow recovered by a second worker process. Offline: the agent talks to
the local model server (``jigs_testing.ModelServer``). Exits 1 if anything did not happen as
shown.

The worker is this module run as ``python -m jigs_dbos._demo worker ...``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["main"]

_PREFERRED = ("claude", "codex", "pi", "echo")


def _pick_kind(kinds: Sequence[str] | None) -> str | None:
    from jigs.registry._registry import default_registry

    installed = default_registry().kinds()
    for kind in kinds or _PREFERRED:
        if kind in installed:
            return kind
    return None


def _processes_in(directory: Path) -> list[int]:
    found = []
    target = str(directory.resolve())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in {"Z", "X"} and (cwd == target or cwd.startswith(target + "/")):
            found.append(int(entry.name))
    return found


def _read_json(path: Path, key: str) -> dict[str, Any] | None:
    for line in path.read_text().splitlines():
        if line.startswith("{"):
            data: dict[str, Any] = json.loads(line)
            if key in data:
                return data
    return None


def _wait(predicate: Any, timeout: float, proc: subprocess.Popen[bytes], what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc.poll() is not None:
            raise RuntimeError(f"the worker exited ({proc.returncode}) before {what}")
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def _stop(processes: Sequence[subprocess.Popen[bytes]]) -> None:
    """Every worker the demo started ends with it, on every path (a failure, Ctrl-C): a
    recovery worker left behind would keep running the workflow after the demo exits. The
    worker's own step dies with it (its namespace), so the worker is all there is to stop."""
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait()


@dataclass
class _Demo:
    """One run of the demo: its kind, worktree, workers' command lines and logs."""

    kind: str
    worktree: Path
    env: dict[str, str]
    worker: list[str]
    start: list[str]
    workflow_id: str
    log1: Path
    log2: Path


def main(kinds: Sequence[str] | None = None) -> int:
    """Run the demo with the first of ``kinds`` that is installed (default: claude, codex, pi)."""
    from jigs_testing import ModelServer

    kind = _pick_kind(kinds)
    print("jigs demo --workflow dbos: a two-step workflow on DBOS (SQLite), its worker killed")
    print("during step 2 and the workflow recovered by a second worker (no network)\n")
    if kind is None:
        print("no harness kind is installed: pip install jigs-harness-claude (or codex, pi)")
        return 1
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="jigs-demo-dbos-") as tmp,
        ModelServer.run_in_thread() as server,
    ):
        demo = _prepare(Path(tmp), kind, server)
        if demo is None:
            print(f"the {kind} harness has no demo plan; pick another with --harness")
            return 1
        print(f"kind: {kind}; workflow {demo.workflow_id}; worktree {demo.worktree}")
        started_here: list[subprocess.Popen[bytes]] = []
        try:
            if not _kill_during_step_two(demo, server, started_here):
                return 1
            result = _recover(demo, started_here)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            log1, log2 = demo.log1, demo.log2
            print(
                f"FAILED: {exc}\n{log1.read_text()[-2000:]}\n{log2.read_text()[-2000:]}"
                if log2.exists()
                else f"FAILED: {exc}\n{log1.read_text()[-2000:]}"
            )
            return 1
        finally:
            _stop(started_here)
        print("recovery: a second worker resumed the workflow; step 2 ran again from step 1's")
        print(f"          session: {result['texts'][1]!r}")
        print(f"result: OK in {time.monotonic() - started:.1f} s")
    return 0


def _prepare(root: Path, kind: str, server: Any) -> _Demo | None:
    """The worktree, the factory's ``jigs.toml``, the model's replies and the workers' command
    lines; None when the kind has no demo plan."""
    from jigs.registry._registry import default_registry
    from jigs_testing import text
    from jigs_testing.plan import demo_plan_of

    plan = demo_plan_of(default_registry().get(kind), server)
    if plan is None:
        return None
    trees = root / "trees"
    worktree = trees / "demo"
    worktree.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(worktree)], check=True)
    (trees / "jigs.toml").write_text(f"[agents]\nenv = {json.dumps(list(plan.agents_env))}\n")
    first = plan.write_file(server, "notes.txt", "written in step 1")
    if kind == "echo":  # the echo kind has no model: its turn is slow by a directive
        second = f"sleep:3 {plan.recall(server)}"
    else:  # step 2's first model request hangs; the recovered attempt gets the recall reply
        server.add(text("too late", delay=600))
        second = plan.recall(server)
    env = {**os.environ, **plan.host_env, "JIGS_DATA_DIR": str(root / "data")}
    if "JIGS_CLI_DIR" not in os.environ:
        from jigs.policy._paths import data_dir

        env["JIGS_CLI_DIR"] = str(data_dir() / "clis")
    db = f"sqlite:///{root / 'dbos.sqlite'}"
    workflow_id = f"demo-{uuid.uuid4().hex[:8]}"
    worker = [sys.executable, "-m", "jigs_dbos._demo", "worker", "--db", db]
    harness = json.dumps(plan.descriptor.to_data())
    start = [*worker, "--worktree", str(worktree), "--harness", harness, "--id", workflow_id]
    start += ["--first", first, "--second", second]
    return _Demo(
        kind,
        worktree,
        env,
        worker,
        start,
        workflow_id,
        root / "worker-1.log",
        root / "worker-2.log",
    )


def _kill_during_step_two(
    demo: _Demo, server: Any, started_here: list[subprocess.Popen[bytes]]
) -> bool:
    """Start the first worker, SIGKILL it while step 2's agent runs, and prove the agent died
    with it (False, said, when it outlived it)."""
    worktree, log1 = demo.worktree, demo.log1
    with log1.open("wb") as out:
        one = subprocess.Popen(demo.start, stdout=out, stderr=out, env=demo.env)
    started_here.append(one)
    step1 = _wait(lambda: _read_json(log1, "step1"), 180, one, "step 1 ended")
    asked = len(server.model_requests)
    print(f"step 1: {step1['step1']!r}")
    written = worktree / "notes.txt"
    if written.exists():
        print(f"        the agent wrote notes.txt: {written.read_text()!r}")
    agents = _wait(lambda: _processes_in(worktree), 60, one, "step 2's agent started")
    if demo.kind == "echo":  # no model to ask: its turn sleeps (a directive) instead
        time.sleep(0.5)
    else:
        # the kill waits for step 2's model request (the one that hangs), not a timer: on a
        # loaded machine a CLI can take seconds to send it, and killed before, the recovered
        # attempt would meet the hanging reply instead of the recall one
        _wait(lambda: len(server.model_requests) > asked, 120, one, "step 2's request")
    one.send_signal(signal.SIGKILL)
    one.wait()
    killed = time.monotonic()
    print(f"step 2: the agent runs (pid {agents[0]}); SIGKILL to the worker (pid {one.pid})")
    while _processes_in(worktree):
        if time.monotonic() - killed > 2:
            print("        FAILED: the agent outlived its worker")
            return False
        time.sleep(0.02)
    print(f"        the agent died with it ({time.monotonic() - killed:.2f} s later)")
    return True


def _recover(demo: _Demo, started_here: list[subprocess.Popen[bytes]]) -> Any:
    """A second worker recovers the workflow; its result."""
    with demo.log2.open("wb") as out:
        two = subprocess.Popen(
            [*demo.worker, "--recover", demo.workflow_id], stdout=out, stderr=out, env=demo.env
        )
    started_here.append(two)
    result = _wait(lambda: _read_json(demo.log2, "texts"), 180, two, "the recovery ended")
    two.wait(30)
    return result


def _worker(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m jigs_dbos._demo worker")
    for flag in ("--worktree", "--harness", "--first", "--second", "--id", "--recover"):
        parser.add_argument(flag)
    parser.add_argument("--db", required=True)
    args = parser.parse_args(argv)

    from dbos import DBOS
    from jigs import harnesses

    import jigs_dbos

    two_steps = _workflow()
    DBOS(
        config={
            "name": "jigs-demo",
            "system_database_url": args.db,
            "serializer": jigs_dbos.JigsSerializer(),
            "log_level": "WARNING",
            "application_version": "jigs-demo",
        }
    )
    DBOS.launch()
    try:
        if args.recover:
            texts: list[str] = DBOS.retrieve_workflow(args.recover).get_result()
        else:
            descriptor = harnesses.load(json.loads(args.harness))
            texts = asyncio.run(_start(two_steps, descriptor, args))
        print(json.dumps({"texts": texts}), flush=True)
    finally:
        DBOS.destroy()
    return 0


def _workflow() -> Any:
    """The demo's workflow: step 1 starts a session, step 2 resumes it."""
    from dbos import DBOS
    from jigs import AgentSessionRef

    import jigs_dbos

    @jigs_dbos.step(name="start_session")
    async def start_session(harness: Any, worktree: str, prompt: str) -> Any:
        return await jigs_dbos.run_agent(harness=harness, cwd=worktree, prompt=prompt)

    @jigs_dbos.step(name="continue_session")
    async def continue_session(
        harness: Any, worktree: str, prompt: str, session: AgentSessionRef | None
    ) -> Any:
        return await jigs_dbos.run_agent(
            harness=harness, cwd=worktree, prompt=prompt, resume=session
        )

    @DBOS.workflow(name="jigs_demo_two_steps")
    async def two_steps(harness: Any, worktree: str, first: str, second: str) -> list[str]:
        one = await start_session(harness, worktree, first)
        print(json.dumps({"step1": one.text}), flush=True)
        two = await continue_session(harness, worktree, second, one.session)
        return [one.text, two.text]

    return two_steps


async def _start(two_steps: Any, descriptor: Any, args: argparse.Namespace) -> list[str]:
    from dbos import DBOS, SetWorkflowID

    with SetWorkflowID(args.id):
        handle = await DBOS.start_workflow_async(
            two_steps, descriptor, args.worktree, args.first, args.second
        )
    result: list[str] = await handle.get_result()
    return result


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        sys.exit(_worker(sys.argv[2:]))
    sys.exit(main(sys.argv[1:] or None))
