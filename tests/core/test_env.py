"""The agent's environment: built from empty (only allowlisted names and what the factory's
``agents_env`` declares, never from the worktree under edit), reserved names and secret shapes
refused before anything runs, every step's process included."""

import re

import pytest
from jigs import harnesses
from jigs.env import BASE_ENV, build_env, find_agents_config, validate_agents_env
from jigs.errors import EnvPolicyError
from jigs.models import generate_text
from jigs.policy._lock import worktree_locked
from jigs.steps import create_agent_runner, run_agent


def test_env_is_built_from_empty():
    host = {
        "LC_DEPLOY_TOKEN": "ghp_forwarded_by_ssh",
        "PATH": "/bin",
        "HOME": "/h",
        "LC_ALL": "C",
        "ANTHROPIC_API_KEY": "sk",
        "AWS_SECRET_ACCESS_KEY": "a",
        "LC_bad": "x",
        "RANDOM_CANARY": "1",
        "EXTRA": "e",
    }
    env = build_env(["EXTRA"], source=host)
    assert env == {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "EXTRA": "e"}


def test_unset_names_are_simply_absent():
    assert build_env(["NOT_SET"], source={}) == {}
    assert "PATH" in BASE_ENV
    assert "LANG" in BASE_ENV


def test_agents_env_from_pyproject_found_upward(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.jigs.agents]\nenv = ["SSH_AUTH_SOCK", "GIT_SSH"]\n'
    )
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    config = find_agents_config(deep)
    assert config.env == ("SSH_AUTH_SOCK", "GIT_SSH")
    assert "[tool.jigs.agents]" in config.source


def test_jigs_toml_wins_in_the_same_directory(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.jigs.agents]\nenv = ["A"]\n')
    (tmp_path / "jigs.toml").write_text('[agents]\nenv = ["B"]\n')
    assert find_agents_config(tmp_path).env == ("B",)


def test_a_pyproject_without_the_table_is_skipped(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.jigs.agents]\nenv = ["OUTER"]\n')
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert find_agents_config(inner).env == ("OUTER",)


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["ANTHROPIC_API_KEY"], "selects a model credential; name it on the descriptor"),
        (["CODEX_HOME"], "is set by jigs"),
        (["FOO=bar"], "is not an environment variable name"),
        ([3], "is not an environment variable name"),
    ],
)
def test_reserved_names_and_values_are_refused(names, message):
    with pytest.raises(EnvPolicyError, match=re.escape(message)):
        validate_agents_env(names, source="test")


def test_a_value_is_not_echoed():
    secret = "ghp_" + "x" * 60
    with pytest.raises(EnvPolicyError) as info:
        validate_agents_env([secret], source="t")
    assert secret not in str(info.value)


def test_malformed_toml_names_the_file(tmp_path):
    (tmp_path / "jigs.toml").write_text("[agents\nenv = 1")
    with pytest.raises(EnvPolicyError, match=r"jigs\.toml is not valid TOML"):
        find_agents_config(tmp_path)


def test_unknown_keys_in_the_table_are_refused(tmp_path):
    (tmp_path / "jigs.toml").write_text('[agents]\nenv = []\nenvs = ["X"]\n')
    with pytest.raises(EnvPolicyError, match="unknown keys"):
        find_agents_config(tmp_path)


@pytest.mark.parametrize("name", ["ASIAPAC_REGION", "AKIA_MODE", "AIzaCONFIG", "SSH_AUTH_SOCK"])
def test_ordinary_names_are_not_mistaken_for_secrets(name):
    assert validate_agents_env([name], source="t") == (name,)


@pytest.mark.parametrize(
    "value", ["AKIAIOSFODNN7EXAMPLE", "sk-ant-api03-abcdef", "ghp_abcdefghijklmnop"]
)
def test_key_shapes_are_refused(value):
    with pytest.raises(EnvPolicyError, match="looks like a secret"):
        validate_agents_env([value], source="t")


@pytest.mark.anyio
async def test_env_is_built_from_empty_and_no_canary_reaches_the_child(
    worktree, run_meta, monkeypatch
):
    canaries = {
        "ANTHROPIC_API_KEY": "sk-ant-canary",
        "AWS_SECRET_ACCESS_KEY": "aws-canary",
        "JIGS_CANARY_7F3A": "random-canary",
    }
    for name, value in canaries.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DECLARED_BY_FACTORY", "yes")
    async with create_agent_runner(
        harnesses.echo(), cwd=worktree, run=run_meta, agents_env=["DECLARED_BY_FACTORY"]
    ) as runner:
        result = await generate_text(runner.model, prompt="env")
    names = set(result.text.split())
    assert not names & set(canaries)
    assert "DECLARED_BY_FACTORY" in names
    from jigs.env import BASE_ENV

    # python itself may add a few names at start-up; nothing from the host may pass
    allowed = set(BASE_ENV) | {"DECLARED_BY_FACTORY", "LC_CTYPE", "PWD", "SHLVL", "_"}
    from jigs.env import LOCALE_ENV

    leaked = {n for n in names if n not in allowed | LOCALE_ENV}
    assert not leaked, leaked


@pytest.mark.anyio
async def test_agents_env_refuses_reserved_names_before_anything_runs(worktree, run_meta):
    with pytest.raises(EnvPolicyError, match="OPENAI_API_KEY selects a model credential"):
        await create_agent_runner(
            harnesses.echo(), cwd=worktree, run=run_meta, agents_env=["OPENAI_API_KEY"]
        )
    assert not worktree_locked(worktree)


@pytest.mark.anyio
async def test_agents_env_is_read_from_the_factory_pyproject(tmp_path, run_meta, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.jigs.agents]\nenv = ["FROM_FACTORY"]\n')
    tree = tmp_path / "tree"
    tree.mkdir()
    monkeypatch.setenv("FROM_FACTORY", "1")
    result = await run_agent(harness=harnesses.echo(), cwd=tree, prompt="env", run=run_meta)
    assert "FROM_FACTORY" in result.text.split()


@pytest.mark.anyio
async def test_agents_env_in_the_worktree_itself_is_ignored(tmp_path, run_meta, monkeypatch):
    (tmp_path / "jigs.toml").write_text('[agents]\nenv = ["FROM_FACTORY"]\n')
    tree = tmp_path / "tree"
    tree.mkdir()
    # the code under edit tries to widen the agent's environment
    (tree / "jigs.toml").write_text('[agents]\nenv = ["AWS_SECRET_ACCESS_KEY"]\n')
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-canary")
    monkeypatch.setenv("FROM_FACTORY", "1")
    result = await run_agent(harness=harnesses.echo(), cwd=tree, prompt="env", run=run_meta)
    names = result.text.split()
    assert "AWS_SECRET_ACCESS_KEY" not in names
    assert "FROM_FACTORY" in names


@pytest.mark.anyio
async def test_an_mcp_server_may_not_read_a_reserved_name(worktree, run_meta):
    descriptor = harnesses.echo(
        mcp_servers={
            "x": {"command": "srv", "env": {"FOO": "ANTHROPIC_API_KEY"}, "probe": {"tool": "p"}}
        }
    )
    with pytest.raises(EnvPolicyError, match="MCP server 'x' reads ANTHROPIC_API_KEY"):
        await create_agent_runner(descriptor, cwd=worktree, run=run_meta)
