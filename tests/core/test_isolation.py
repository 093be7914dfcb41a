"""A step's processes live and die together: the process namespace per step, its fallback
(descendant tracking), worker death by SIGKILL / SIGTERM / SIGINT, and what the agent can see.

The "agent" here is a shell script that starts the escapes an agent's tools can make (a plain
``sleep``, ``setsid sleep``, ``nohup sleep &``, a double fork); the worker is a Python
subprocess that calls :func:`jigs.processes.launch` the way a step does, holding the worktree
lock and passing its descriptors to the agent. Processes are found from outside by a unique
marker in their command line (pids inside a namespace mean nothing out here).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from jigs.errors import WorktreeBusyError
from jigs.policy._lock import WorktreeLock, worktree_locked
from jigs.processes import _on_sigterm, launch, live_groups, sigterm_handling, stop_all
from jigs.sandbox import _isolation
from jigs.sandbox._isolation import PLAIN, isolation, reset_isolation_cache
from jigs.sandbox._proctree import Proc, live, processes_under, stat
from jigs_testing._isolation_probe import RESET_SIGINT

SH = "/bin/sh"


def agent_script(marker: str, *, instant_setsid_orphan: bool = True) -> str:
    """Starts the escapees (a child, a ``setsid`` child, ``nohup &``, a double fork, and unless
    told otherwise a ``setsid`` process orphaned at once, which only the namespace can catch),
    says ``ready``, then sleeps in the foreground."""
    last = f"( setsid sh -c 'sleep {marker} & sleep {marker}' & )" if instant_setsid_orphan else ""
    return textwrap.dedent(
        f"""
        sleep {marker} &
        setsid sleep {marker} &
        nohup sleep {marker} >/dev/null 2>&1 &
        ( (sleep {marker} &) & )
        {last}
        sleep 0.2
        echo ready
        exec sleep {marker}
        """
    )


def marked(marker: str) -> list[int]:
    """Live pids whose command line carries ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except OSError:
            continue
        if marker.encode() in cmdline and stat(int(entry)) is not None:
            found.append(int(entry))
    return found


def step_processes(worktree: Path, marker: str) -> list[Proc]:
    """Every process of a worker's step, named by pid and start time: those working in the
    worktree (the whole launch chain) and those carrying the marker."""
    found = set(processes_under(worktree))
    found |= {(pid, info[1]) for pid in marked(marker) if (info := stat(pid)) is not None}
    return sorted(found)


def wait_gone(procs: list[Proc], seconds: float) -> list[Proc]:
    """Wait until none of ``procs`` is alive; a process counts as alive until it is a zombie,
    by which time it has closed its descriptors (the lock's included)."""
    deadline = time.monotonic() + seconds
    while (left := live(procs)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left


def wait_until_none(marker: str, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := marked(marker)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left


def new_marker() -> str:
    """A sleep duration nobody else uses (``sleep`` accepts fractions)."""
    return f"{9000 + uuid.uuid4().int % 900}.{uuid.uuid4().int % 10**6:06d}"


@pytest.fixture(params=["namespace", "tree"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "tree":
        monkeypatch.setenv(_isolation.ENV_VAR, "tree")
    else:
        monkeypatch.delenv(_isolation.ENV_VAR, raising=False)
    reset_isolation_cache()
    yield request.param
    reset_isolation_cache()


def test_the_namespace_is_in_force_here() -> None:
    # CI and this machine allow it: a silent fallback would make every namespace test below
    # test the fallback instead
    reset_isolation_cache()
    found = isolation()
    assert found.mode == "namespace", found.detail
    assert found.fix == ""


WORKER = RESET_SIGINT + textwrap.dedent(
    """
    import os, sys, anyio
    from pathlib import Path
    from jigs.policy._lock import WorktreeLock
    from jigs.processes import launch

    worktree, script = Path(sys.argv[1]), sys.argv[2]

    async def main():
        lock = WorktreeLock(worktree, "worker-run")
        lock.acquire()
        try:
            process = await launch(
                ["/bin/sh", "-c", script], cwd=worktree, env={"PATH": os.environ["PATH"]},
                owner="fake agent", pass_fds=lock.fds,
            )
            async with process:
                async for line in process.lines():
                    print(line.decode(), flush=True)
        finally:
            lock.release()

    anyio.run(main)
    """
)


def start_worker(worktree: Path, marker: str, *, namespace: bool) -> subprocess.Popen[str]:
    script = agent_script(marker, instant_setsid_orphan=namespace)
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(worktree), script],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "WORKER_CANARY": "worker-canary-" + marker},
    )
    assert worker.stdout is not None
    assert worker.stdout.readline().strip() == "ready"
    return worker


def assert_next_lock_succeeds(worktree: Path) -> None:
    lock = WorktreeLock(worktree, "next-run")
    lock.acquire()
    lock.release()


@pytest.mark.parametrize(
    ("wanted", "sig"),
    [
        ("namespace", signal.SIGKILL),
        ("namespace", signal.SIGTERM),
        ("namespace", signal.SIGINT),
        ("tree", signal.SIGTERM),
        ("tree", signal.SIGINT),
        # tree + SIGKILL: test_the_fallback_keeps_the_worktree_locked_after_sigkill
    ],
)
def test_a_dying_worker_takes_every_process_of_its_step(
    wanted: str, sig: signal.Signals, worktree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(_isolation.ENV_VAR, "auto" if wanted == "namespace" else "tree")
    marker = new_marker()
    worker = start_worker(worktree, marker, namespace=wanted == "namespace")
    try:
        # the foreground sleep and the escapees
        assert len(marked(marker)) >= (7 if wanted == "namespace" else 5)
        assert worktree_locked(worktree)
        step = step_processes(worktree, marker)
        killed_at = time.monotonic()
        worker.send_signal(sig)
        worker.wait(timeout=10)
        left = wait_gone(step, 2.0)
        assert left == [], f"{len(left)} processes of the step outlived the worker"
        assert marked(marker) == []
        assert time.monotonic() - killed_at < 2.5
        assert_next_lock_succeeds(worktree)
    finally:
        worker.kill()
        worker.wait()
        assert worker.stdout is not None
        worker.stdout.close()
        for pid in marked(marker):
            os.kill(pid, signal.SIGKILL)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize(
    "test",
    [
        # the kit's own worker (jigs_testing's WORKER_SCRIPT), as third-party authors run it
        "tests/core/test_conformance_isolation.py::test_the_worker_death_check_passes_for_echo",
        # this file's worker
        "tests/core/test_isolation.py::test_a_dying_worker_takes_every_process_of_its_step"
        "[namespace-2]",
    ],
)
def test_a_sigint_worker_test_passes_under_a_parent_that_ignores_sigint(test: str) -> None:
    """Started in the background from a script (SIGINT ignored, as a shell does for ``&``), the
    SIGINT tests once failed and blamed the kinds: the workers inherited the ignored SIGINT."""
    root = Path(__file__).resolve().parents[2]
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
        preexec_fn=_ignore_sigint,  # the parent a background job (cmd &) has
    )
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-2000:]
    assert "1 passed" in ran.stdout


def test_the_fallback_keeps_the_worktree_locked_after_sigkill(
    monkeypatch: pytest.MonkeyPatch, worktree: Path
) -> None:
    # without a namespace, a SIGKILLed worker leaves the tool commands running; they hold the
    # lock's descriptors, so a second agent is refused, never let in beside them
    monkeypatch.setenv(_isolation.ENV_VAR, "tree")
    marker = new_marker()
    worker = start_worker(worktree, marker, namespace=False)
    try:
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        time.sleep(0.2)
        assert marked(marker), "expected survivors in the fallback (setsid, nohup)"
        with pytest.raises(WorktreeBusyError) as info:
            WorktreeLock(worktree, "next-run").acquire()
        assert info.value.holder_run_id == "worker-run"
    finally:
        worker.kill()
        worker.wait()
        assert worker.stdout is not None
        worker.stdout.close()
        survivors = step_processes(worktree, marker)
        for pid, _ in survivors:
            os.kill(pid, signal.SIGKILL)
    assert wait_gone(survivors, 2.0) == []
    assert_next_lock_succeeds(worktree)


@pytest.mark.anyio
async def test_stop_kills_detached_descendants_in_both_modes(mode: str, tmp_path: Path) -> None:
    marker = new_marker()
    script = agent_script(marker, instant_setsid_orphan=mode == "namespace")
    process = await launch(
        [SH, "-c", script], cwd=tmp_path, env={"PATH": os.environ["PATH"]}, owner="t"
    )
    assert process.isolation is not None
    assert process.isolation.mode == mode
    assert await process.read_line() == b"ready"
    await anyio.sleep(0.1)  # one sampling interval for the fallback's tracker
    assert len(marked(marker)) >= (7 if mode == "namespace" else 5)
    started = time.monotonic()
    await process.stop(grace=3.0)
    assert time.monotonic() - started < 1.5  # everything dies of TERM: the grace is not used up
    assert marked(marker) == []
    assert process.returncode == -signal.SIGTERM
    assert live_groups() == {}


@pytest.mark.anyio
async def test_a_cli_that_ignores_sigterm_is_killed_after_the_grace(
    mode: str, tmp_path: Path
) -> None:
    marker = new_marker()
    script = f"trap '' TERM; sleep {marker} & setsid sleep {marker} & echo ready; wait"
    process = await launch([SH, "-c", script], cwd=tmp_path, env={}, owner="t")
    assert await process.read_line() == b"ready"
    await anyio.sleep(0.1)
    started = time.monotonic()
    await process.stop(grace=0.3)
    assert 0.25 < time.monotonic() - started < 1.5
    assert marked(marker) == []
    assert process.returncode is not None


@pytest.fixture
def canary_holder() -> Iterator[tuple[int, str]]:
    """A process of the worker's user whose environment holds a canary, as a worker's does
    (``/proc/<pid>/environ`` shows a process's initial environment, so it must be its own)."""
    canary = "host-canary-" + uuid.uuid4().hex
    holder = subprocess.Popen(["sleep", "60"], env={**os.environ, "JIGS_TEST_HOST_CANARY": canary})
    yield holder.pid, canary
    holder.kill()
    holder.wait()


@pytest.mark.anyio
async def test_the_agent_sees_only_its_own_step(
    tmp_path: Path, canary_holder: tuple[int, str]
) -> None:
    reset_isolation_cache()
    _, canary = canary_holder
    script = textwrap.dedent(
        """
        import json, os
        pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        environ = b""
        for pid in pids:
            try:
                with open(f"/proc/{pid}/environ", "rb") as fh:
                    environ += fh.read()
            except OSError:
                pass
        print(json.dumps({"pids": pids, "uid": os.getuid(), "euid": os.geteuid(),
                          "environ": environ.decode(errors="replace")}))
        """
    )
    env = {"PATH": os.environ["PATH"], "AGENT_OWN": "agent-own-value"}
    async with await launch(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, owner="t"
    ) as process:
        line = await process.read_line()
    assert line is not None
    seen = json.loads(line)
    assert "agent-own-value" in seen["environ"]  # reading environ works at all
    assert canary not in seen["environ"]
    assert "JIGS_TEST_HOST_CANARY" not in seen["environ"]
    assert max(seen["pids"]) < 10, seen["pids"]  # timeout (1), python (2): nothing else
    assert 1 in seen["pids"]
    assert seen["uid"] == os.getuid()
    assert seen["euid"] == os.geteuid()


@pytest.mark.anyio
async def test_control_the_fallback_does_let_the_agent_read_the_worker(
    tmp_path: Path, canary_holder: tuple[int, str]
) -> None:
    # proves the test above can fail: without the namespace the canary is right there
    pid, canary = canary_holder
    script = f"cat /proc/{pid}/environ | tr '\\0' '\\n'"
    async with await launch(
        [SH, "-c", script], cwd=tmp_path, env={}, owner="t", isolation_override=PLAIN
    ) as process:
        lines = [line async for line in process.lines()]
    assert f"JIGS_TEST_HOST_CANARY={canary}".encode() in lines


def test_a_non_root_worker_keeps_its_uid_inside() -> None:
    if os.geteuid() != 0:
        uid = os.geteuid()
        prefix: list[str] = []
    else:  # become an ordinary user for this worker
        uid = 65534
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    tmp_path = Path(tempfile.mkdtemp(prefix="jigs-nonroot-"))  # pytest's tmp is root-only
    tmp_path.chmod(0o777)
    worker = textwrap.dedent(
        """
        import os, sys, anyio
        from pathlib import Path
        from jigs.sandbox._isolation import isolation
        from jigs.processes import launch

        async def main():
            async with await launch(["/bin/sh", "-c", "id -u; ls /proc | grep -c '^[0-9]'"],
                                    cwd=Path(sys.argv[1]), env={}, owner="t") as p:
                lines = [line.decode() async for line in p.lines()]
            print(isolation().mode, isolation().detail, *lines, sep="|")

        anyio.run(main)
        """
    )
    env = {**os.environ, "HOME": str(tmp_path), "JIGS_DATA_DIR": str(tmp_path / "data")}
    try:
        done = subprocess.run(
            [*prefix, sys.executable, "-c", worker, str(tmp_path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    mode, detail, seen_uid, count = done.stdout.strip().split("|")
    assert mode == "namespace", detail
    assert "user + PID + mount" in detail
    assert int(seen_uid) == uid
    assert int(count) <= 4  # timeout, sh, ls, grep


@pytest.mark.anyio
async def test_a_missing_executable_is_still_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        await launch(["no-such-cli-xyz"], cwd=tmp_path, env={"PATH": "/nowhere"}, owner="t")
    (tmp_path / "notexec").write_text("#!/bin/sh\n")
    with pytest.raises(PermissionError):
        await launch([str(tmp_path / "notexec")], cwd=tmp_path, env={}, owner="t")
    assert live_groups() == {}


@pytest.mark.anyio
async def test_an_exit_code_and_a_signal_death_read_as_they_do_outside(tmp_path: Path) -> None:
    async with await launch([SH, "-c", "exit 3"], cwd=tmp_path, env={}, owner="t") as process:
        assert await process.wait() == 3
    async with await launch([SH, "-c", "kill -9 $$"], cwd=tmp_path, env={}, owner="t") as process:
        assert await process.wait() == -signal.SIGKILL


@pytest.mark.anyio
async def test_the_lock_lives_as_long_as_the_steps_processes(
    mode: str, worktree: Path, tmp_path: Path
) -> None:
    lock = WorktreeLock(worktree, "run-a")
    lock.acquire()
    marker = new_marker()
    process = await launch(
        [SH, "-c", f"setsid sleep {marker} & echo ready; wait"],
        cwd=tmp_path,
        env={},
        owner="t",
        pass_fds=lock.fds,
    )
    assert await process.read_line() == b"ready"
    lock.release()  # the worker lets go: the step's processes still hold it
    assert worktree_locked(worktree)
    await process.stop()
    assert not worktree_locked(worktree)


@pytest.mark.anyio
async def test_kill_returns_at_once_and_stop_waits_until_the_step_is_gone(
    mode: str, worktree: Path, tmp_path: Path
) -> None:
    """kill() signals without waiting (the caller works while the kernel tears the step down);
    stop() then returns only once every process of the step, detached ones included, is gone
    and so the lock they inherited is free; no TERM was sent (the agent's trap never ran)."""
    lock = WorktreeLock(worktree, "run-kill")
    lock.acquire()
    marker = new_marker()
    termed = tmp_path / "termed"
    script = f"trap 'touch {termed}' TERM\n" + agent_script(
        marker, instant_setsid_orphan=mode == "namespace"
    ).replace("exec sleep", "sleep")
    process = await launch(
        [SH, "-c", script],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"]},
        owner="t",
        pass_fds=lock.fds,
    )
    assert await process.read_line() == b"ready"
    await anyio.sleep(0.1)  # one sampling interval for the fallback's tracker
    lock.release()
    assert marked(marker)
    process.kill()
    process.kill()  # idempotent
    await process.stop(grace=3.0)  # after kill(): no TERM, no grace, only the wait
    assert marked(marker) == []
    assert not worktree_locked(worktree)
    assert process.returncode == -signal.SIGKILL
    assert not termed.exists()
    assert live_groups() == {}


@pytest.mark.anyio
async def test_stop_without_grace_sends_no_term(mode: str, tmp_path: Path) -> None:
    marker = new_marker()
    termed = tmp_path / "termed"
    script = f"trap 'touch {termed}' TERM; sleep {marker} & echo ready; wait; wait"
    process = await launch([SH, "-c", script], cwd=tmp_path, env={}, owner="t")
    assert await process.read_line() == b"ready"
    await process.stop(grace=0)
    assert marked(marker) == []
    assert process.returncode == -signal.SIGKILL
    assert not termed.exists()


@pytest.mark.anyio
async def test_stop_all_waits_for_a_step_that_was_killed(mode: str, tmp_path: Path) -> None:
    marker = new_marker()
    process = await launch(
        [SH, "-c", agent_script(marker, instant_setsid_orphan=mode == "namespace")],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"]},
        owner="t",
    )
    assert await process.read_line() == b"ready"
    await anyio.sleep(0.1)
    process.kill()
    stop_all(grace=3.0)  # what the SIGTERM handler runs while a close is under way
    assert marked(marker) == []
    await process.stop()
    assert live_groups() == {}


@pytest.mark.anyio
async def test_a_cli_that_exits_by_itself_as_it_is_killed_keeps_its_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The namespace's first process is alive when jigs looks, and gone (exit 1) when its
    SIGKILL would land: the exit code stays the CLI's, not a -SIGKILL jigs never sent."""
    from jigs.sandbox import _proctree

    reset_isolation_cache()
    flag = tmp_path / "go"
    script = f"echo ready; while [ ! -e {flag} ]; do sleep 0.01; done; exit 1"
    process = await launch([SH, "-c", script], cwd=tmp_path, env={}, owner="t")
    assert process.isolation is not None
    assert process.isolation.namespaced
    assert await process.read_line() == b"ready"
    real = _proctree.kill_procs

    def late_kill(procs: list[Proc]) -> int:
        flag.touch()  # the CLI finishes ...
        time.sleep(0.3)  # ... and its namespace ends just before the SIGKILL goes out
        return real(procs)

    monkeypatch.setattr(_proctree, "kill_procs", late_kill)
    process.kill()
    await process.stop()
    assert process.returncode == 1


def test_a_sigterm_while_a_step_is_being_killed_leaves_nothing(tmp_path: Path) -> None:
    """The worker's SIGTERM handler runs while the step's own kill is under way (here: just
    before its SIGKILL goes out), under trio (no parent-death signal to fall back on): the
    worker dies of SIGTERM and no process of the step survives."""
    marker = new_marker()
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        import anyio
        from jigs import processes
        from jigs.sandbox import _proctree

        real = _proctree.kill_procs
        fired = []

        def kill_procs(procs):
            if not fired:
                fired.append(1)
                os.kill(os.getpid(), signal.SIGTERM)
            return real(procs)

        async def main():
            p = await processes.launch(
                ["sh", "-c", "trap '' TERM; sleep {marker} & echo ready; wait"],
                cwd={str(tmp_path)!r}, env={{"PATH": os.environ["PATH"]}}, owner="t",
            )
            assert await p.read_line() == b"ready"
            _proctree.kill_procs = kill_procs
            await p.stop(grace=0)

        anyio.run(main, backend="trio")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == -signal.SIGTERM, done.stderr[-2000:]
    deadline = time.monotonic() + 3
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = marked(marker)
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    assert survivors == []


def test_doctor_says_which_isolation_is_in_force(monkeypatch: pytest.MonkeyPatch) -> None:
    from jigs.cli._doctor import isolation_line

    reset_isolation_cache()
    assert isolation_line().startswith("isolation: namespace")
    monkeypatch.setenv(_isolation.ENV_VAR, "tree")
    reset_isolation_cache()
    line = isolation_line()
    assert line.startswith("isolation: tree")
    assert "fix: " in line
    assert "user namespaces" in line
    reset_isolation_cache()


@pytest.mark.anyio
async def test_stop_all_stops_every_open_step_synchronously(tmp_path: Path) -> None:
    marker = new_marker()
    script = agent_script(marker)
    steps = [
        await launch([SH, "-c", script], cwd=tmp_path, env={}, owner=f"step {i}") for i in range(2)
    ]
    for step in steps:
        assert await step.read_line() == b"ready"
    assert len(marked(marker)) >= 14
    started = time.monotonic()
    stop_all(grace=3.0)  # what the SIGTERM handler runs
    assert time.monotonic() - started < 1.5  # all died of TERM: the grace was not used up
    assert marked(marker) == []
    for step in steps:
        await step.stop()  # the owners still close them: returns at once
    assert live_groups() == {}


@pytest.mark.anyio
async def test_an_application_can_opt_out_of_the_sigterm_handler(tmp_path: Path) -> None:
    previous = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        sigterm_handling(False)
        async with await launch([SH, "-c", "true"], cwd=tmp_path, env={}, owner="t"):
            pass
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        sigterm_handling(True)
        async with await launch([SH, "-c", "true"], cwd=tmp_path, env={}, owner="t"):
            pass
        assert signal.getsignal(signal.SIGTERM) is _on_sigterm
        sigterm_handling(False)  # removes it again
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        sigterm_handling(True)
        signal.signal(signal.SIGTERM, previous)


def _refusing_unshare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, before: str = "") -> None:
    """An ``unshare`` first on PATH that runs ``before`` (shell lines), then fails the way a
    hardened kernel makes it fail; the probe's cache is cleared."""
    fake = tmp_path / "bin" / "unshare"
    fake.parent.mkdir()
    fake.write_text(
        f"#!/bin/sh\n{before}echo 'unshare: unshare failed: Operation not permitted' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv(_isolation.ENV_VAR, raising=False)
    reset_isolation_cache()


def test_a_host_without_user_namespaces_falls_back_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an unshare that fails the way a hardened kernel makes it fail
    _refusing_unshare(tmp_path, monkeypatch)
    try:
        found = isolation()
        assert found.mode == "tree"
        assert "Operation not permitted" in found.detail
        assert "user namespaces" in found.fix
        assert found.prefix[1:] == ("--pdeathsig", "KILL", "--")  # the CLI still dies with us
    finally:
        reset_isolation_cache()


def test_a_probe_started_early_answers_the_first_caller_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a slow, failing unshare that counts its runs: the caller that asks while the early probe
    # runs collects that probe instead of guessing; its failure is checked once more (an early
    # probe can die of its starting thread's end), then the next candidate is tried
    runs = tmp_path / "runs"
    _refusing_unshare(tmp_path, monkeypatch, before=f"echo run >> {runs}\nsleep 0.3\n")
    try:
        asked = time.perf_counter()
        _isolation.probe_soon()
        _isolation.probe_soon()  # asked again while it runs (run_agent, then the step): one probe
        assert time.perf_counter() - asked < 0.2  # and the asking never waits for the probe
        found = isolation()
        assert found.mode == "tree"
        assert "Operation not permitted" in found.detail
        _isolation.probe_soon()  # known now: no second probe
        assert isolation() is found
        # the early run, its check, and for root the candidate with a user namespace
        expected = 3 if os.geteuid() == 0 else 2
        assert runs.read_text().splitlines() == ["run"] * expected
    finally:
        reset_isolation_cache()


def test_an_early_probe_outlived_by_its_thread_does_not_weaken_isolation() -> None:
    """``setpriv --pdeathsig`` follows the thread that started the chain: a probe started by a
    thread that then ends is SIGKILLed. That failure must not become this process's answer
    (tree mode, or a user namespace for root): the answer equals a plain probe's."""
    code = textwrap.dedent(
        """
        import sys, threading, time
        from jigs.sandbox import _isolation
        if sys.argv[1] == "early":
            def start():
                _isolation.probe_soon()
                time.sleep(0.003)  # setpriv is set up; the chain is still running
            thread = threading.Thread(target=start)
            thread.start()
            thread.join()
        found = _isolation.isolation()
        print(found.mode, found.prefix)
        """
    )
    answers = [
        subprocess.run(
            [sys.executable, "-c", code, how], capture_output=True, text=True, check=True
        ).stdout
        for how in ("plain", "early", "early", "early")
    ]
    assert answers[1:] == [answers[0]] * 3, answers


def test_a_forked_child_probes_for_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent started the probe (unshare refused here) and forked before collecting it: the
    child holds none of the parent's probe processes (it would wait on a pid that is not its
    child and read the parent's probe output), its answer comes from its own probe, and the
    parent still gets its own. Forked in a fresh, single-threaded interpreter (forking this test
    process would copy its threads' locks)."""
    _refusing_unshare(tmp_path, monkeypatch, before="sleep 0.2\n")
    code = textwrap.dedent(
        """
        import os
        from jigs.sandbox import _isolation
        _isolation.probe_soon()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report its mode, leave without the parent's atexit
            try:
                os.close(read)
                held = len(_isolation._EARLY.started)  # none of the parent's probe processes
                os.write(write, f"{held}:{_isolation.isolation().mode}".encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            child = pipe.read().decode()
        os.waitpid(pid, 0)
        print(child, _isolation.isolation().mode)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0:tree", "tree"]


@pytest.mark.anyio
async def test_a_step_stopped_right_after_launch_leaves_nothing(mode: str, tmp_path: Path) -> None:
    marker = new_marker()
    # the fallback cannot see a setsid process orphaned within its sampling interval
    detach = "setsid" if mode == "namespace" else ""
    started = time.monotonic()
    for _ in range(10):
        process = await launch(
            [SH, "-c", f"{detach} sleep {marker} & exec sleep {marker}"],
            cwd=tmp_path,
            env={},
            owner="t",
        )
        await process.stop()
    assert time.monotonic() - started < 5  # no stop waited out its grace
    assert wait_until_none(marker, 1.0) == []
    assert live_groups() == {}
