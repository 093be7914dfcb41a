"""A worker that cannot enter its sandbox's network namespace (not root) still serves the
sandbox's listeners there, through the bridge (jigs.sandbox._bridge): the listening sockets
reach the worker's servers, the bridge is gone once the CLI runs (executed in place), and
nothing of the plumbing is left open, in the worker or in the CLI.

The unprivileged worker is ``nobody`` when the tests run as root (else the user itself), on a
virtual environment made for it from a base Python it can run, which reaches this checkout's
packages through a ``.pth`` file (the checkout must be traversable: ``.ci/run``)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from jigs.processes import launch
from jigs.sandbox import SandboxView, sandbox_problem
from jigs.sandbox._netns import force_bridge

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]

#: The agent: connects to the port it is given, then says what the sandbox's first process is
#: and which of its own descriptors are sockets, and waits a little (so the worker can look
#: for the bridge while it runs).
AGENT = textwrap.dedent(
    """
    import os, socket, sys, time
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5).close()
    names = [os.readlink("/proc/self/fd/" + f) for f in os.listdir("/proc/self/fd")
             if os.path.exists("/proc/self/fd/" + f)]
    first = open("/proc/1/cmdline", "rb").read().split(b"\\0")[0].decode()
    print(first, sum(n.startswith("socket:") for n in names), flush=True)
    time.sleep(0.3)
    """
)

#: The worker: one sandboxed launch with a listener, as a step makes it.
WORKER = textwrap.dedent(
    """
    import json, os, socket, sys, anyio
    from pathlib import Path
    from jigs.processes import launch
    from jigs.sandbox import SandboxView
    from jigs.sandbox._netns import uses_bridge

    cwd, port, agent = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

    def bridges() -> int:
        # processes running the bridge: python -I -S .../_bridge.py ... (bwrap's own argv
        # names it too, further on; this worker's code as well)
        found = 0
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\\0")
            except OSError:
                continue
            found += argv[1:3] == [b"-I", b"-S"] and argv[3].endswith(b"_bridge.py")
        return found

    async def main() -> None:
        got: list[socket.socket] = []
        view = SandboxView(home=str(cwd / "home"), listen={port: got.append})
        view.expose(cwd, writable=True)
        before = len(os.listdir("/proc/self/fd"))
        python = os.path.realpath(sys.executable)  # not the venv's link: the sandbox lacks it
        process = await launch([python, "-I", "-c", agent, str(port)], cwd=cwd,
                               env={}, owner="t", sandbox=view)
        async with process:
            line = (await process.read_line() or b"").decode()
            running = bridges()
            code = await process.wait()
        accepted = 0
        for sock in got:
            with anyio.move_on_after(5):
                await anyio.wait_readable(sock)
                sock.accept()[0].close()
                accepted += 1
            sock.close()
        print(json.dumps({
            "bridge": uses_bridge(), "euid": os.geteuid(), "line": line, "code": code,
            "bridges": running, "accepted": accepted, "stderr": process.stderr_tail(),
            "fds": [before, len(os.listdir("/proc/self/fd"))],
        }))

    anyio.run(main)
    """
)


@dataclass
class Unprivileged:
    prefix: list[str]
    python: str  # a virtual environment's, reaching this checkout's packages
    home: Path

    def run(
        self, code: str, *args: str, cli_dir: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(self.home),
            "JIGS_DATA_DIR": str(self.home / "data"),
            **{k: v for k, v in os.environ.items() if k == "JIGS_CLI_DIR"},
            **({"JIGS_CLI_DIR": str(cli_dir)} if cli_dir is not None else {}),
        }
        return subprocess.run(
            [*self.prefix, self.python, "-c", code, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )


def _base_python(prefix: list[str]) -> str | None:
    """A Python of this version the unprivileged user can run (this venv's may live under a
    home it cannot enter)."""
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    candidates = [getattr(sys, "_base_executable", ""), sys.executable]
    candidates = [os.path.realpath(c) for c in candidates if c]
    candidates += [f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]
    check = (
        "import os, sys; assert os.access(sys.executable, os.X_OK); "
        f"assert sys.version.startswith({version + '.'!r})"
    )
    for candidate in dict.fromkeys(candidates):
        if os.path.exists(candidate):
            done = subprocess.run(
                [*prefix, candidate, "-I", "-c", check], capture_output=True, check=False
            )
            if done.returncode == 0:
                return candidate
    return None


@pytest.fixture(scope="module")
def unprivileged() -> Iterator[Unprivileged]:
    problem = sandbox_problem()
    if problem is not None:
        pytest.skip(f"this host cannot sandbox: {problem}")
    prefix = NOBODY if os.geteuid() == 0 else []
    base = _base_python(prefix)
    if base is None:
        pytest.skip("no Python of this version that the unprivileged user can run")
    home = Path(tempfile.mkdtemp(prefix="jigs-nonroot-"))  # pytest's tmp is root-only
    try:
        subprocess.run([base, "-m", "venv", "--without-pip", str(home / "venv")], check=True)
        purelib = Path(sysconfig.get_paths()["purelib"])
        found = list((home / "venv" / "lib").glob("python*/site-packages"))
        (found[0] / "jigs-tests.pth").write_text(
            f"import site; site.addsitedir({str(purelib)!r})\n"
        )
        if prefix:
            for path in [home, *home.rglob("*")]:
                os.chown(path, 65534, 65534, follow_symlinks=False)
        yield Unprivileged(prefix, str(home / "venv" / "bin" / "python"), home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _check_launch(said: dict[str, object]) -> None:
    assert said["code"] == 0, said["stderr"]
    first, sockets = str(said["line"]).split()
    assert os.path.basename(first) == "timeout", said  # the bridge executed the command
    assert sockets == "0", said  # neither the channel nor a listener reached the CLI
    assert said["bridges"] == 0, said
    assert said["accepted"] == 1, said
    before, after = said["fds"]  # type: ignore[misc]
    assert after == before, said


def test_a_non_root_worker_serves_its_listener_inside_the_sandbox(
    unprivileged: Unprivileged,
) -> None:
    cwd = unprivileged.home / f"tree-{os.urandom(4).hex()}"
    cwd.mkdir()
    if unprivileged.prefix:
        os.chown(cwd, 65534, 65534)
    done = unprivileged.run(WORKER, str(cwd), str(_free_port()), AGENT)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["euid"] != 0
    assert said["bridge"] is True
    _check_launch(said)


ECHO_STEP = textwrap.dedent(
    """
    import json, socket, sys, threading, anyio
    from pathlib import Path
    from urllib.parse import quote
    import jigs.engine._mcp_probe
    from jigs import RunMetadata, harnesses
    from jigs.steps import run_agent

    # the relay, not MCP, is under test: the server behind it only says hello
    jigs.engine._mcp_probe.mcp_probe_checks = lambda *args, **kwargs: []
    server = socket.create_server(("127.0.0.1", 0))
    port, accepted = server.getsockname()[1], []

    def serve() -> None:
        conn, _ = server.accept()
        accepted.append(1)
        conn.sendall(b"hello-from-the-worker")
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    connect = f"import socket; print(socket.create_connection(('127.0.0.1', {port}), 5).recv(99))"
    url = f"http://127.0.0.1:{port}/mcp"
    harness = harnesses.echo(
        sandbox="on", mcp_servers={"m": {"url": url, "probe": {"tool": "t"}}}
    )

    async def main() -> None:
        result = await run_agent(
            harness=harness, cwd=Path(sys.argv[1]), run=RunMetadata(workflow_run_id="nonroot"),
            prompt="sh:" + quote(f"python3 -c {json.dumps(connect)}"),
        )
        print(json.dumps({"text": result.text, "accepted": len(accepted)}))

    anyio.run(main)
    """
)


def test_a_non_root_workers_sandboxed_echo_step_reaches_its_relay(
    unprivileged: Unprivileged,
) -> None:
    # a declared MCP server on the worker's loopback is relayed into the sandbox on a
    # listening socket made there: the agent's shell reaches it through the bridge
    tree = unprivileged.home / f"worktree-{os.urandom(4).hex()}"
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    if unprivileged.prefix:
        for path in [tree, *tree.rglob("*")]:
            os.chown(path, 65534, 65534, follow_symlinks=False)
    done = unprivileged.run(ECHO_STEP, str(tree))
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert "hello-from-the-worker" in said["text"], said
    assert said["accepted"] == 1


@pytest.fixture
def bridged() -> Iterator[None]:
    if sandbox_problem() is not None:
        pytest.skip(f"this host cannot sandbox: {sandbox_problem()}")
    force_bridge(True)
    yield
    force_bridge(None)


@pytest.mark.anyio
async def test_the_bridge_says_why_it_could_not_listen(bridged: None, tmp_path: Path) -> None:
    # inside, the agent has no capability: a port below 1024 cannot be bound there
    got: list[socket.socket] = []
    view = SandboxView(home=str(tmp_path / "home"), listen={80: got.append})
    view.expose(tmp_path, writable=True)
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(
        OSError, match=r"socket bridge failed: listening on 127\.0\.0\.1 in the sandbox"
    ):
        await launch(["/bin/true"], cwd=tmp_path, env={}, owner="t", sandbox=view)
    assert got == []
    assert len(os.listdir("/proc/self/fd")) == before


@pytest.mark.anyio
async def test_a_bridge_that_never_answers_is_a_bounded_clear_error(
    bridged: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jigs.sandbox._netns as netns

    monkeypatch.setattr(netns, "BRIDGE_TIMEOUT", 0.5)
    stuck = tmp_path / "stuck.py"
    stuck.write_text("import time; time.sleep(30)\n")
    monkeypatch.setattr(netns, "BRIDGE", str(stuck))
    view = SandboxView(home=str(tmp_path / "home"), listen={8080: lambda sock: sock.close()})
    view.expose(tmp_path, writable=True)
    before = len(os.listdir("/proc/self/fd"))
    with anyio.fail_after(10), pytest.raises(OSError, match="handed over no listening socket"):
        await launch(["/bin/true"], cwd=tmp_path, env={}, owner="t", sandbox=view)
    assert len(os.listdir("/proc/self/fd")) == before


@pytest.mark.anyio
async def test_the_bridge_serves_a_root_worker_just_as_well(bridged: None, tmp_path: Path) -> None:
    # the same way in-process (forced), so hosts that cannot run a nobody worker check it too
    port = _free_port()
    got: list[socket.socket] = []
    view = SandboxView(home=str(tmp_path / "home"), listen={port: got.append})
    view.expose(tmp_path, writable=True)
    before = len(os.listdir("/proc/self/fd"))
    agent = [os.path.realpath(sys.executable), "-I", "-c", AGENT, str(port)]
    async with await launch(agent, cwd=tmp_path, env={}, owner="t", sandbox=view) as process:
        line = (await process.read_line() or b"").decode()
        code = await process.wait()
    assert len(got) == 1
    with anyio.fail_after(5):
        await anyio.wait_readable(got[0])
    got[0].accept()[0].close()
    got[0].close()
    first, sockets = line.split()
    assert code == 0, process.stderr_tail()
    assert os.path.basename(first) == "timeout"
    assert sockets == "0"
    assert len(os.listdir("/proc/self/fd")) == before


CONTAINED = textwrap.dedent(
    """
    import json, sys, anyio
    from pathlib import Path
    from jigs.registry._registry import default_registry
    from jigs.env import build_env
    from jigs.errors import CliNotFoundError
    from jigs_testing.conformance import check_harness

    async def main() -> None:
        try:
            default_registry().get(sys.argv[1]).resolve_executable(build_env([]))
        except (CliNotFoundError, PermissionError) as exc:  # under a home it cannot enter
            print(json.dumps({"missing": str(exc)}))
            return
        report = await check_harness(sys.argv[1], tmp_path=Path(sys.argv[2]), only=["containment"])
        print(json.dumps({"passed": report.passed, "skipped": [str(s) for s in report.skipped]}))

    anyio.run(main)
    """
)


@pytest.mark.parametrize("kind", ["claude", "codex", "pi"])
def test_a_non_root_workers_real_cli_reaches_its_model_and_is_contained(
    unprivileged: Unprivileged, kind: str
) -> None:
    # the kit's containment check: the real CLI talks to the fake model through the step's
    # credential proxy, whose socket the bridge made inside the sandbox, then attacks the host
    tmp = unprivileged.home / f"kit-{kind}-{os.urandom(4).hex()}"
    tmp.mkdir()
    cli_dir = None
    if kind == "pi" and unprivileged.prefix:
        # `jigs install pi` put Pi in root's data dir, which nobody cannot enter: a copy of it
        from jigs.executables import installed_dir

        cli_dir = unprivileged.home / "clis"
        shutil.copytree(installed_dir("pi"), cli_dir / "pi", symlinks=True)
    if unprivileged.prefix:
        for path in [tmp, *([cli_dir, *cli_dir.rglob("*")] if cli_dir else [])]:
            os.chown(path, 65534, 65534, follow_symlinks=False)
    done = unprivileged.run(CONTAINED, kind, str(tmp), cli_dir=cli_dir)
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    if "missing" in said:
        why = f"the unprivileged user cannot run the {kind} CLI: {said['missing'][:300]}"
        if os.environ.get("CI"):  # in CI a CLI that cannot run is a failure, never a skip
            pytest.fail(why)
        pytest.skip(why)
    assert said["passed"] == ["containment"], said
