"""The plugin contract version: a kind built for another contract (or declaring none) is refused
with a message naming the kind, what it was built for and the jigs-core versions that fit."""

import json
import pickle
from typing import Literal

import pytest
from jigs.descriptors import HarnessDescriptor, ModelEndpointFields
from jigs.errors import (
    DescriptorError,
    HarnessContractError,
    HarnessNotFoundError,
    HarnessPluginError,
)
from jigs.plugin import CONTRACT_VERSION, Harness
from jigs.registry._contract import (
    CHANGES,
    CORE_RELEASES,
    check_contract,
    check_route,
    core_releases_for,
    fits,
    verify_kind,
)
from jigs.registry._registry import Registry
from jigs_harness_echo import EchoHarness
from jigs_harness_echo._harness import EchoDescriptor
from test_registry import GOOD, jigs_cli, make_dist


def kind_source(kind: str, contract_line: str) -> str:
    return GOOD.replace("KIND", kind).replace('        contract = "2.0"\n', contract_line)


@pytest.fixture
def site(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    for kind, line in [
        ("current", f'        contract = "{CONTRACT_VERSION}"\n'),
        ("future", '        contract = "3.0"\n'),
        ("newminor", '        contract = "2.7"\n'),
        ("old", '        contract = "1.0"\n'),
        ("ancient", '        contract = "0.3"\n'),
        ("silent", ""),
        ("weird", "        contract = 1\n"),
    ]:
        make_dist(site, f"jigs-harness-{kind}", kind, f"{kind}_plugin", kind_source(kind, line))
    return site


def test_the_contract_version_is_major_minor_and_every_shipped_kind_fits():
    major, minor = CONTRACT_VERSION.split(".")
    assert major.isdigit()
    assert minor.isdigit()
    assert CONTRACT_VERSION in CORE_RELEASES
    assert core_releases_for(CONTRACT_VERSION) == ">=0.1,<0.2"
    registry = Registry()
    # the kinds written before contract 2.1 load on it unchanged (a minor adds optional hooks)
    for kind in ["echo", "claude", "codex", "pi"]:
        assert fits(registry.get(kind).contract)
    assert registry.get("opencode").contract == CONTRACT_VERSION


@pytest.mark.parametrize(
    ("declared", "ok"),
    [
        ("1.0", True),
        ("1.1", False),  # needs a core with the newer hooks
        ("2.0", False),
        ("0.9", False),
        ("01.0", False),
        ("1.00", False),
        ("1.", False),
        (".1", False),
        ("1.-1", False),
        ("\uff11.0", False),
        ("1.0 ", False),
        ("99999.0", False),
        ("1.0.0", False),
        ("1", False),
        (1, False),
        (1.0, False),
        (None, False),
        ("", False),
    ],
)
def test_fits_only_the_same_major_at_most_the_same_minor(declared, ok):
    assert fits(declared, "1.0") is ok


def test_an_older_minor_fits_a_newer_core():
    assert fits("1.0", "1.3")
    assert fits("1.3", "1.3")
    assert not fits("1.4", "1.3")
    assert not fits("1.0", "2.0")


def test_harnesses_lists_refused_kinds_with_the_versions_that_fit(site):
    result = jigs_cli(site, "harnesses", "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["kind"]: row for row in json.loads(result.stdout)}
    assert rows["current"]["error"] is None
    assert rows["current"]["contract"] == CONTRACT_VERSION
    assert rows["echo"]["error"] is None

    future = rows["future"]["error"]
    assert rows["future"]["contract"] == "3.0"
    assert "'future' harness (jigs-harness-future 0.1)" in future
    assert "built for plugin contract 3.0" in future
    assert f"implements plugin contract {CONTRACT_VERSION}" in future
    assert "pip install -U jigs-core" in future
    assert "jigs-harness-future release built for contract 2.x" in future
    assert "What changed" not in future  # a newer kind: nothing to tell its author

    newminor = rows["newminor"]["error"]
    assert "built for plugin contract 2.7" in newminor
    assert "no jigs-core release known to this one implements contract 2.7" in newminor

    old = rows["old"]["error"]
    assert "built for plugin contract 1.0" in old
    assert f"What changed in contract {CONTRACT_VERSION}: (1) limits are declared once" in old
    assert "ModelEndpointFields" in old
    assert "ConfigFile and Planted moved to jigs_testing" in old
    assert "See docs/guide/write-a-harness-kind.md" in old

    silent = rows["silent"]["error"]
    assert rows["silent"]["contract"] is None
    assert "declares no plugin contract version" in silent
    assert f"it loads kinds built for contract 2.0 to {CONTRACT_VERSION})" in silent
    assert f'contract = "{CONTRACT_VERSION}"' in silent
    assert "pip install -U jigs-harness-silent" in silent

    weird = rows["weird"]["error"]
    assert "malformed int" in weird

    ancient = rows["ancient"]["error"]
    assert "built for plugin contract 0.3" in ancient


def test_the_table_shows_the_contract_column(site):
    result = jigs_cli(site, "harnesses", COLUMNS="400")
    assert result.returncode == 0, result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines()[2:] if line.strip()}
    assert lines["current"].split()[4] == CONTRACT_VERSION
    assert "refused" in lines["future"]


def test_running_a_refused_kind_fails_with_the_contract_error(site, tmp_path):
    cwd = tmp_path / "wt"
    cwd.mkdir()
    result = jigs_cli(site, "run", "--harness", "future", "--cwd", str(cwd), "hi")
    assert result.returncode == 1
    assert "HarnessContractError" in result.stderr
    assert "built for plugin contract 3.0" in result.stderr


def test_doctor_reports_the_refusal_and_fails(site):
    result = jigs_cli(site, "doctor", "--harness", "silent", "--json")
    assert result.returncode == 1
    document = json.loads(result.stdout)
    assert document["ok"] is False
    assert "declares no plugin contract version" in json.dumps(document)


def test_a_disabled_refused_kind_is_just_disabled(site):
    result = jigs_cli(site, "harnesses", "--json", JIGS_DISABLE_PLUGINS="future")
    rows = {row["kind"]: row for row in json.loads(result.stdout)}
    assert rows["future"]["disabled"] is True
    assert "contract" not in (rows["future"]["error"] or "").split("JIGS_DISABLE")[0]


class Silent(EchoHarness):
    contract = None


class Future(EchoHarness):
    contract = "1.1"


def test_register_refuses_a_kind_for_another_contract():
    registry = Registry()
    for harness in (Silent(), Future()):
        with pytest.raises(HarnessContractError) as info:
            registry.register(harness)
        assert isinstance(info.value, HarnessNotFoundError)
        assert isinstance(info.value, LookupError)
        assert info.value.kind == "echo"
        assert info.value.retryable is False
    # nothing was registered: the entry point's echo still loads
    assert fits(registry.get("echo").contract)


def test_the_error_carries_its_fields_and_pickles():
    with pytest.raises(HarnessContractError) as info:
        check_contract(Future(), distribution="jigs-harness-echo", distribution_version="9.9")
    error = info.value
    assert (error.kind, error.contract, error.core_contract) == ("echo", "1.1", CONTRACT_VERSION)
    assert error.distribution == "jigs-harness-echo"
    assert error.fits is None
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is HarnessContractError
    assert str(back) == str(error)
    assert back.contract == "1.1"


def test_an_old_kind_is_told_which_core_to_pin_and_what_changed(monkeypatch):
    monkeypatch.setitem(CORE_RELEASES, "3.0", ("0.2", "0.3"))
    monkeypatch.setitem(CHANGES, 2, ("hook x was renamed y",))
    with pytest.raises(HarnessContractError) as info:
        check_contract(EchoHarness(), core="3.0")
    assert info.value.fits == ">=0.1,<0.2"
    assert "pin jigs-core>=0.1,<0.2 (pip install 'jigs-core>=0.1,<0.2')" in str(info.value)
    assert "install a jigs-harness-echo release built for contract 3.x" in str(info.value)
    assert info.value.changes == ("hook x was renamed y",)
    assert "What changed in contract 3.0: (1) hook x was renamed y. See docs/" in str(info.value)


def test_every_earlier_major_has_its_changes_listed():
    major = int(CONTRACT_VERSION.split(".")[0])
    assert all(CHANGES.get(m) for m in range(1, major))


def test_a_refused_kind_is_refused_again_without_reimporting(site, monkeypatch):
    monkeypatch.syspath_prepend(str(site))
    import importlib

    importlib.invalidate_caches()
    registry = Registry()
    for _ in range(2):
        with pytest.raises(HarnessContractError) as info:
            registry.get("future")
        assert info.value.distribution == "jigs-harness-future"
        assert info.value.distribution_version == "0.1"
    assert "future" in registry.kinds()


def test_a_short_malformed_contract_is_shown_with_the_fix_to_write_major_minor():
    from jigs.errors import HarnessContractError
    from jigs.registry._contract import check_contract

    harness = type("H", (), {"kind": "mini", "contract": "1"})()
    with pytest.raises(HarnessContractError) as caught:
        check_contract(harness)
    message = str(caught.value)
    assert "<malformed '1', not 'major.minor'>" in message
    assert f'write contract = "{CONTRACT_VERSION}"' in message
    assert "upgrade jigs-core" not in message  # an upgrade would not help


def test_a_kind_whose_distribution_lacks_the_entry_point_is_told_to_declare_it():
    from jigs.errors import HarnessNotFoundError

    # jigs-harness-echo is installed here: as if its entry point were missing
    message = str(HarnessNotFoundError("echo", []))
    assert "jigs-harness-echo is installed but declares no entry point 'echo'" in message
    assert 'echo = "jigs_harness_echo.plugin"' in message
    assert "pip install jigs-harness-nope" in str(HarnessNotFoundError("nope", []))


# ------------------------------------------------------------- verified at registration


def _kind(name="vkind", *, harness_body=None, bases=(HarnessDescriptor,), fields=None):
    """A kind built in code: a descriptor (``fields`` added) and a harness whose body is
    ``harness_body`` (default: launch_turn and decoder)."""
    namespace = {"__annotations__": {"kind": Literal[name], **(fields or {})}, "kind": name}
    descriptor = type(f"{name.title()}Descriptor", bases, namespace)
    body = {
        "kind": name,
        "contract": CONTRACT_VERSION,
        "display_name": name,
        "descriptor_type": descriptor,
        "resolve_executable": lambda self, env: None,
    }
    if harness_body is None:
        harness_body = {
            "launch_turn": lambda self, turn, ctx, state: None,
            "decoder": lambda self, turn: None,
        }
    return type(f"{name.title()}Harness", (Harness,), {**body, **harness_body})()


def test_a_complete_kind_registers():
    Registry().register(_kind())
    verify_kind(_kind(harness_body={"open_transport": lambda self, target, ctx: None}))


@pytest.mark.parametrize(
    ("body", "missing"),
    [
        ({}, ["launch_turn", "decoder"]),
        ({"launch_turn": lambda self, turn, ctx, state: None}, ["decoder"]),
        ({"decoder": lambda self, turn: None}, ["launch_turn"]),
    ],
)
def test_a_kind_missing_a_hook_is_refused_at_registration_naming_it(body, missing):
    registry = Registry()
    with pytest.raises(HarnessPluginError) as info:
        registry.register(_kind(harness_body=body))
    message = str(info.value)
    assert "the 'vkind' harness does not implement plugin contract" in message
    for hook in missing:
        assert f"hook {hook} is missing: implement {hook}()" in message
    assert "open_transport()" in message  # the other way to satisfy it
    assert "write-a-harness-kind.md" in message
    assert "vkind" not in registry.kinds()


def test_a_harness_without_a_descriptor_class_is_refused():
    harness = _kind()
    type(harness).descriptor_type = dict  # type: ignore[assignment]
    with pytest.raises(HarnessPluginError, match=r"descriptor_type is not a jigs\.descriptors"):
        verify_kind(harness)


def test_a_descriptor_for_another_kind_is_refused():
    harness = _kind()
    type(harness).descriptor_type = EchoDescriptor
    with pytest.raises(HarnessPluginError, match='kind: Literal\\["vkind"\\] = "vkind"'):
        verify_kind(harness)


def test_limits_declared_twice_or_badly_are_refused():
    twice = _kind()
    type(twice).native_limits = frozenset({"max_turns"})  # type: ignore[attr-defined]
    with pytest.raises(HarnessPluginError, match=r"native_limits is a contract 1\.x declaration"):
        verify_kind(twice)
    old = _kind()
    type(old).descriptor_type.supported_limits = frozenset({"max_turns"})  # type: ignore[attr-defined]
    with pytest.raises(
        HarnessPluginError, match=r"supported_limits is a contract 1\.x declaration"
    ):
        verify_kind(old)
    bad = _kind()
    type(bad).descriptor_type.limits = {"max_turns": "both", "max_tokens": "core"}  # type: ignore[misc]
    with pytest.raises(HarnessPluginError) as info:
        verify_kind(bad)
    assert "limits names max_tokens, max_turns" in str(info.value)


def test_the_engine_reads_who_enforces_a_limit_from_the_one_declaration():
    assert EchoDescriptor.limits == {"max_turns": "core", "max_budget_usd": "core"}
    with pytest.raises(DescriptorError, match="cannot enforce max_turns"):
        _kind().descriptor_type(max_turns=2)


@pytest.mark.parametrize("name", ["gateway_key_env", "api_key", "token_env", "openai_api_key_var"])
def test_a_key_named_outside_the_endpoint_part_is_refused(name):
    harness = _kind(fields={name: str | None})
    with pytest.raises(HarnessPluginError) as info:
        verify_kind(harness)
    assert f"declares {name} outside an endpoint part" in str(info.value)
    assert "ModelEndpointFields" in str(info.value)


def test_a_key_the_descriptor_names_through_its_part_gets_the_secret_rules():
    def model_key_env(self):
        return self.gateway_key_env

    harness = _kind(fields={"gateway_key_env": str | None})
    descriptor = type(harness).descriptor_type
    descriptor.model_key_env = model_key_env
    verify_kind(harness)  # handled by the declared part: accepted
    assert descriptor(gateway_key_env="GW_KEY").env_names() == {"GW_KEY"}
    with pytest.raises(DescriptorError) as info:
        descriptor(gateway_key_env="sk-ant-api03-" + "x" * 40)
    assert "x" * 20 not in str(info.value)


def test_the_endpoint_part_applies_the_secret_rules():
    harness = _kind(bases=(ModelEndpointFields, HarnessDescriptor))
    verify_kind(harness)
    descriptor = type(harness).descriptor_type
    assert descriptor(api_key_env="MY_KEY").model_key_env() == "MY_KEY"
    with pytest.raises(DescriptorError):
        descriptor(base_url="https://user:pw@example.com")
    with pytest.raises(DescriptorError) as info:
        descriptor(api_key_env="sk-proj-" + "y" * 40)
    assert "y" * 20 not in str(info.value)


def test_a_model_route_without_an_endpoint_part_is_refused():
    harness = _kind(
        harness_body={
            "open_transport": lambda self, target, ctx: None,
            "model_route": lambda self, descriptor: None,
        }
    )
    with pytest.raises(HarnessPluginError, match="model_route\\(\\) is implemented but"):
        verify_kind(harness)


MISSING_HOOK = """
    from typing import Literal
    from jigs.descriptors import HarnessDescriptor
    from jigs.plugin import Harness, hookimpl

    class D(HarnessDescriptor):
        kind: Literal["nohook"] = "nohook"

    class H(Harness):
        kind = "nohook"
        contract = "CONTRACT"
        display_name = "nohook"
        descriptor_type = D

        def resolve_executable(self, env):
            raise NotImplementedError

    @hookimpl
    def jigs_register_harnesses(register):
        register(H())
"""


def test_an_installed_kind_missing_a_hook_is_refused_and_the_others_load(site):
    source = MISSING_HOOK.replace("CONTRACT", CONTRACT_VERSION)
    make_dist(site, "jigs-harness-nohook", "nohook", "nohook_plugin", source)
    result = jigs_cli(site, "harnesses", "--json")
    rows = {row["kind"]: row for row in json.loads(result.stdout)}
    error = rows["nohook"]["error"]
    assert "entry point nohook = nohook_plugin (distribution jigs-harness-nohook) refused" in error
    assert "hook launch_turn is missing" in error
    assert rows["current"]["error"] is None
    assert rows["echo"]["error"] is None


def test_a_route_to_another_key_than_the_endpoint_part_names_is_refused():
    from jigs.plugin import ModelRoute

    descriptor = type(_kind(bases=(ModelEndpointFields, HarnessDescriptor))).descriptor_type
    named = descriptor(api_key_env="PART_KEY")
    check_route("vkind", None, named)
    check_route("vkind", ModelRoute(upstream="https://x.test", key_env="PART_KEY"), named)
    with pytest.raises(HarnessPluginError) as info:
        check_route("vkind", ModelRoute(upstream="https://x.test", key_env="OTHER_KEY"), named)
    assert "routes the model key of OTHER_KEY" in str(info.value)
    assert "endpoint part names PART_KEY" in str(info.value)


def test_an_endpoint_part_listed_after_the_base_is_refused_not_ignored():
    # HarnessDescriptor first: its model_key_env (None) would hide the part's key
    harness = _kind(bases=(HarnessDescriptor, ModelEndpointFields))
    with pytest.raises(HarnessPluginError, match="declares api_key_env outside an endpoint part"):
        verify_kind(harness)


def test_a_resume_id_shaped_like_a_token_is_taken_when_it_has_the_kinds_declared_shape():
    # contract 2.1: the core refuses resume ids that look like secrets, unless the kind declares
    # that its CLI's ids have that shape (opencode: ses_ and 26 mixed-case letters and digits)
    from jigs import AgentSessionRef
    from jigs.engine._pipeline import _validate_resume
    from jigs.errors import AgentSessionError

    class Shaped:
        session_id_pattern = r"ses_[0-9A-Za-z]{26}"

    class Plain:
        session_id_pattern = None

    token_like = AgentSessionRef(
        harness="opencode", id="ses_db5538aceffetPwaUaHtIYFDrI", descriptor="{}"
    )
    assert _validate_resume(token_like, Shaped()) == token_like
    with pytest.raises(AgentSessionError):
        _validate_resume(token_like, Plain())
    key = AgentSessionRef(
        harness="opencode", id="sk-proj-a1B2a1B2a1B2a1B2a1B2a1B2", descriptor="{}"
    )
    with pytest.raises(AgentSessionError) as info:
        _validate_resume(key, Shaped())
    assert key.id not in str(info.value)


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("ses_[0-9A-Za-z]{26}", None),
        (".*", "also matches API keys"),
        ("[A-Za-z0-9_-]+", "also matches API keys"),
        ("(", "not a regular expression"),
        (42, "not a regular expression"),
    ],
)
def test_the_registry_refuses_a_session_id_pattern_that_would_let_keys_through(pattern, problem):
    from jigs.registry._contract import _pattern_problems

    found = _pattern_problems(pattern)
    if problem is None:
        assert found == []
    else:
        assert len(found) == 1
        assert problem in found[0]
