"""The private CODEX_HOME: curated config, the login by symlink, the session store, removal."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import structlog
from codex_helpers import KEY_ENV
from jigs import harnesses
from jigs.steps import create_agent_runner
from jigs_harness_codex import CodexHarness
from jigs_harness_codex._home import render_config

pytestmark = pytest.mark.anyio

FAKE = Path(__file__).with_name("fake_app_server.py")

_MCP = {
    "files": {
        "command": "python3",
        "args": ["-m", "srv"],
        "env": {"TOKEN": "GH_TOKEN", "SAME": "SAME"},
        "probe": {"tool": "ping"},
        "disabled_tools": ["rm"],
    },
    "web": {
        "url": "https://mcp.example/mcp",
        "headers": {"X-Api": "WEB_KEY"},
        "bearer_token_env": "WEB_BEARER",
        "probe": {"tool": "ping"},
    },
}


def test_config_without_endpoint_or_mcp_declares_zero_servers():
    text, extra = render_config(harnesses.codex(), {})
    config = tomllib.loads(text)
    assert "mcp_servers" not in config
    assert "model_providers" not in config
    assert config["analytics"] == {"enabled": False}
    assert config["features"] == {
        "plugins": False,
        "hooks": False,
        "unbounded_connection_retries": False,
        "shell_snapshot": False,
    }
    assert config["check_for_update_on_startup"] is False
    assert config["allow_login_shell"] is False
    assert extra == {}


def test_config_with_endpoint_names_the_key_and_never_holds_it():
    descriptor = harnesses.codex(
        model="m", base_url="http://127.0.0.1:1/v1", api_key_env="MY_KEY", max_retries=1
    )
    text, _ = render_config(descriptor, {"MY_KEY": "sk-secret-value-123"})
    assert "sk-secret-value-123" not in text
    config = tomllib.loads(text)
    assert config["model"] == "m"
    assert config["model_provider"] == "jigs"
    provider = config["model_providers"]["jigs"]
    assert provider["env_key"] == "MY_KEY"
    assert provider["wire_api"] == "responses"
    assert provider["base_url"] == "http://127.0.0.1:1/v1"
    assert provider["request_max_retries"] == provider["stream_max_retries"] == 1
    assert config["shell_environment_policy"]["exclude"] == ["MY_KEY"]
    # through the step's credential proxy: its URL replaces the endpoint, the key name stays
    proxied = tomllib.loads(
        render_config(descriptor, {}, base_url="http://127.0.0.1:7/step-token")[0]
    )
    assert proxied["model_providers"]["jigs"]["base_url"] == "http://127.0.0.1:7/step-token"
    assert proxied["model_providers"]["jigs"]["env_key"] == "MY_KEY"


def test_model_route_is_the_endpoint_or_openai_with_a_bearer_key():
    from jigs.plugin import ModelRoute

    harness = CodexHarness()
    keyed = harnesses.codex(model="m", base_url="http://gw.example/v1", api_key_env="K")
    responses = ("POST /responses",)
    assert harness.model_route(keyed) == ModelRoute(
        "http://gw.example/v1", "K", "bearer", responses
    )
    only_key = harnesses.codex(model="m", api_key_env="K")
    assert harness.model_route(only_key) == ModelRoute(
        "https://api.openai.com/v1", "K", "bearer", responses
    )
    no_key = harnesses.codex(model="m", base_url="http://gw.example/v1")
    assert harness.model_route(no_key) is None
    assert harness.login_route(no_key) is None
    login = harnesses.codex()
    assert harness.model_route(login) is None
    assert "auth.json" in (harness.login_route(login) or "")


def test_config_writes_the_steps_mcp_servers_by_name_only():
    descriptor = harnesses.codex(
        model="m", base_url="http://127.0.0.1:1/v1", api_key_env="MODEL_KEY", mcp_servers=_MCP
    )
    env = {
        "GH_TOKEN": "ghp-value",
        "SAME": "same-value",
        "PATH": "/bin",
        "HTTPS_PROXY": "http://proxy:1",
        "MODEL_KEY": "sk-model-key-value",
        "WEB_BEARER": "web-bearer-value",
    }
    text, extra = render_config(descriptor, env)
    for value in env.values():
        if value not in ("/bin", "http://proxy:1"):
            assert value not in text
    config = tomllib.loads(text)
    assert sorted(config["mcp_servers"]) == ["files", "web"]
    files = config["mcp_servers"]["files"]
    # the step's environment, as the probe had it, but neither the model key nor what another
    # server declared as its credential
    assert files["env_vars"] == ["GH_TOKEN", "HTTPS_PROXY", "PATH", "SAME", "TOKEN"]
    assert files["disabled_tools"] == ["rm"]
    for server in config["mcp_servers"].values():
        assert server["required"] is True
        assert server["startup_timeout_sec"] == 20.0
        assert server["default_tools_approval_mode"] == "approve"
    short = harnesses.codex(mcp_servers=_MCP, startup_timeout=5)
    assert (
        tomllib.loads(render_config(short, {})[0])["mcp_servers"]["web"]["startup_timeout_sec"]
        == 2.5
    )
    web = config["mcp_servers"]["web"]
    assert web["bearer_token_env_var"] == "WEB_BEARER"
    assert web["env_http_headers"] == {"X-Api": "WEB_KEY"}
    # a renamed credential rides in the app server's env, and is kept from the agent's shell
    assert extra == {"TOKEN": "ghp-value"}
    excluded = set(config["shell_environment_policy"]["exclude"])
    assert {"GH_TOKEN", "TOKEN", "SAME", "WEB_BEARER", "WEB_KEY", "MODEL_KEY"} <= excluded


def test_the_real_cli_reads_the_curated_mcp_tables(require_cli, tmp_path):
    cli = require_cli("codex")
    text, _ = render_config(harnesses.codex(mcp_servers=_MCP), {})
    (tmp_path / "config.toml").write_text(text)
    out = subprocess.run(
        [str(cli), "mcp", "list", "--json"],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CODEX_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        stdin=subprocess.DEVNULL,
    )
    listed = {server["name"]: server for server in json.loads(out.stdout)}
    assert sorted(listed) == ["files", "web"]
    assert listed["files"]["transport"]["env_vars"] == ["SAME", "TOKEN"]
    assert listed["web"]["transport"]["bearer_token_env_var"] == "WEB_BEARER"


async def test_login_home_links_auth_and_sessions_and_is_removed(
    tmp_path, monkeypatch, worktree, run_meta, jigs_data_dir
):
    operator = tmp_path / "operator-home"
    (operator / ".codex").mkdir(parents=True)
    auth = operator / ".codex" / "auth.json"
    auth.write_text(json.dumps({"auth_mode": "chatgpt", "tokens": {"refresh_token": "r"}}))
    monkeypatch.setenv("HOME", str(operator))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    fake = tmp_path / "fake-codex"
    fake.write_text(f"#!{sys.executable}\n{FAKE.read_text()}")
    fake.chmod(0o755)
    monkeypatch.setenv("JIGS_CODEX_EXECUTABLE", str(fake))

    state = jigs_data_dir / "runs" / run_meta.workflow_run_id / "codex"
    async with create_agent_runner(
        harnesses.codex(), cwd=worktree, run=run_meta, agents_env=[]
    ) as runner:
        assert runner.env_names.count("CODEX_HOME") == 0  # set by the kind, not the step env
        (home,) = (state / "homes").iterdir()
        assert (home / "auth.json").is_symlink()
        assert (home / "auth.json").resolve() == auth.resolve()
        # Codex creates sessions/ in the home itself (one that exists at start, a symlink into
        # the store or even empty, slows every thread start) and writes the rollout there; it
        # reaches the run's store at close
        assert not (home / "sessions").exists()
        day = home / "sessions" / "2026" / "01" / "02"
        day.mkdir(parents=True)
        name = "rollout-2026-01-02T03-04-05-01a22966-6fd2-7931-9655-85c89129d947.jsonl"
        (day / name).write_text('{"type":"session_meta"}\n')
        config = tomllib.loads((home / "config.toml").read_text())
        assert "mcp_servers" not in config
        assert oct(home.stat().st_mode & 0o777) == "0o700"
    assert not home.exists()
    assert auth.is_file()  # the login itself is untouched
    assert (state / "sessions").is_dir()  # the durable store outlives the invocation
    stored = state / "sessions" / "2026" / "01" / "02" / name
    assert stored.read_text() == '{"type":"session_meta"}\n'


def test_descriptor_refuses_policy_keys_and_secret_values():
    from jigs.errors import DescriptorError

    for key in ("sandbox_policy", "config", "approval_policy", "codex_home", "profile"):
        with pytest.raises(DescriptorError) as info:
            harnesses.codex(**{key: "x"})
        assert key in str(info.value)
    with pytest.raises(DescriptorError) as info:
        harnesses.codex(model="m", api_key_env="sk-live-abcdefghijklmnopqrstuvwxyz0123")
    assert "sk-live" not in str(info.value)
    with pytest.raises(DescriptorError):
        harnesses.codex(base_url="http://127.0.0.1:1/v1")  # an endpoint needs a model
    assert harnesses.codex(model="m", api_key_env=KEY_ENV).env_names() == {KEY_ENV}


async def test_homes_start_from_a_pristine_seed(
    model_server, descriptor, worktree, run_meta, jigs_data_dir
):
    from jigs_harness_codex._seed import seed_path
    from jigs_testing import text

    model_server.add(text("seeded"))
    state = jigs_data_dir / "runs" / run_meta.workflow_run_id / "codex"
    async with create_agent_runner(
        descriptor(), cwd=worktree, run=run_meta, agents_env=[]
    ) as runner:
        (home,) = (state / "homes").iterdir()
        assert (home / "state_5.sqlite").is_file()
        from jigs.models import generate_text

        assert (await generate_text(runner.model, prompt="hi")).text == "seeded"
    cli = CodexHarness().resolve_executable(dict(os.environ)).path
    seed = seed_path(cli)
    assert (seed / ".jigs-seed-complete").is_file()
    names = {p.name for p in seed.iterdir()}
    assert "state_5.sqlite" in names
    assert not names & {"config.toml", "auth.json", "sessions"}
    assert not list(seed.glob("*.sqlite-wal"))
    assert not list(seed.rglob("rollout-*.jsonl"))
    # the thread history database, made by the seed's throwaway thread, and nothing of that
    # thread: its rows, markers, locks and shell snapshot are gone
    assert not names & {"thread-writer-locks", "shell_snapshots", ".sandbox_migration", ".tmp"}
    assert _rows(seed / "state_5.sqlite", "threads") == 0
    history = seed / "thread_history_1.sqlite"
    tables = _tables(history)
    assert "_sqlx_migrations" in tables  # migrated, so a home's first turn does not do it
    assert _rows(history, "_sqlx_migrations") > 0
    assert all(_rows(history, t) == 0 for t in tables if not t.startswith(("_", "sqlite_")))


def _tables(database: Path) -> list[str]:
    import sqlite3

    with contextlib.closing(sqlite3.connect(database)) as connection:
        return [
            n for (n,) in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]


def _rows(database: Path, table: str) -> int:
    import sqlite3

    with contextlib.closing(sqlite3.connect(database)) as connection:
        (count,) = connection.execute(f'SELECT count(*) FROM "{table}"').fetchone()
        return int(count)


async def test_a_server_without_thread_history_still_gets_a_seed(tmp_path, monkeypatch):
    """A server whose throwaway thread leaves no history database (here: one that answers
    every method without doing anything) still gets its seed, without that database: the
    skipped step is logged, and its scratch home and the build's work dir are gone."""
    import tempfile

    from jigs_harness_codex import _seed

    fake = tmp_path / "fake-codex"
    fake.write_text(f"#!{sys.executable}\n{FAKE.read_text()}")
    fake.chmod(0o755)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setenv("JIGS_CLI_DIR", str(tmp_path / "clis"))
    monkeypatch.setattr(_seed, "_FAILED", set())
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    with structlog.testing.capture_logs() as logs:
        seed = await _seed.ensure_seed(fake, env, structlog.get_logger())
    assert seed is not None
    assert (seed / ".jigs-seed-complete").is_file()
    assert not (seed / "thread_history_1.sqlite").exists()
    seeding = [e for e in logs if e["event"].startswith("codex.home_seed.")]
    assert [e["event"] for e in seeding] == [
        "codex.home_seed.history_skipped",
        "codex.home_seed.built",
    ], logs
    assert "no thread history database" in seeding[0]["error"]
    assert sum(e["event"] == "process.launched" for e in logs) == 2  # the seed's, the thread's
    lines = (seed / "fake-codex-rpc.jsonl").read_text().splitlines()
    assert [json.loads(line)["method"] for line in lines] == ["initialize"]  # the seed's own run
    assert not list(seed.parent.glob("building-*"))
    assert not list(scratch.iterdir())  # the throwaway thread's scratch home is removed


def _history_db(path: Path, *, migrated: bool = True, rows: int = 0) -> Path:
    import sqlite3

    with contextlib.closing(sqlite3.connect(path)) as connection:
        if migrated:
            connection.execute("CREATE TABLE _sqlx_migrations (version INTEGER)")
            connection.execute("INSERT INTO _sqlx_migrations VALUES (1)")
        connection.execute("CREATE TABLE thread_items (id TEXT)")
        for n in range(rows):
            connection.execute("INSERT INTO thread_items VALUES (?)", (f"item-{n}",))
        connection.commit()
    return path


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("missing", "no thread history database"),
        ("unmigrated", "not migrated"),
        ("rows", r"still holds 2 row\(s\) in thread_items"),
        ("garbage", "cannot be"),
    ],
)
def test_a_history_database_with_anything_in_it_is_never_taken(tmp_path, case, why):
    """The seed takes the throwaway thread's history database only when it is migrated and
    has no row in any table: a database left with the thread's items (a server whose delete
    did not delete), one not migrated, a file that is not a database or none at all is
    refused, so the seed goes without it."""
    from jigs_harness_codex._seed import _empty_history, _NoHistory

    path = tmp_path / "thread_history_1.sqlite"
    if case == "unmigrated":
        _history_db(path, migrated=False)
    elif case == "rows":
        _history_db(path, rows=2)
    elif case == "garbage":
        path.write_bytes(b"not a database at all, " * 100)
    with pytest.raises(_NoHistory, match=why):
        _empty_history(path)
    _empty_history(_history_db(tmp_path / "good.sqlite"))  # migrated and empty: taken


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("config.toml", 'notify = ["/bin/sh", "-c", "touch /tmp/x"]\n'),
        ("config.toml", '[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = "command"\ncommand = "x"\n'),
        ("config.toml", "[features]\nhooks = true\n"),
        ("config.toml", 'chatgpt_base_url = "http://127.0.0.1:1/"\n'),
        ("hooks.json", "{}"),
    ],
)
async def test_the_worktree_guard_refuses_hooks_and_notify(tmp_path, name, text):
    from jigs.checks import CheckFailure
    from jigs_harness_codex._checks import worktree_config_check

    (tmp_path / ".codex").mkdir()
    planted = tmp_path / ".codex" / name
    planted.write_text(text)
    result = await worktree_config_check(tmp_path).run()
    assert isinstance(result, CheckFailure)
    assert str(planted) in result.reason


def _fake_seed(tmp_path: Path) -> Path:
    seed = tmp_path / "seeds" / "key"
    (seed / "skills" / ".system" / "imagegen").mkdir(parents=True)
    (seed / "skills" / ".system" / "imagegen" / "SKILL.md").write_text("seed skill")
    (seed / "state_5.sqlite").write_bytes(b"seed state")
    (seed / ".jigs-seed-complete").write_text("x")
    return seed


def _join(prefix: str) -> None:
    import threading

    for thread in threading.enumerate():
        if thread.name.startswith(prefix):
            thread.join(10)


def test_a_spare_home_is_a_private_copy_claimed_once(tmp_path):
    from jigs_harness_codex._seed import claim_spare, prepare_spare

    seed = _fake_seed(tmp_path)
    log = structlog.get_logger()
    prepare_spare(seed, log)
    _join("jigs-codex-spare-home")
    first, second = tmp_path / "home-1", tmp_path / "home-2"
    first.mkdir()
    second.mkdir()
    assert claim_spare(seed, first)
    assert not claim_spare(seed, second)  # one copy was made: it is never handed out twice
    copied = first / "state_5.sqlite"
    assert copied.read_bytes() == b"seed state"
    assert copied.stat().st_ino != (seed / "state_5.sqlite").stat().st_ino  # a copy, not a link
    assert not (first / ".jigs-seed-complete").exists()
    copied.write_bytes(b"changed by a step")
    assert (seed / "state_5.sqlite").read_bytes() == b"seed state"
    for _ in range(3):  # never more than SPARES ready copies
        prepare_spare(seed, log)
        _join("jigs-codex-spare-home")
    ready = list(seed.with_name("key.spares").glob("ready-*"))
    assert len(ready) == 2
    assert not list(seed.with_name("key.spares").glob("building-*"))


def test_a_seed_copy_keeps_contents_exec_bits_and_inner_links(tmp_path):
    """Contents byte for byte; an executable script stays executable; a link inside a folder
    stays a link (as Codex wrote it); a top-level link is copied as its target's bytes; the
    system skills are a link to the seed's (shown read-only in the sandbox), not a copy."""
    from jigs_harness_codex._seed import copy_seed, system_skills

    seed = _fake_seed(tmp_path)
    tool = seed / "plugins" / "tool"
    tool.mkdir(parents=True)
    (tool / "README.md").write_text("a plugin")
    script = tool / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    (tool / "link.md").symlink_to("README.md")
    (seed / "skills" / "kept").mkdir()
    (seed / "skills" / "kept" / "SKILL.md").write_text("a skill beside .system")
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    (seed / "installation_id").symlink_to(outside)
    home = tmp_path / "home"
    home.mkdir()
    copy_seed(seed, home)
    copied = home / "plugins" / "tool"
    assert (copied / "README.md").read_text() == "a plugin"
    assert (home / "state_5.sqlite").read_bytes() == b"seed state"
    assert os.access(copied / "run.sh", os.X_OK)
    assert not os.access(copied / "README.md", os.X_OK)
    assert (copied / "link.md").is_symlink()
    assert os.readlink(copied / "link.md") == "README.md"
    assert not (home / "installation_id").is_symlink()
    assert (home / "installation_id").read_text() == "{}"
    assert not (home / ".jigs-seed-complete").exists()
    assert (home / "skills" / "kept" / "SKILL.md").read_text() == "a skill beside .system"
    assert (home / "skills" / ".system").is_symlink()
    assert (home / "skills" / ".system").resolve() == system_skills(seed).resolve()


def test_removing_a_home_leaves_the_seeds_system_skills(tmp_path):
    from jigs_harness_codex._home import CodexHome
    from jigs_harness_codex._seed import copy_seed

    seed = _fake_seed(tmp_path)
    home = CodexHome(tmp_path / "home")
    home.path.mkdir()
    copy_seed(seed, home.path)
    home.remove()
    assert not home.path.exists()
    assert (seed / "skills" / ".system" / "imagegen" / "SKILL.md").read_text() == "seed skill"


def test_home_cleanup_run_early_then_again_removes_what_a_dying_process_wrote(tmp_path):
    """The cleanup runs once the app server is killed (while it dies) and again from the close
    stack once it is gone: the second pass removes what a process wrote meanwhile, and a third
    finds nothing to do."""
    from jigs_harness_codex._home import CodexHome
    from jigs_harness_codex._transport import _HomeCleanup

    home = CodexHome(tmp_path / "homes" / "invocation-x")
    rollout = home.path / "sessions" / "2026" / "12" / "01" / "rollout-a-thread.jsonl"
    rollout.parent.mkdir(parents=True)
    rollout.write_text('{"type":"event_msg"}\n')
    store = tmp_path / "sessions"
    with structlog.testing.capture_logs() as logs:
        cleanup = _HomeCleanup(home, store, structlog.get_logger())
        cleanup()
        assert not home.path.exists()
        assert (store / "2026" / "12" / "01" / "rollout-a-thread.jsonl").is_file()
        late = home.path / "logs" / "codex.log"  # a write that landed while the process died
        late.parent.mkdir(parents=True)
        late.write_text("late")
        cleanup()
        assert not home.path.exists()
        cleanup()
    assert [e["event"] for e in logs] == ["codex.home.removed", "codex.home.removed"]


@pytest.mark.parametrize(
    ("reported", "used"),
    [
        ("{store}/2026/12/01/rollout-2026-12-01T00-00-00-{id}.jsonl", True),
        ("{store}/../../elsewhere/rollout-x-{id}.jsonl", False),  # out of the home by ..
        ("/etc/rollout-x-{id}.jsonl", False),  # not in the home's sessions
        ("{store}/2026/rollout-x-01a22966-6fd2-7931-9655-000000000000.jsonl", False),  # another
        ("{store}/2026/notes-{id}.jsonl", False),  # not a rollout's name
        (None, False),
        (42, False),
    ],
)
def test_the_rollout_path_codex_reports_is_used_only_inside_the_home(tmp_path, reported, used):
    """thread.path (unstable in Codex's protocol) spares a search of the home at close, and is
    trusted only as a rollout of this thread inside the home's sessions; otherwise the rollout
    is looked up by name."""
    from jigs_harness_codex._transport import _rollout_hint

    store = tmp_path / "home" / "sessions"
    thread = "01a22966-6fd2-7931-9655-85c89129d947"
    path = reported.format(store=store, id=thread) if isinstance(reported, str) else reported
    hint = _rollout_hint(path, store, thread)
    assert (hint is not None) is used
    if used:
        assert hint == Path(path)
