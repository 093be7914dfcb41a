import json

import pytest
from jigs import harnesses
from jigs.errors import DescriptorError, HarnessNotFoundError
from jigs_harness_echo import EchoDescriptor


def test_descriptor_round_trips_through_json_into_its_class():
    d = harnesses.echo(model="echo-2", prefix="p:")
    stored = json.dumps(d.to_data())
    back = harnesses.loads(stored)
    assert type(back) is EchoDescriptor
    assert back == d
    assert back.describe() == d.describe()


def test_describe_is_canonical_and_omits_defaults():
    assert harnesses.echo().describe() == '{"kind":"echo"}'
    a = harnesses.echo(prefix="x", model="m")
    b = harnesses.load({"model": "m", "prefix": "x", "kind": "echo"})
    assert a.describe() == b.describe() == '{"kind":"echo","model":"m","prefix":"x"}'


def test_descriptor_is_frozen():
    d = harnesses.echo()
    with pytest.raises(AttributeError, match="immutable"):
        d.model = "other"  # type: ignore[misc]


def test_unknown_key_is_refused_naming_it():
    with pytest.raises(DescriptorError, match=r"temprature: unknown key for a echo descriptor"):
        harnesses.echo(temprature=0)


@pytest.mark.parametrize(
    "key", ["cwd", "env", "resume", "permission_mode", "extra_args", "settings"]
)
def test_policy_keys_are_refused_with_the_reason(key):
    with pytest.raises(DescriptorError) as info:
        harnesses.load({"kind": "echo", key: "x"})
    assert info.value.key == key
    assert f"may not set {key!r}:" in str(info.value)


def test_a_literal_secret_in_mcp_env_is_refused_without_echo():
    secret = "sk-ant-api03-" + "a" * 40
    with pytest.raises(DescriptorError) as info:
        harnesses.echo(
            mcp_servers={"s": {"command": "x", "env": {"TOKEN": secret}, "probe": {"tool": "t"}}}
        )
    assert secret not in str(info.value)
    assert "looks like a secret" in str(info.value)


def test_mcp_servers_infer_their_type_and_name_their_env():
    d = harnesses.echo(
        mcp_servers={
            "files": {"command": "srv", "env": {"TOKEN": "FILES_TOKEN"}, "probe": {"tool": "ping"}},
            "web": {
                "url": "https://mcp.example",
                "bearer_token_env": "WEB_TOKEN",
                "probe": {"tool": "ping"},
            },
        }
    )
    assert d.mcp_servers["web"].type == "http"
    assert d.env_names() == {"FILES_TOKEN", "WEB_TOKEN"}
    assert harnesses.loads(d.describe()) == d


def test_unknown_kind_says_how_to_install_it():
    with pytest.raises(HarnessNotFoundError) as info:
        harnesses.nosuchkind(model="x")
    assert isinstance(info.value, LookupError)
    assert "pip install jigs-harness-nosuchkind" in str(info.value)
    assert "echo" in str(info.value)  # lists the installed kinds


def test_stored_data_without_kind_is_refused():
    with pytest.raises(DescriptorError, match="needs a 'kind'"):
        harnesses.load({"model": "x"})
    with pytest.raises(DescriptorError, match="not valid JSON"):
        harnesses.loads("{nope")


def test_a_typo_of_an_installed_kind_is_answered_with_the_nearest_kind():
    with pytest.raises(HarnessNotFoundError) as info:
        harnesses.load({"kind": "claud"})
    message = str(info.value)
    assert "Did you mean 'claude'?" in message
    assert "jigs-harness-claud" not in message  # no pip install of a distribution that is none


def test_an_unknown_key_lists_the_valid_keys_nearest_first():
    with pytest.raises(DescriptorError) as info:
        harnesses.load({"kind": "claude", "modle": "sonnet"})
    message = str(info.value)
    assert "modle: unknown key for a claude descriptor (did you mean 'model'?" in message
    assert "valid keys: " in message
    assert "api_key_env, api_key_header" in message  # sorted, the descriptor's own fields
    assert "sonnet" not in message


def test_an_mcp_server_error_names_the_server_never_a_value():
    servers = {
        "good": {"command": "x", "probe": {"tool": "ping"}},
        "github": {"command": "sk-not-shown-value", "probe": {"tol": "ping"}},
    }
    with pytest.raises(DescriptorError) as info:
        harnesses.load({"kind": "claude", "mcp_servers": servers})
    message = str(info.value)
    assert "mcp_servers['github'].probe.tol: unknown key" in message
    assert "did you mean 'tool'?" in message
    assert "sk-not-shown-value" not in message
    # a type error names the server too
    bad_env = {"github": {"command": "x", "env": 3, "probe": {"tool": "ping"}}}
    with pytest.raises(DescriptorError, match=r"mcp_servers\['github'\]\.env: Input should be"):
        harnesses.load({"kind": "claude", "mcp_servers": bad_env})
    # a server name shaped like a secret is not shown
    secret = "sk-ant-api03-" + "a" * 40
    with pytest.raises(DescriptorError) as hidden:
        harnesses.load({"kind": "claude", "mcp_servers": {secret: {"comand": "x"}}})
    assert "mcp_servers[<key not shown>].comand" in str(hidden.value)
    assert secret not in str(hidden.value)


@pytest.mark.parametrize("model", ["gpt-x", {"model": "gpt-x", "base_url": "http://h/v1"}])
def test_a_pi_model_without_a_type_says_it_needs_one(model):
    with pytest.raises(DescriptorError) as info:
        harnesses.load({"kind": "pi", "model": model})
    assert '"type": "openai-compatible"' in str(info.value)


def test_the_setting_sources_refusal_says_what_jigs_does():
    with pytest.raises(DescriptorError) as info:
        harnesses.load({"kind": "claude", "setting_sources": ["project"]})
    message = str(info.value)
    assert "project settings only" not in message  # untrue: no settings file is read at all
    assert '--setting-sources ""' in message
