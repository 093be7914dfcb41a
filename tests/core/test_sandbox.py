"""The per-step sandbox: the host that cannot sandbox refuses (or, opted out, runs and says so),
the kit's containment check catches a step that is not contained, and the view hides what it
must. The attacks themselves, with every real CLI, are the kit's ``containment`` check
(tests/harnesses/test_conformance_kinds.py)."""

import os
import shutil
import subprocess
import tempfile

import pytest
from jigs import harnesses
from jigs.errors import PromptError, SandboxUnavailableError
from jigs.sandbox import _probe
from jigs.sandbox._view import SandboxView, bwrap_args
from jigs.steps import run_agent
from jigs_testing.conformance import check_harness
from structlog.testing import capture_logs

pytestmark = pytest.mark.anyio


@pytest.fixture
def no_sandbox(monkeypatch):
    # a bwrap that cannot run stands for a host without user namespaces
    monkeypatch.setenv(_probe.BWRAP_VAR, "/nonexistent/bwrap")


async def test_a_host_without_the_sandbox_refuses_a_step_before_the_lock(
    no_sandbox, worktree, run_meta
):
    # the sandbox is the default: a descriptor that says nothing about it is refused too
    assert harnesses.echo().sandbox == "on"
    with pytest.raises(SandboxUnavailableError) as raised:
        await run_agent(harness=harnesses.echo(), prompt="hi", cwd=worktree, run=run_meta)
    error = raised.value
    assert error.kind == "echo"
    assert not error.retryable
    assert "bwrap did not run" in error.reason
    assert 'set sandbox="off"' in str(error)  # the opt-out is named
    with capture_logs() as logs:  # nothing was left taken: the worktree runs a step at once
        result = await run_agent(
            harness=harnesses.echo(sandbox="off"), prompt="hi", cwd=worktree, run=run_meta
        )
    assert result.text
    assert not any(e["event"] == "runner.lock.acquired" and e.get("error") for e in logs)
    # the opt-out is logged
    assert any(e["event"] == "runner.sandbox.off" for e in logs)


@pytest.fixture
def fresh_probe(monkeypatch):
    # this process's answer and early probe, forgotten for the test and restored after it
    monkeypatch.setattr(_probe._EARLY, "answers", {})
    monkeypatch.setattr(_probe._EARLY, "started", {})


def test_the_early_sandbox_probe_is_collected_as_the_answer(fresh_probe, monkeypatch):
    _probe.probe_soon()
    (early,) = _probe._EARLY.started.values()

    def second_probe(*args):
        raise AssertionError("the early probe's answer was not taken")

    monkeypatch.setattr(_probe, "_spawn", second_probe)
    assert _probe.sandbox_problem() is None  # this host sandboxes (the suite needs it)
    assert early.returncode == 0  # its answer, reaped
    assert not _probe._EARLY.started
    _probe.probe_soon()  # answered: nothing more is started
    assert not _probe._EARLY.started


def test_an_early_probe_of_another_bwrap_is_not_the_answer(fresh_probe, monkeypatch):
    # the early probe succeeds, but the bwrap a step would run changed since: probed again
    _probe.probe_soon()
    (early,) = _probe._EARLY.started.values()
    monkeypatch.setattr(_probe, "bwrap_executable", lambda: "/nonexistent/bwrap")
    assert "bwrap did not run" in (_probe.sandbox_problem() or "")
    assert early.returncode is not None  # reaped, not left a zombie


async def test_a_refused_step_leaves_no_early_probe_behind(fresh_probe, worktree, run_meta):
    with pytest.raises(PromptError):
        await run_agent(harness=harnesses.echo(), prompt="", cwd=worktree, run=run_meta)
    assert not _probe._EARLY.started
    assert _probe._EARLY.answers  # collected, and kept for the next step


@pytest.mark.parametrize(
    ("check", "finding"),
    [
        # the agent then reaches the worker's loopback, which the containment check must see
        ("containment", "loopback port of the worker"),
        # the second step's agent reaches the first step's tool server port: the token still
        # refuses it (401), and the check fails on the request that arrived
        ("tools_of_another_step", "that agent reached A's port"),
    ],
)
async def test_the_kit_catches_a_step_on_the_hosts_network(tmp_path, check, finding):
    # network="host" is the documented opt-out: what it lets an agent reach, the kit must see
    with pytest.raises(AssertionError, match=finding):
        await check_harness(
            "echo",
            lambda server: harnesses.echo(sandbox="on", network="host"),
            tmp_path=tmp_path,
            only=[check],
        )


async def test_python_on_sys_path_shows_no_other_step_nor_the_home(
    tmp_path, monkeypatch, worktree, run_meta
):
    # a worker started from /tmp (or its home) has that directory on sys.path; a kind whose CLI
    # runs on the worker's Python (expose_python) must not show it: other steps' private dirs
    # and worktrees live in the temp dir (the kit's tools_of_another_step found one listed)
    from urllib.parse import quote

    from jigs.sandbox._private_dirs import make_owned_dir

    home = tmp_path / "home"
    home.mkdir()
    (home / "canary").write_text("HOME-CANARY")
    monkeypatch.setenv("HOME", str(home))
    other = make_owned_dir("jigs-other-step-")
    (other / "canary").write_text("OTHER-STEP-CANARY")
    monkeypatch.syspath_prepend(str(home))
    monkeypatch.syspath_prepend(tempfile.gettempdir())
    command = f"cat {other}/canary {home}/canary; echo looked"
    try:
        with capture_logs() as logs:
            result = await run_agent(
                harness=harnesses.echo(), prompt=f"sh:{quote(command)}", cwd=worktree, run=run_meta
            )
    finally:
        shutil.rmtree(other)
    assert "looked" in result.text
    assert "CANARY" not in result.text
    hidden = {e["path"] for e in logs if e["event"] == "sandbox.python.hidden"}
    assert {tempfile.gettempdir(), str(home)} <= hidden


async def test_the_kit_catches_a_step_that_shows_the_home(tmp_path, monkeypatch):
    import jigs.sandbox._view as view

    original = view.bwrap_args

    def home_shown(sandbox, **options):
        return [*original(sandbox, **options), "--ro-bind", os.environ["HOME"], os.environ["HOME"]]

    monkeypatch.setattr(view, "bwrap_args", home_shown)
    with pytest.raises(AssertionError, match="read a planted canary"):
        await check_harness("echo", tmp_path=tmp_path, only=["containment"])


def test_the_view_masks_machine_secrets_and_shows_only_what_it_lists(tmp_path):
    shown, hidden = tmp_path / "shown", tmp_path / "hidden"
    shown.mkdir()
    hidden.mkdir()
    (hidden / "secret").write_text("nope")
    view = SandboxView(home=str(tmp_path / "home"), network="deny")
    view.expose(shown, writable=True)
    found = _probe.sandbox_isolation()
    args = bwrap_args(view, cwd=shown, info_fd=None, block_fd=None, die_with_parent=False)
    script = (
        f"cat {hidden}/secret; cat /etc/shadow; ls /etc/ssh; echo ok > {shown}/w && echo wrote;"
        "touch /usr/x 2>/dev/null || echo usr-ro; cat /proc/self/status | grep CapEff"
    )
    done = subprocess.run(
        [found.prefix[0], *args, "--", "/bin/sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert "nope" not in done.stdout
    assert "wrote" in done.stdout
    assert (shown / "w").read_text() == "ok\n"
    assert "usr-ro" in done.stdout
    assert "CapEff:\t0000000000000000" in done.stdout
    assert not any(line.startswith(("root:", "ssh_host")) for line in done.stdout.splitlines())


def test_a_linked_file_in_the_empty_home_serves_the_exposed_copy(tmp_path):
    # HarnessContext.expose(at=...): a CLI's config file in the empty HOME is a link to the
    # step's private copy; writes through it land in the copy, the home stays empty otherwise
    private, home, work = tmp_path / "private", tmp_path / "home", tmp_path / "work"
    for path in (private, work):
        path.mkdir()
    (private / "conf.json").write_text("{}\n")
    view = SandboxView(home=str(home), network="deny")
    view.expose(work, writable=True)
    view.expose(private, writable=True)
    view.links[home / ".conf.json"] = private / "conf.json"
    args = bwrap_args(view, cwd=work, info_fd=None, block_fd=None, die_with_parent=False)
    script = f"cat {home}/.conf.json; echo '[1]' > {home}/.conf.json; ls -A {home}"
    done = subprocess.run(
        [_probe.sandbox_isolation().prefix[0], *args, "--", "/bin/sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.stdout.split() == ["{}", ".conf.json"], done.stderr
    assert (private / "conf.json").read_text() == "[1]\n"
    assert not home.exists()  # the home was the sandbox's own tmpfs, nothing of the worker's


class _Upstream:
    """A plain HTTP server on the worker's loopback that counts its requests."""

    def __init__(self) -> None:
        import http.server
        import threading

        hits = self.hits = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"upstream-says-hi")

            def log_message(self, *args: object) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


async def test_allowed_hosts_are_reached_through_the_egress_proxy_and_nothing_else(
    worktree, run_meta
):
    from urllib.parse import quote

    allowed, other = _Upstream(), _Upstream()
    try:
        command = (
            # -x: loopback is in NO_PROXY (the step's credential proxy is reached directly)
            f'curl -s -m 5 --noproxy "" -x "$HTTP_PROXY" http://127.0.0.1:{allowed.port}/allowed; echo; '
            f"curl -s -m 5 --noproxy '' -x \"$HTTP_PROXY\" -o /dev/null -w '%{{http_code}}' "
            f"http://127.0.0.1:{other.port}/other; "
            f"echo; curl -s -m 5 --noproxy '*' http://127.0.0.1:{allowed.port}/direct "
            "|| echo direct-failed"
        )
        result = await run_agent(
            harness=harnesses.echo(sandbox="on", network={"allow": [f"127.0.0.1:{allowed.port}"]}),
            prompt=f"sh:{quote(command)}",
            cwd=worktree,
            run=run_meta,
        )
    finally:
        allowed.close()
        other.close()
    assert "upstream-says-hi" in result.text
    assert allowed.hits == ["/allowed"]  # through the proxy; the direct try never arrived
    assert other.hits == []
    assert "403" in result.text
    assert "direct-failed" in result.text


async def test_two_concurrent_sandboxed_steps_cannot_see_each_others_private_dirs(
    tmp_path, run_meta
):
    import subprocess as sp
    from pathlib import Path
    from urllib.parse import quote

    from jigs.engine._types import RunMetadata
    from jigs.steps import create_agent_runner

    trees = []
    for name in ("attacker", "victim"):
        tree = tmp_path / name
        tree.mkdir()
        sp.run(["git", "init", "-q", str(tree)], check=True)
        trees.append(tree)
    victim_run = RunMetadata(workflow_run_id=f"{run_meta.workflow_run_id}-victim")
    async with create_agent_runner(
        harnesses.echo(sandbox="on"), cwd=trees[1], run=victim_run
    ) as victim:
        # the victim's private dir (its CLI's TMPDIR), open while the attacker runs
        (mine,) = [p for p in victim._step.ctx.sandbox.writable if p.name.startswith("jigs-echo-")]
        (mine / "secret").write_text("victim-secret")
        command = (
            f"echo ls-begin; ls /tmp; echo ls-end; cat {mine}/secret; "
            f"echo planted > {mine}/planted; echo done"
        )
        result = await run_agent(
            harness=harnesses.echo(sandbox="on"),
            prompt=f"sh:{quote(command)}",
            cwd=trees[0],
            run=run_meta,
        )
        assert "done" in result.text
        assert "victim-secret" not in result.text
        listing = result.text.split("ls-begin", 1)[1].split("ls-end", 1)[0]
        assert mine.name not in listing  # not even listed in the attacker's /tmp
        assert not (mine / "planted").exists()
        assert Path(mine / "secret").read_text() == "victim-secret"


def test_a_declared_stdio_servers_command_and_script_are_shown_and_nothing_else(tmp_path):
    # the operator chose the server as it chose the CLI: its command's runtime and the files
    # its arguments name are shown (read-only); a directory it names, or a relative path, not
    from jigs.sandbox._runtime import stdio_server_paths

    script = tmp_path / "tools" / "server.py"
    script.parent.mkdir()
    script.write_text("print('hi')\n")
    (tmp_path / "tools" / "sibling.py").write_text("")
    data = tmp_path / "data"
    data.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "serve"
    launcher.write_text("#!/bin/sh\nexec true\n")
    launcher.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    paths = stdio_server_paths(
        [("python3", (str(script), "--root", str(data), "rel.py")), ("serve", ())], env
    )
    assert str(script) in paths
    assert str(bin_dir) in paths  # a bare name, found on the step's PATH
    assert os.path.dirname(os.path.realpath("/bin/sh")) in paths  # its #! interpreter
    assert str(data) not in paths
    assert str(script.parent) not in paths
    assert not [p for p in paths if p.endswith("rel.py")]


def test_the_sandbox_loopback_is_waited_for_while_bwrap_brings_it_up(monkeypatch):
    # bwrap reports its child's pid before the child has brought `lo` up: binding 127.0.0.1
    # then fails with EADDRNOTAVAIL (seen under load), which is retried; other errors are not
    import errno
    import socket

    from jigs.sandbox import _netns

    calls = []

    def flaky(port):
        calls.append(port)
        if len(calls) < 3:
            raise OSError(errno.EADDRNOTAVAIL, "Cannot assign requested address")
        return socket.socket()

    monkeypatch.setattr(_netns, "listening_socket", flaky)
    made = _netns._listening_when_up(4242)
    made.close()
    assert calls == [4242, 4242, 4242]

    def refused(port):
        raise OSError(errno.EADDRINUSE, "Address already in use")

    monkeypatch.setattr(_netns, "listening_socket", refused)
    with pytest.raises(OSError, match="in use"):
        _netns._listening_when_up(4242)


@pytest.mark.parametrize(
    ("network", "named"),
    [
        ({"allow": ["*"]}, "'*'"),
        ({"allow": ["pypi.org", "http://x.example"]}, "http://x.example"),
        ({"allow": []}, "lists no host"),
    ],
)
def test_a_bad_network_allowlist_is_refused_naming_the_entry(network, named):
    from jigs.errors import DescriptorError

    with pytest.raises(DescriptorError) as raised:
        harnesses.echo(network=network)
    assert named in str(raised.value)
    assert raised.value.kind == "echo"
