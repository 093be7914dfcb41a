import re

import pytest
from jigs.env import BASE_ENV, build_env, find_agents_config, validate_agents_env
from jigs.errors import EnvPolicyError


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
