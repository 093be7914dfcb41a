"""Every command and flag of ``jigs``, through the real entry point (the venv's ``jigs`` script)
as a subprocess: plain output off a terminal, a spinner and wrapped table on one (a pty),
``--json`` parsed back, and the exit codes."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
import urllib.request
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import pytest

JIGS = str(Path(sys.executable).parent / "jigs")
ALL_KINDS = "claude,codex,pi,opencode,echo"
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

FAKE_KINDS = """
from typing import Literal

import anyio
from jigs.plugin import hookimpl
from jigs_harness_echo._harness import EchoDescriptor, EchoHarness


class SlowDescriptor(EchoDescriptor):
    kind: Literal["slowinstall"] = "slowinstall"


class BrokenDescriptor(EchoDescriptor):
    kind: Literal["brokeninstall"] = "brokeninstall"


class SlowInstall(EchoHarness):
    kind = "slowinstall"
    display_name = "Slow install"
    descriptor_type = SlowDescriptor

    async def install(self, env):
        await anyio.sleep(0.6)
        return "slowinstall CLI 9.9 installed"

    async def warm(self, env, log):
        raise OSError("No space left on device")


class BrokenInstall(EchoHarness):
    kind = "brokeninstall"
    display_name = "Broken install"
    descriptor_type = BrokenDescriptor

    async def install(self, env):
        raise RuntimeError("npm exited with 1: no registry")


@hookimpl
def jigs_register_harnesses(register):
    register(SlowInstall())
    register(BrokenInstall())
"""


def jigs(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    full.update(env or {})
    return subprocess.run(
        [JIGS, *args],
        capture_output=True,
        text=True,
        env=full,
        stdin=subprocess.DEVNULL,
        check=False,
        timeout=timeout,
    )


def on_pty(
    *args: str, env: dict[str, str] | None = None, columns: int = 80
) -> tuple[int, str, str]:
    """Run ``jigs`` with stdout and stderr on a pty of ``columns`` columns; (rc, tty, pipe)
    where ``pipe`` is empty (both streams are the terminal)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    full = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    full.update(env or {})
    proc = subprocess.Popen(
        [JIGS, *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=full
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=60), b"".join(chunks).decode(), ""


@pytest.fixture(scope="module")
def fake_kinds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """``PYTHONPATH`` for two extra kinds of one distribution (jigs-fake-kinds 0.3.0): one
    installs in 0.6 s, one fails to install."""
    root = tmp_path_factory.mktemp("fake-kinds")
    (root / "jigs_fake_kinds.py").write_text(FAKE_KINDS)
    info = root / "jigs_fake_kinds-0.3.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: jigs-fake-kinds\nVersion: 0.3.0\n")
    (info / "entry_points.txt").write_text(
        "[jigs.harnesses]\nslowinstall = jigs_fake_kinds\nbrokeninstall = jigs_fake_kinds\n"
    )
    return {"PYTHONPATH": str(root)}


# ------------------------------------------------------------------ --version and --help


def test_version_lists_core_and_each_kind(fake_kinds: dict[str, str]) -> None:
    result = jigs("--version", env={**fake_kinds, "JIGS_DISABLE_PLUGINS": "echo"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"jigs-core {version('jigs-core')}"
    assert f"  claude: jigs-harness-claude {version('jigs-harness-claude')}" in lines
    assert "  slowinstall: jigs-fake-kinds 0.3.0" in lines
    assert f"  echo: jigs-harness-echo {version('jigs-harness-echo')} (disabled)" in lines


SUBCOMMANDS = ["harnesses", "doctor", "run", "install", "model-server", "demo", "new-kind"]


@pytest.mark.parametrize("command", [None, *SUBCOMMANDS])
def test_help_has_no_markup_and_a_line_for_every_option(command: str | None) -> None:
    result = jigs(*([command] if command else []), "--help")
    assert result.returncode == 0, result.stderr
    assert "``" not in result.stdout
    assert "rest" not in result.stdout.split()
    from jigs.cli import build_parser

    parser = build_parser()
    if command is not None:
        sub = next(a for a in parser._actions if a.dest == "command")
        parser = sub.choices[command]  # type: ignore[index]
    for action in parser._actions:
        if action.dest in ("help", "command"):
            continue
        assert action.help, f"jigs {command or ''} {action.option_strings or action.dest}"
        first_word = action.help.split()[0]
        assert first_word in result.stdout


def test_model_server_help_shows_its_options() -> None:
    out = jigs("model-server", "--help").stdout
    for option in ("--script FILE", "--port N", "--host ADDR", "--model ID"):
        assert option in out


def test_usage_errors_exit_2() -> None:
    assert jigs().returncode == 2
    assert jigs("nosuchcommand").returncode == 2
    assert jigs("run", "--harness", "echo").returncode == 2  # --cwd and the prompt are required


# ------------------------------------------------------------------ harnesses


def test_harnesses_table_is_plain_off_a_terminal() -> None:
    result = jigs("harnesses")
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout
    header, _rule, *rows = result.stdout.splitlines()
    assert header.split() == ["kind", "distribution", "version", "model", "contract", "status"]
    assert any(r.split()[:2] == ["echo", "jigs-harness-echo"] for r in rows)


# ------------------------------------------------------------------ doctor


def test_doctor_json_parses_back() -> None:
    result = jigs("doctor", "--harness", "echo", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["ok"] is True
    assert (document["passed"], document["failed"], document["skipped"]) == (3, 0, 0)
    assert document["sandbox"] == {"available": True, "problem": None, "fix": ""}
    check, route, sandbox = document["checks"]
    assert sandbox["id"] == "sandbox"
    assert sandbox["detail"].startswith("on:")  # the default
    assert check["kind"] == "echo"
    assert check["id"] == "harness.echo-cli"
    assert check["ok"] is True
    assert check["detail"].endswith("jigs_harness_echo/_cli.py")
    assert route["id"] == "model.route"
    assert route["detail"].startswith("no key named")


def test_doctor_json_reports_a_failure_with_its_fix(tmp_path: Path) -> None:
    (tmp_path / ".echo-deny").write_text("")
    result = jigs("doctor", "--harness", "echo", "--cwd", str(tmp_path), "--json")
    assert result.returncode == 1
    document = json.loads(result.stdout)
    assert document["ok"] is False
    assert document["failed"] == 1
    failed = [c for c in document["checks"] if not c["ok"]]
    assert len(failed) == 1
    assert failed[0]["reason"]
    assert failed[0]["repair"]


def test_doctor_says_what_a_sandboxed_descriptor_reaches_and_fails_where_the_host_cannot() -> None:
    settings = json.dumps({"sandbox": "on", "network": {"allow": ["pypi.org"]}})
    result = jigs("doctor", "--harness", "echo", "--settings", settings, "--json")
    assert result.returncode == 0, result.stdout
    (row,) = [c for c in json.loads(result.stdout)["checks"] if c["id"] == "sandbox"]
    assert row["detail"].startswith("on:")
    assert "pypi.org (through its egress proxy)" in row["detail"]
    broken = jigs(
        "doctor", "--harness", "echo", "--settings", settings, env={"JIGS_BWRAP": "/nonexistent"}
    )
    assert broken.returncode == 1
    assert "sandbox: unavailable" in broken.stdout
    assert "this host cannot build it" in broken.stdout
    assert "fix: echo / sandbox and network: allow unprivileged user namespaces" in broken.stdout


def test_doctor_exits_1_with_no_kind_installed() -> None:
    env = {"JIGS_DISABLE_PLUGINS": ALL_KINDS}
    plain = jigs("doctor", env=env)
    assert plain.returncode == 1
    assert "pip install jigs-harness-claude" in plain.stdout
    as_json = jigs("doctor", "--json", env=env)
    assert as_json.returncode == 1
    document = json.loads(as_json.stdout)
    assert document.pop("isolation")["mode"] in {"namespace", "tree", "plain"}
    assert document.pop("sandbox")["available"] in {True, False}
    assert document == {
        "ok": False,
        "passed": 0,
        "failed": 0,
        "skipped": 0,
        "checks": [],
    }


def test_doctor_bad_settings_is_a_clean_error() -> None:
    result = jigs("doctor", "--harness", "echo", "--settings", "[1]")
    assert result.returncode == 2  # a usage error, as documented
    assert "--settings must be a JSON object" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["doctor", "run"])
def test_settings_that_are_not_json_exit_2_without_echoing_them(
    command: str, tmp_path: Path
) -> None:
    extra = ["--cwd", str(tmp_path), "hi"] if command == "run" else []
    result = jigs(command, "--harness", "echo", "--settings", '{"model": sk-secret}', *extra)
    assert result.returncode == 2, result.stderr
    assert "--settings is not valid JSON" in result.stderr
    assert "sk-secret" not in result.stderr
    assert "Traceback" not in result.stderr


def test_doctor_skips_descriptor_checks_of_a_kind_without_defaults() -> None:
    result = jigs("doctor", "--harness", "pi", "--json")
    rows = {c["id"]: c for c in json.loads(result.stdout)["checks"]}
    assert rows["descriptor"]["skipped"] is True
    assert "--settings" in rows["descriptor"]["detail"]
    # with settings that make no descriptor, it is a failure, not a skip
    bad = jigs("doctor", "--harness", "pi", "--settings", '{"nope": 1}', "--json")
    assert bad.returncode == 1
    assert any(not c["ok"] for c in json.loads(bad.stdout)["checks"])


def _codex_login(result: subprocess.CompletedProcess[str]) -> dict[str, object]:
    checks = json.loads(result.stdout)["checks"]
    (login,) = [c for c in checks if c["id"] == "harness.codex-auth"]
    return login


def test_doctor_checks_the_codex_login(
    tmp_path: Path, require_cli: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    codex = require_cli("codex")
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home)}
    monkeypatch.delenv("CODEX_HOME", raising=False)  # the operator's, if any, must not count

    missing = jigs("doctor", "--harness", "codex", "--json", env=env)
    assert missing.returncode == 1
    login = _codex_login(missing)
    assert login["ok"] is False
    assert str(home / ".codex" / "auth.json") in str(login["reason"])
    # the CLI jigs runs, by its path: a bare `codex` is not on PATH
    assert f"run `{codex} login`" in str(login["repair"])

    auth = home / ".codex" / "auth.json"
    auth.parent.mkdir()
    auth.write_text("{not json")
    broken = jigs("doctor", "--harness", "codex", "--json", env=env)
    assert broken.returncode == 1
    assert "cannot be read" in str(_codex_login(broken)["reason"])
    assert "not json" not in broken.stdout  # the file's content is never shown

    auth.write_text(json.dumps({"auth_mode": "apikey", "OPENAI_API_KEY": "sk-test-secret"}))
    good = jigs("doctor", "--harness", "codex", "--json", env=env)
    assert good.returncode == 0, good.stdout
    assert _codex_login(good)["ok"] is True
    assert "sk-test-secret" not in good.stdout

    other = tmp_path / "codex-home"
    moved = jigs("doctor", "--harness", "codex", "--json", env={**env, "CODEX_HOME": str(other)})
    assert moved.returncode == 1  # CODEX_HOME decides where the login is
    assert str(other / "auth.json") in str(_codex_login(moved)["reason"])

    auth.unlink()
    keyed = {
        "api_key_env": "JIGS_TEST_CODEX_KEY",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
    }
    unset = jigs("doctor", "--harness", "codex", "--settings", json.dumps(keyed), "--json", env=env)
    assert unset.returncode == 1
    assert "JIGS_TEST_CODEX_KEY" in str(_codex_login(unset)["reason"])
    named = jigs(
        "doctor",
        "--harness",
        "codex",
        "--settings",
        json.dumps(keyed),
        "--json",
        env={**env, "JIGS_TEST_CODEX_KEY": "sk-named"},
    )
    assert named.returncode == 0, named.stdout
    assert "sk-named" not in named.stdout
    assert _route(named).startswith("proxied key: $JIGS_TEST_CODEX_KEY")
    assert "http://127.0.0.1:9/v1 (bearer)" in _route(named)
    assert _route(good).startswith("operator login:")
    assert "auth.json" in _route(good)


def test_doctor_passes_claude_with_a_named_key_and_no_login(
    tmp_path: Path, require_cli: Callable[[str], Path]
) -> None:
    """A descriptor naming ``api_key_env`` needs no Claude Code login: doctor must not fail it
    (it once said ``Claude Code login FAIL`` while ``jigs run`` with the same settings worked)."""
    require_cli("claude")
    home = tmp_path / "home"  # no ~/.claude: not logged in
    home.mkdir()
    (tmp_path / "jigs.toml").write_text('[agents]\nenv = ["IS_SANDBOX"]\n')
    settings = {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "MY_KEY"}
    argv = [JIGS, "doctor", "--harness", "claude", "--settings", json.dumps(settings), "--json"]
    env = {**os.environ, "HOME": str(home), "IS_SANDBOX": "1", "MY_KEY": "sk-doctor-key"}
    env.pop("CLAUDE_CONFIG_DIR", None)
    keyed = subprocess.run(
        argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    checks = {c["id"]: c for c in json.loads(keyed.stdout)["checks"]}
    assert "harness.claude-auth" not in checks, checks
    assert keyed.returncode == 0, keyed.stdout
    assert checks["model.my-key"]["ok"] is True
    assert "sk-doctor-key" not in keyed.stdout
    unset = subprocess.run(
        argv, cwd=tmp_path, env={k: v for k, v in env.items() if k != "MY_KEY"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert unset.returncode == 1
    missing = {c["id"]: c for c in json.loads(unset.stdout)["checks"]}["model.my-key"]
    assert "jigs reads no .env file" in missing["repair"]  # it once said "(e.g. in .env)"
    # the login route still checks the login, and fails without one
    login = subprocess.run(
        [*argv[:-3], "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert login.returncode == 1
    rows = {c["id"]: c for c in json.loads(login.stdout)["checks"]}
    assert rows["harness.claude-auth"]["ok"] is False


def _route(result: subprocess.CompletedProcess[str]) -> str:
    checks = json.loads(result.stdout)["checks"]
    (route,) = [c for c in checks if c["id"] == "model.route"]
    return str(route["detail"])


def test_doctor_says_which_route_each_descriptor_uses(require_cli: Callable[[str], Path]) -> None:
    require_cli("claude")
    require_cli("pi")
    login = jigs("doctor", "--harness", "claude", "--json")
    assert _route(login).startswith("operator login:")
    assert "~/.claude" in _route(login)
    assert "readable by the agent" in _route(login)
    keyed = jigs(
        "doctor", "--harness", "claude", "--settings", '{"api_key_env": "JIGS_K"}', "--json"
    )
    assert _route(keyed).startswith("proxied key: $JIGS_K")
    assert "https://api.anthropic.com (x-api-key)" in _route(keyed)
    router = {"model": {"type": "openrouter", "model": "m"}}
    pi = jigs("doctor", "--harness", "pi", "--settings", json.dumps(router), "--json")
    assert _route(pi).startswith("proxied key: $OPENROUTER_API_KEY")
    assert "https://openrouter.ai/api/v1 (bearer)" in _route(pi)


def test_doctor_detail_wraps_to_columns(tmp_path: Path) -> None:
    (tmp_path / ".echo-deny").write_text("")
    unwrapped = jigs("doctor", "--harness", "echo", "--cwd", str(tmp_path))
    long_lines = [line for line in unwrapped.stdout.splitlines() if len(line) > 80]
    assert long_lines, "the test needs a detail longer than 80 columns"
    wrapped = jigs("doctor", "--harness", "echo", "--cwd", str(tmp_path), env={"COLUMNS": "80"})
    assert wrapped.returncode == 1
    assert all(len(line) <= 80 for line in wrapped.stdout.splitlines()), wrapped.stdout
    # the same words, only broken into lines (and a shorter rule under the header)
    assert re.sub(r"[\s-]", "", wrapped.stdout) == re.sub(r"[\s-]", "", unwrapped.stdout)


def test_doctor_on_a_terminal_fits_its_width_and_colours_the_result(tmp_path: Path) -> None:
    (tmp_path / ".echo-deny").write_text("")
    rc, out, _ = on_pty("doctor", "--harness", "echo", "--cwd", str(tmp_path), columns=72)
    assert rc == 1
    assert "\x1b[31mFAIL\x1b[0m" in out
    assert "\x1b[32mok\x1b[0m" in out
    lines = ANSI.sub("", out).replace("\r\n", "\n").splitlines()
    assert all(len(line) <= 72 for line in lines), out
    _, plain, _ = on_pty(
        "doctor", "--harness", "echo", "--cwd", str(tmp_path), env={"NO_COLOR": "1"}
    )
    assert "\x1b[" not in plain


# ------------------------------------------------------------------ run


def test_run_json_parses_back_and_text_reports_on_stderr(tmp_path: Path) -> None:
    result = jigs("run", "--harness", "echo", "--cwd", str(tmp_path), "--json", "hello")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["text"] == "echo: hello (turn 1)"
    assert document["session"]
    assert document["run"].startswith("cli-")
    assert document["seconds"] >= 0
    assert set(document["usage"]) == {
        "input_tokens",
        "output_tokens",
        "cached_input_tokens",
        "cost_usd",
    }
    text = jigs("run", "--harness", "echo", "--cwd", str(tmp_path), "again")
    assert text.returncode == 0, text.stderr
    assert text.stdout == "echo: again (turn 1)\n"
    assert re.search(r"^took \d+\.\ds; tokens: ", text.stderr, re.M)


def _agent_in(cwd: Path) -> bool:
    """True once a process works in ``cwd`` (the agent CLI a ``jigs run`` started there)."""
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and Path(os.readlink(proc / "cwd")) == cwd:
                return True
        except OSError:
            continue
    return False


def test_ctrl_c_on_run_says_interrupted_with_the_session_and_run_ids(tmp_path: Path) -> None:
    worktree = tmp_path.resolve()
    argv = [JIGS, "run", "--harness", "echo", "--cwd", str(worktree), "--run-id", "r-ctrl-c"]
    proc = subprocess.Popen(
        [*argv, "sleep:60 hello"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not _agent_in(worktree) and time.monotonic() < deadline:
            time.sleep(0.1)
        # the CLI's first event (its session) is read by then, even on a busy machine
        time.sleep(3.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    match = re.search(r"jigs run: interrupted \(session: ([0-9a-f-]{36}); run: r-ctrl-c\)", err)
    assert match, err
    assert "Traceback" not in err
    assert out == ""


def test_run_of_an_unknown_kind_exits_1() -> None:
    result = jigs("run", "--harness", "nosuchkind", "--cwd", ".", "hi")
    assert result.returncode == 1
    assert "pip install jigs-harness-nosuchkind" in result.stderr
    assert "Traceback" not in result.stderr


# ------------------------------------------------------------------ install


def test_install_reports_each_kind_and_fails_when_one_fails(fake_kinds: dict[str, str]) -> None:
    result = jigs("install", "slowinstall", "brokeninstall", "echo", env=fake_kinds)
    assert result.returncode == 1
    out = result.stdout.splitlines()
    assert re.fullmatch(r"slowinstall: slowinstall CLI 9\.9 installed \(0\.[6-9]s\)", out[0])
    # a warm-up is an optimisation: said, not counted (the step builds what is missing)
    assert re.fullmatch(
        r"slowinstall: warm-up failed after \d+\.\ds \(OSError: No space left on device\); "
        r"its first step builds what is missing",
        out[1],
    )
    assert out[2].startswith("brokeninstall: FAILED after ")
    assert "npm exited with 1: no registry" in out[2]
    assert out[3] == "echo: nothing to install (its CLI comes with its distribution)"
    assert len(out) == 4  # a kind that keeps nothing between steps says nothing more
    # progress off a terminal: one plain line per step that runs, no spinner
    assert result.stderr.splitlines() == [
        "slowinstall: installing its CLI...",
        "slowinstall: preparing what its first step would build...",
        "brokeninstall: installing its CLI...",
    ]


def test_install_succeeds_when_every_cli_is_in_place(fake_kinds: dict[str, str]) -> None:
    result = jigs("install", "slowinstall", "echo", env=fake_kinds)
    assert result.returncode == 0, result.stdout + result.stderr


def test_install_shows_a_spinner_on_a_terminal(fake_kinds: dict[str, str]) -> None:
    rc, out, _ = on_pty("install", "slowinstall", env=fake_kinds)
    assert rc == 0, out
    frames = re.findall(r"\r(\S) slowinstall: installing its CLI \(\d+s\)\x1b\[K", out)
    assert len(frames) >= 3, out  # redrawn about every 0.1 s during the 0.6 s install
    assert len(set(frames)) >= 3  # and it turns
    assert "\r\x1b[K" in out  # the line is cleared before the result
    cleared = out.split("\r\x1b[K")
    assert "slowinstall: slowinstall CLI 9.9 installed" in cleared[-2]
    assert "slowinstall: warm-up failed" in cleared[-1]


def test_install_exits_1_with_nothing_to_install_or_an_unknown_kind() -> None:
    none = jigs("install", env={"JIGS_DISABLE_PLUGINS": ALL_KINDS})
    assert none.returncode == 1
    assert "no harness kind is installed" in none.stderr
    unknown = jigs("install", "nosuchkind")
    assert unknown.returncode == 1
    assert "pip install jigs-harness-nosuchkind" in unknown.stdout
    assert "Traceback" not in unknown.stderr


# ------------------------------------------------------------------ demo


def test_demo_exits_1_when_no_kind_is_installed_or_none_ran(tmp_path: Path) -> None:
    none = jigs("demo", env={"JIGS_DISABLE_PLUGINS": ALL_KINDS})
    assert none.returncode == 1
    assert "0 passed, 0 failed, 0 not run" in none.stdout
    assert "no harness kind is installed" in none.stdout
    missing = jigs("demo", "--harness", "pi", env={"JIGS_PI_EXECUTABLE": str(tmp_path / "no")})
    assert missing.returncode == 1
    assert "0 passed, 0 failed, 1 not run" in missing.stdout
    assert "no kind ran" in missing.stdout
    unknown = jigs("demo", "--harness", "nosuchkind")
    assert unknown.returncode == 1
    assert "0 passed, 1 failed" in unknown.stdout
    assert "failed kinds: nosuchkind" in unknown.stdout
    assert "no kind ran" not in unknown.stdout  # a failed kind ran: said once, not twice


def test_demo_of_the_echo_kind_passes() -> None:
    result = jigs("demo", "--harness", "echo")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed, 0 failed, 0 not run" in result.stdout


# ------------------------------------------------------------------ model-server


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_server(*args: str) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.Popen(
        [JIGS, "model-server", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url:
        proc.kill()
        _, err = proc.communicate(timeout=10)
        pytest.fail(f"jigs model-server printed no URL: {err}")
    return proc, url


def test_model_server_serves_the_script_as_documented(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["hello from the script"]))
    port = _free_port()
    proc, url = _start_server("--script", str(script), "--port", str(port), "--host", "127.0.0.1")
    try:
        assert url == f"http://127.0.0.1:{port}"
        body = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}
        request = urllib.request.Request(
            f"{url}/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json", "authorization": "Bearer sk-x"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            answer = json.loads(response.read())
        assert answer["choices"][0]["message"]["content"] == "hello from the script"
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "1 of 1 replies used" in err
    # each line once, prefixed (it was printed twice: the server's handler and the root's)
    lines = [line for line in err.splitlines() if line.strip()]
    assert all(line.startswith("model-server: ") for line in lines), err
    assert len(lines) == len(set(lines)), err
    assert "sk-x" not in err  # header values are never logged


def test_model_server_models_and_free_port() -> None:
    proc, url = _start_server("--model", "m-one", "--model", "m-two")
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url)
        with urllib.request.urlopen(f"{url}/v1/models", timeout=10) as response:
            ids = [m["id"] for m in json.loads(response.read())["data"]]
        assert ids == ["m-one", "m-two"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=10)
    assert proc.returncode == 0


def test_model_server_exit_codes(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"nonsense": 1}]')
    result = jigs("model-server", "--script", str(bad))
    assert result.returncode == 2
    assert str(bad) in result.stderr
    assert jigs("model-server", "--port", "notaport").returncode == 2
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        busy = jigs("model-server", "--port", str(port))
        assert busy.returncode == 1
        assert f"cannot listen on 127.0.0.1:{port}" in busy.stderr
        assert time.monotonic() - started < 30
