"""jigs on DBOS, against the real engine: SQLite (embedded) and Postgres (at scale).

Workers are separate processes running ``examples/dbos_workflow.py``; the test is the client.
"""

from __future__ import annotations

import itertools
import os
import pickle
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jigs import AgentSessionRef, RunMetadata
from jigs.errors import (
    AgentCrashedError,
    AgentLimitError,
    AgentTimeoutError,
    AgentTurnError,
    DescriptorError,
    HarnessNotFoundError,
    ModelNotAvailableError,
    WorktreeBusyError,
)
from jigs.models import Usage
from jigs.steps import AgentResult
from jigs_harness_echo import EchoDescriptor
from pydantic import BaseModel

from .conftest import (
    EXAMPLES,
    RealCli,
    Worker,
    alive,
    make_worktree,
    outer_agent,
    processes_in,
    processes_mentioning,
    wait_file,
    wait_gone,
    wait_no_processes_in,
)

EXAMPLE = str(EXAMPLES / "dbos_workflow.py")


class Verdict(BaseModel):
    ok: bool
    notes: list[str]


def _values() -> list[Any]:
    descriptor = EchoDescriptor(prefix="p", turn_timeout=30)
    ref = AgentSessionRef(harness="echo", id="s-1", descriptor=descriptor.describe())
    result = AgentResult(
        text="done", session=ref, output=Verdict(ok=True, notes=["a"]), usage=Usage(input_tokens=3)
    )
    return [descriptor, ref, RunMetadata(workflow_run_id="wf/1", step_name="s", attempt=2), result]


@pytest.mark.parametrize("value", _values(), ids=lambda v: type(v).__name__)
def test_jigs_types_travel_through_dbos_serializers(value: Any) -> None:
    """DBOS' default (pickle) serializer and jigs_dbos.JigsSerializer (readable JSON) give back
    equal, typed values; DBOS' portable JSON cannot carry them (hence JigsSerializer)."""
    from dbos._serialization import DBOSDefaultSerializer, DBOSPortableJSON
    from jigs_dbos import JigsSerializer

    for serializer in (DBOSDefaultSerializer, JigsSerializer()):
        back = serializer.deserialize(serializer.serialize({"args": (value,), "kwargs": {}}))
        assert back["args"][0] == value
        assert type(back["args"][0]) is type(value)
    assert '"__jigs__":"pickle"' not in JigsSerializer().serialize(value)  # stored as JSON
    with pytest.raises(TypeError):
        DBOSPortableJSON.serialize(value)


def test_json_serializer_keeps_errors_and_plain_json() -> None:
    from jigs_dbos import JigsSerializer

    s = JigsSerializer()
    error = WorktreeBusyError(Path("/w"), "run-1", 12)
    back = s.deserialize(s.serialize(error))
    assert isinstance(back, WorktreeBusyError)
    assert back.retryable
    assert back.holder_run_id == "run-1"
    plain = {"a": [1, 2.5, None, "x"], "b": {"c": True}}
    assert s.deserialize(s.serialize(plain)) == plain
    assert s.serialize(plain) == '{"a":[1,2.5,null,"x"],"b":{"c":true}}'


@pytest.mark.parametrize(
    ("error", "retry"),
    [
        (WorktreeBusyError(Path("/w"), None, None), True),
        (AgentCrashedError("crashed", kind="echo", returncode=3, stderr_tail=""), True),
        (AgentTimeoutError("slow", kind="echo", limit="turn_timeout", seconds=1), True),
        (AgentTurnError("api", kind="echo", retryable=True), True),
        (AgentTurnError("refused", kind="echo"), False),
        (AgentLimitError("max", kind="echo", limit="max_turns", value=1), False),
        (DescriptorError("bad"), False),
        (HarnessNotFoundError("nope", []), False),
        (ModelNotAvailableError("pi"), False),
        (RuntimeError("not jigs"), True),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_should_retry_maps_retryable(error: BaseException, retry: bool) -> None:
    from jigs_dbos import should_retry

    assert should_retry(error) is retry
    assert should_retry(pickle.loads(pickle.dumps(error))) is retry


def test_run_metadata_outside_a_workflow_is_refused() -> None:
    from jigs.errors import InvalidInputError
    from jigs_dbos import run_metadata

    with pytest.raises(InvalidInputError, match="outside a DBOS workflow"):
        run_metadata()


# --- the real engine ------------------------------------------------------------------------


def _env(data_dir: Path, executor: str = "local") -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        JIGS_DATA_DIR=str(data_dir),
        JIGS_EXAMPLE_EXECUTOR=executor,
        JIGS_EXAMPLE_LOG_LEVEL="WARNING",
    )
    return env


class Engine:
    """A DBOS system database with serving workers and a client, shared by a module."""

    def __init__(self, db: str, root: Path, workers: int) -> None:
        from dbos import DBOSClient
        from jigs_dbos import JigsSerializer

        self.db = db
        self.root = root
        self.data_dir = root / "jigs-data"
        self.data_dir.mkdir()
        self.workers = [
            Worker(
                [EXAMPLE, "--db", db, "--serve"],
                _env(self.data_dir, f"worker-{n}"),
                root / f"worker-{n}.log",
            )
            for n in range(workers)
        ]
        for worker in self.workers:
            worker.wait_line("serving", 90)
        self.client = DBOSClient(system_database_url=db, serializer=JigsSerializer())

    def enqueue(self, harness: Any, worktree: Path, first: str, second: str) -> Any:
        options: Any = {"queue_name": "jigs", "workflow_name": "two_steps"}
        options["workflow_id"] = f"wf-{uuid.uuid4().hex[:10]}"
        return self.client.enqueue(options, harness, str(worktree), first, second)

    def close(self) -> None:
        self.client.destroy()
        for worker in self.workers:
            worker.stop()


@pytest.fixture(scope="module")
def sqlite_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    root = tmp_path_factory.mktemp("dbos-sqlite")
    engine = Engine(f"sqlite:///{root / 'dbos.sqlite'}", root, workers=1)
    yield engine
    engine.close()


@pytest.fixture
def engine(sqlite_engine: Engine, monkeypatch: pytest.MonkeyPatch) -> Engine:
    monkeypatch.setenv("JIGS_DATA_DIR", str(sqlite_engine.data_dir))  # the workers' locks
    return sqlite_engine


def test_sqlite_worker_killed_mid_turn_recovers_from_step_one(tmp_path: Path) -> None:
    """SIGKILL the worker during step 2's turn: its agent dies with it (nothing of the attempt
    is left), a second worker recovers the workflow, and step 2 runs again from step 1's
    session: the echo agent sees exactly one earlier turn."""
    worktree = make_worktree(tmp_path / "wt")
    data_dir = tmp_path / "jigs-data"
    db = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    pidfile = worktree / ".agent.pid"  # the sandboxed agent writes only in its worktree
    second = f"pidfile:{pidfile} sleep:3 second"
    argv = [EXAMPLE, "--db", db, "--worktree", str(worktree), "--id", "wf-kill"]
    first_worker = Worker(
        [*argv, "--first", "first", "--second", second], _env(data_dir), tmp_path / "w1.log"
    )
    try:
        agent = outer_agent(int(wait_file(pidfile, 90, first_worker)), worktree)
        pidfile.unlink()
        first_worker.kill()
        wait_gone(agent, 2.0)
        wait_no_processes_in(worktree, 2.0)
        assert processes_mentioning(str(data_dir)) == []
    finally:
        first_worker.stop()
    recovering = Worker(
        [EXAMPLE, "--db", db, "--recover", "wf-kill"], _env(data_dir), tmp_path / "w2.log"
    )
    try:
        texts = recovering.wait_line("texts", 90)["texts"]
    finally:
        recovering.stop()
    assert texts == ["echo: first (turn 1)", f"echo: {second} (turn 2)"]
    assert pidfile.exists()  # step 2 really ran again, in the new worker (it was removed)
    assert processes_mentioning(str(data_dir)) == []


def test_sqlite_cancel_during_turn_stops_agent_and_frees_lock(
    engine: Engine, tmp_path: Path
) -> None:
    from jigs.policy._lock import WorktreeLock

    worktree = make_worktree(tmp_path / "wt")
    pidfile = worktree / ".agent.pid"  # the sandboxed agent writes only in its worktree
    handle = engine.enqueue(
        EchoDescriptor(), worktree, "first", f"pidfile:{pidfile} sleep:60 second"
    )
    agent = outer_agent(int(wait_file(pidfile, 60)), worktree)
    assert alive(agent)
    start = time.monotonic()
    engine.client.cancel_workflow(handle.workflow_id)
    gone_after = wait_gone(agent, 2.0)
    lock = WorktreeLock(worktree, "test")
    deadline = start + 2.0
    while True:  # the runner closes right after the agent is gone
        try:
            lock.acquire()
            break
        except WorktreeBusyError:
            assert time.monotonic() < deadline, "the lock was not released within 2 s"
            time.sleep(0.02)
    lock.release()
    assert handle.get_status().status == "CANCELLED"
    print(f"agent gone {gone_after:.2f}s after cancel_workflow")


def test_sqlite_a_client_interrupts_a_running_step(engine: Engine, tmp_path: Path) -> None:
    """The test's DBOSClient (outside the worker) interrupts the listening step's agent: the
    workflow gets AgentInterrupted with the session to resume, the agent is gone, the worktree
    free, and the applied message is cancelled (done)."""
    import jigs_dbos
    from jigs.policy._lock import worktree_locked

    worktree = make_worktree(tmp_path / "wt")
    pidfile = worktree / ".agent.pid"  # the sandboxed agent writes only in its worktree
    options: Any = {"queue_name": "jigs", "workflow_name": "interruptible"}
    options["workflow_id"] = f"wf-{uuid.uuid4().hex[:10]}"
    handle = engine.client.enqueue(
        options, EchoDescriptor(), str(worktree), f"pidfile:{pidfile} sleep:60"
    )
    agent = outer_agent(int(wait_file(pidfile, 60)), worktree)
    start = time.monotonic()
    message = jigs_dbos.interrupt(engine.client, handle.workflow_id)
    outcome = handle.get_result()
    took = time.monotonic() - start
    assert outcome["error"] == "AgentInterrupted"
    assert isinstance(outcome["session"], AgentSessionRef)
    assert not alive(agent)
    assert not worktree_locked(worktree)
    # the step looks every 0.5 s; the turn then ends within 2 s
    assert took < 4.0, f"the interrupt took {took:.2f}s to end the workflow"
    assert engine.client.retrieve_workflow(message).get_status().status == "CANCELLED"


def test_sqlite_bad_descriptor_fails_at_once(engine: Engine, tmp_path: Path) -> None:
    """A non-retryable error is re-raised as is on the first attempt (retries exhausted would
    raise DBOSMaxStepRetriesExceeded instead)."""
    worktree = make_worktree(tmp_path / "wt")
    handle = engine.enqueue({"kind": "echo", "colour": "red"}, worktree, "first", "second")
    with pytest.raises(DescriptorError, match="colour"):
        handle.get_result()


def test_sqlite_busy_worktree_is_retried(engine: Engine, tmp_path: Path) -> None:
    """A retryable error (another holder of the worktree) is retried until the holder goes."""
    from jigs.policy._lock import WorktreeLock

    worktree = make_worktree(tmp_path / "wt")
    lock = WorktreeLock(worktree, "holder")
    lock.acquire()
    try:
        handle = engine.enqueue(EchoDescriptor(), worktree, "first", "second")
        time.sleep(1.5)
        assert handle.get_status().status == "PENDING"
    finally:
        lock.release()
    assert handle.get_result() == ["echo: first (turn 1)", "echo: second (turn 2)"]


def test_postgres_two_workers_ten_workflows_five_worktrees(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At scale: two worker processes on one Postgres share the queue; 10 workflows over 5
    worktrees all complete, and no two agent turns ever overlapped in one worktree (each turn
    writes an in- and an out- file; their times must not interleave)."""
    engine = Engine(postgres_url, tmp_path, workers=2)
    monkeypatch.setenv("JIGS_DATA_DIR", str(engine.data_dir))
    try:
        trees = [make_worktree(tmp_path / f"wt{n}") for n in range(5)]
        handles = []
        for n in range(10):
            turn = [f"write:in-{n}-{k}:x sleep:0.2 write:out-{n}-{k}:x {k}" for k in ("a", "b")]
            handles.append(engine.enqueue(EchoDescriptor(), trees[n % 5], *turn))
        results = [h.get_result() for h in handles]
        executors = {h.get_status().executor_id for h in handles}
    finally:
        engine.close()
    for texts in results:
        assert texts[1].endswith("b (turn 2)"), texts
    for tree in trees:
        spans = sorted(
            (p.stat().st_mtime_ns, (tree / p.name.replace("in-", "out-", 1)).stat().st_mtime_ns)
            for p in tree.glob("in-*")
        )
        assert len(spans) == 4
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end, f"two agents overlapped in {tree}"
    print(f"executors that ran workflows: {sorted(executors)}")


@pytest.mark.real_cli("claude")
@pytest.mark.real_cli("codex")
@pytest.mark.parametrize("kind", ["claude", "codex"])
def test_real_cli_killed_mid_turn_retry_carries_the_uncrashed_history(
    kind: str, require_cli: Any, tmp_path: Path
) -> None:
    """With the real CLI against the local model server: a workflow without a crash, then the
    same workflow with the worker SIGKILLed while step 2's model request hangs. The recovered
    step 2's request carries exactly as many messages as the uncrashed one (fork-on-resume: the
    killed attempt's partial turn never reaches the model), and nothing of the killed attempt
    runs in the worktree."""
    from jigs_testing import ModelServer

    require_cli(kind)
    data_dir = tmp_path / "jigs-data"
    db = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    with ModelServer.run_in_thread() as server:
        cli = RealCli(kind, server, tmp_path)
        env = {**_env(data_dir), **cli.env}
        common = ["--db", db, "--harness", cli.harness_json, "--first", "Say one."]
        clean_tree = cli.worktree(tmp_path / "clean")
        cli.script_clean()
        clean = Worker(
            [
                EXAMPLE,
                *common,
                "--worktree",
                str(clean_tree),
                "--second",
                "Count.",
                "--id",
                "clean",
            ],
            env,
            tmp_path / "clean.log",
        )
        try:
            expected = clean.wait_line("texts", 180)["texts"][1]
        finally:
            clean.stop()
        assert str(expected).startswith("count=")

        tree = cli.worktree(tmp_path / "crash")
        cli.script_crash()
        before = len(server.model_requests)
        first = Worker(
            [EXAMPLE, *common, "--worktree", str(tree), "--second", "Count.", "--id", "crash"],
            env,
            tmp_path / "w1.log",
        )
        try:
            cli.wait_requests(before + 2, 180)
            assert processes_in(tree)
            first.kill()
            wait_no_processes_in(tree, 2.0)
        finally:
            first.stop()
        second = Worker([EXAMPLE, "--db", db, "--recover", "crash"], env, tmp_path / "w2.log")
        try:
            texts = second.wait_line("texts", 180)["texts"]
        finally:
            second.stop()
    assert texts[1] == expected


def test_jigs_demo_workflow_dbos_shows_a_crash_and_a_recovery(tmp_path: Path) -> None:
    """``jigs demo --workflow dbos``, offline with the echo kind: step 1, the worker killed
    during step 2 with its agent, and the recovered step 2 resuming step 1's session."""
    import subprocess
    import sys

    jigs_cli = Path(sys.executable).parent / "jigs"
    result = subprocess.run(
        [str(jigs_cli), "demo", "--workflow", "dbos", "--harness", "echo"],
        check=False, capture_output=True, text=True, timeout=170,
        env={**os.environ, "HOME": str(tmp_path)},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "the agent wrote notes.txt: 'written in step 1'" in out
    assert "SIGKILL to the worker" in out
    assert "the agent died with it" in out
    assert "(turn 2)" in out  # the recovered step 2 resumed step 1's one-turn session
    assert "result: OK" in out


def _demo_workers() -> list[int]:
    """Live processes running the demo's worker module (``python -m jigs_dbos._demo worker``)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if entry.name.isdigit() and b"jigs_dbos._demo" in argv and b"worker" in argv:
            found.append(int(entry.name))
    return found


def test_the_claude_demo_kills_on_the_request_under_load_and_leaves_no_worker(
    tmp_path: Path, require_cli: Any
) -> None:
    """``jigs demo --workflow dbos --harness claude`` on a loaded machine (two busy loops on
    top of whatever else runs): the kill waits for step 2's model request, so the recovered
    step gets the recall reply, not the scripted 600 s hang (a 0.5 s timer once killed before
    the request and failed 2 of 2); and no worker the demo started is left running after it."""
    import subprocess
    import sys

    require_cli("claude")
    before = set(_demo_workers())
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        result = subprocess.run(
            [str(Path(sys.executable).parent / "jigs"), "demo", "--workflow", "dbos",
             "--harness", "claude"],
            check=False, capture_output=True, text=True, timeout=170,
            env={**os.environ, "HOME": str(tmp_path), "IS_SANDBOX": "1"},
        )  # fmt: skip
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "result: OK" in result.stdout
    assert "I remember" in result.stdout  # the recall reply, not "too late"
    assert set(_demo_workers()) - before == set()
