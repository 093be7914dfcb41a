"""The worktree lock is keyed on the directory itself: every spelling of a held worktree, every
directory inside it or containing it, from any data dir, HOME or process, is refused at once;
siblings coexist; every race has exactly one winner; a dead holder frees it. A step on a held
worktree fails at once, before its checks or MCP servers run; the lock file lives outside it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from jigs import RunMetadata, harnesses
from jigs.errors import WorktreeBusyError, WorktreeLockError
from jigs.models import generate_text
from jigs.policy._lock import WorktreeLock, lock_path_for, worktree_locked
from jigs.steps import create_agent_runner


@pytest.fixture
def held(worktree: Path) -> Iterator[WorktreeLock]:
    lock = WorktreeLock(worktree, "holder-run")
    lock.acquire()
    yield lock
    lock.release()


def refused(path: Path, run_id: str = "second-run") -> WorktreeBusyError:
    started = time.perf_counter()
    with pytest.raises(WorktreeBusyError) as info:
        WorktreeLock(path, run_id).acquire()
    assert time.perf_counter() - started < 0.1
    return info.value


def test_the_same_worktree_is_refused_fast_and_names_the_holder(
    worktree: Path, held: WorktreeLock
) -> None:
    error = refused(worktree)
    assert error.holder_run_id == "holder-run"
    assert error.holder_pid == os.getpid()
    assert "holder-run" in str(error)


def test_a_subdirectory_and_a_containing_directory_are_refused(
    worktree: Path, held: WorktreeLock
) -> None:
    sub = worktree / "src" / "deep"
    sub.mkdir(parents=True)
    assert refused(sub).holder_run_id == "holder-run"
    assert refused(worktree.parent).holder_pid == os.getpid()  # named from /proc/locks


def test_a_held_subdirectory_refuses_its_ancestor_and_siblings_coexist(worktree: Path) -> None:
    a, b = worktree / "a", worktree / "b"
    a.mkdir()
    b.mkdir()
    first, second = WorktreeLock(a, "run-a"), WorktreeLock(b, "run-b")
    first.acquire()
    second.acquire()  # a sibling: no overlap
    try:
        refused(worktree)
        refused(worktree.parent)
        refused(a / ".")
    finally:
        first.release()
        second.release()
    third = WorktreeLock(worktree, "run-c")
    third.acquire()
    third.release()


def test_a_symlink_and_dotdot_spellings_are_refused(
    worktree: Path, held: WorktreeLock, tmp_path: Path
) -> None:
    link = tmp_path / "link"
    link.symlink_to(worktree)
    assert refused(link).holder_run_id == "holder-run"
    (worktree / "x").mkdir()
    assert refused(worktree / "x" / "..").holder_run_id == "holder-run"
    assert refused(link / "x").holder_run_id == "holder-run"


CONTENDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from jigs.policy._lock import WorktreeLock
    from jigs.errors import WorktreeBusyError
    try:
        WorktreeLock(Path(sys.argv[1]), "other-process").acquire()
    except WorktreeBusyError as exc:
        print("refused", exc.holder_pid)
    else:
        print("acquired")
    """
)


def contend(path: Path, env: dict[str, str], prefix: tuple[str, ...] = ()) -> str:
    done = subprocess.run(
        [*prefix, sys.executable, "-c", CONTENDER, str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_another_data_dir_and_home_are_refused(
    worktree: Path, held: WorktreeLock, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "JIGS_DATA_DIR": str(tmp_path / "other-data"),
        "HOME": str(tmp_path / "other-home"),
    }
    assert contend(worktree, env) == f"refused {os.getpid()}"
    assert contend(worktree / ".git", env) == f"refused {os.getpid()}"


def test_a_bind_mount_is_refused(worktree: Path, held: WorktreeLock, tmp_path: Path) -> None:
    mount = tmp_path / "bind"
    mount.mkdir()
    if os.geteuid() == 0:
        subprocess.run(["mount", "--bind", str(worktree), str(mount)], check=True)
        try:
            assert refused(mount).holder_run_id == "holder-run"
            assert contend(mount / ".git", dict(os.environ)) == f"refused {os.getpid()}"
        finally:
            subprocess.run(["umount", str(mount)], check=True)
    else:  # an ordinary user makes the bind mount in a mount namespace of its own
        script = f'mount --bind {worktree} {mount} && exec "$@"'
        prefix = ("unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh")
        assert contend(mount, dict(os.environ), prefix).startswith("refused")


def test_twenty_racers_one_winner_twenty_times(tmp_path: Path) -> None:
    """20 forked processes released at once on one worktree (half of them through a symlink,
    a quarter on a subdirectory or the parent): exactly one wins each trial."""
    for trial in range(20):
        root = tmp_path / f"trial{trial}"
        worktree = root / "worktree"
        (worktree / "sub").mkdir(parents=True)
        (root / "link").symlink_to(worktree)
        spellings = [worktree, root / "link", worktree / "sub", root]
        go_read, go_write = os.pipe()
        done_read, done_write = os.pipe()
        tried_read, tried_write = os.pipe()
        children = []
        for i in range(20):
            lock = WorktreeLock(spellings[0 if i % 2 else (i // 2) % 4], f"racer-{i}")
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                code = 2
                try:
                    os.close(go_write)
                    os.close(done_write)
                    os.close(tried_read)
                    os.read(go_read, 1)  # every racer blocks here until the pipe closes
                    try:
                        lock.acquire()
                        code = 0
                    except WorktreeBusyError:
                        code = 1
                    os.write(tried_write, b"x")
                    os.read(done_read, 1)  # hold until every racer has tried
                finally:
                    os._exit(code)
            children.append(pid)
        os.close(go_read)
        os.close(done_read)
        os.close(tried_write)
        time.sleep(0.02)
        os.close(go_write)  # go
        tried = b""
        while len(tried) < 20 and (chunk := os.read(tried_read, 20)):
            tried += chunk
        os.close(tried_read)
        os.close(done_write)
        codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
        assert sorted(codes) == [0] + [1] * 19, f"trial {trial}: {codes}"
    assert not worktree_locked(tmp_path / "trial0" / "worktree")


def test_a_killed_holder_frees_the_worktree(worktree: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", CONTENDER + "\nimport time; time.sleep(60)", str(worktree)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "acquired"
        assert refused(worktree).holder_run_id == "other-process"
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        lock = WorktreeLock(worktree, "next")
        lock.acquire()
        lock.release()
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def test_release_is_idempotent_and_fds_follow_the_state(worktree: Path) -> None:
    lock = WorktreeLock(worktree, "run")
    assert lock.fds == ()
    assert not lock.held
    lock.acquire()
    assert lock.held
    assert len(lock.fds) == len(worktree.parents) + 1
    for fd in lock.fds:
        assert not os.get_inheritable(fd)  # only launch(pass_fds=...) hands them on
    lock.acquire()  # no-op when held
    lock.release()
    lock.release()
    assert lock.fds == ()
    assert not worktree_locked(worktree)


def test_a_missing_worktree_is_a_lock_error_not_busy(tmp_path: Path) -> None:
    with pytest.raises(WorktreeLockError, match="could not lock the worktree"):
        WorktreeLock(tmp_path / "missing", "run").acquire()


@pytest.mark.anyio
async def test_tree_fallback_refuses_a_worktree_a_dead_workers_command_still_works_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without namespaces a killed worker's agent commands can survive it without the lock's
    descriptor: the next step is refused while any of them works in the worktree."""
    import subprocess

    from jigs import RunMetadata, harnesses
    from jigs.errors import WorktreeBusyError
    from jigs.sandbox import _isolation
    from jigs.steps import run_agent

    worktree = tmp_path / "wt"
    worktree.mkdir()
    survivor = subprocess.Popen(["sleep", "60"], cwd=worktree, start_new_session=True)
    monkeypatch.setenv(_isolation.ENV_VAR, "tree")
    _isolation.reset_isolation_cache()
    try:
        with pytest.raises(WorktreeBusyError) as info:
            await run_agent(
                harness=harnesses.echo(),
                cwd=worktree,
                prompt="x",
                run=RunMetadata(workflow_run_id="after-kill"),
            )
        assert info.value.holder_pid == survivor.pid
        survivor.kill()
        survivor.wait()
        result = await run_agent(
            harness=harnesses.echo(),
            cwd=worktree,
            prompt="x",
            run=RunMetadata(workflow_run_id="after-kill"),
        )
        assert result.text.startswith("echo: x")
    finally:
        survivor.kill()
        _isolation.reset_isolation_cache()


@pytest.mark.anyio
async def test_a_second_runner_on_the_same_worktree_fails_at_once(worktree, run_meta):
    async with create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta):
        started = time.perf_counter()
        other = RunMetadata(workflow_run_id="second-run")
        with pytest.raises(WorktreeBusyError) as info:
            await create_agent_runner(harnesses.echo(), cwd=worktree, run=other)
        assert time.perf_counter() - started < 1
        assert info.value.holder_run_id == run_meta.workflow_run_id
        assert str(worktree) in str(info.value)
        assert run_meta.workflow_run_id in str(info.value)
    assert not worktree_locked(worktree)


HOLDER = textwrap.dedent(
    """
    import sys, anyio
    from jigs import harnesses, RunMetadata
    from jigs.steps import create_agent_runner

    async def main():
        runner = await create_agent_runner(
            harnesses.echo(), cwd=sys.argv[1], run=RunMetadata(workflow_run_id="holder-run"))
        print("held", flush=True)
        await anyio.sleep(60)

    anyio.run(main)
    """
)


@pytest.mark.anyio
async def test_lock_is_exclusive_across_processes_and_survives_sigkill_of_its_holder(
    worktree, run_meta
):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(worktree)],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(WorktreeBusyError) as info:
            await create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta)
        assert info.value.holder_run_id == "holder-run"
        assert info.value.holder_pid == holder.pid
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    async with create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta) as runner:
        assert (await generate_text(runner.model, prompt="after")).text.startswith("echo: after")


@pytest.mark.anyio
async def test_lock_file_lives_outside_the_worktree(worktree, jigs_data_dir):
    path = lock_path_for(worktree)
    assert jigs_data_dir in path.parents
    assert worktree not in path.parents


@pytest.mark.anyio
async def test_a_busy_worktree_fails_before_the_checks_run(worktree, run_meta, tmp_path):
    marker = tmp_path / "probe-started"
    server = str(Path(__file__).resolve().parents[1] / "fixtures" / "mcp_server.py")
    descriptor = harnesses.echo(
        mcp_servers={
            "m": {
                "command": sys.executable,
                "args": [server, "--marker", str(marker)],
                "probe": {"tool": "probe"},
            }
        }
    )
    async with create_agent_runner(harnesses.echo(), cwd=worktree, run=run_meta):
        with pytest.raises(WorktreeBusyError):
            await create_agent_runner(
                descriptor, cwd=worktree, run=RunMetadata(workflow_run_id="other")
            )
    assert not marker.exists()  # no MCP server was started for a step that could not run
