"""The plugin contract version: a kind built for another contract (or declaring none) is refused
with a message naming the kind, what it was built for and the jigs-core versions that fit."""

import json
import pickle

import pytest
from jigs.errors import HarnessContractError, HarnessNotFoundError
from jigs.plugin import CONTRACT_VERSION
from jigs.registry._contract import CORE_RELEASES, check_contract, core_releases_for, fits
from jigs.registry._registry import Registry
from jigs_harness_echo import EchoHarness
from test_registry import GOOD, jigs_cli, make_dist


def kind_source(kind: str, contract_line: str) -> str:
    return GOOD.replace("KIND", kind).replace('        contract = "1.0"\n', contract_line)


@pytest.fixture
def site(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    for kind, line in [
        ("current", f'        contract = "{CONTRACT_VERSION}"\n'),
        ("future", '        contract = "2.0"\n'),
        ("newminor", '        contract = "1.7"\n'),
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
    for kind in ["echo", "claude", "codex", "pi"]:
        assert registry.get(kind).contract == CONTRACT_VERSION


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
    assert rows["future"]["contract"] == "2.0"
    assert "'future' harness (jigs-harness-future 0.1)" in future
    assert "built for plugin contract 2.0" in future
    assert f"implements plugin contract {CONTRACT_VERSION}" in future
    assert "pip install -U jigs-core" in future
    assert "jigs-harness-future release built for contract 1.x" in future

    newminor = rows["newminor"]["error"]
    assert "built for plugin contract 1.7" in newminor
    assert "no jigs-core release known to this one implements contract 1.7" in newminor

    silent = rows["silent"]["error"]
    assert rows["silent"]["contract"] is None
    assert "declares no plugin contract version" in silent
    assert "it loads kinds built for contract 1.0)" in silent
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
    assert "built for plugin contract 2.0" in result.stderr


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
    assert registry.get("echo").contract == CONTRACT_VERSION


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


def test_an_old_kind_is_told_which_core_to_pin(monkeypatch):
    monkeypatch.setitem(CORE_RELEASES, "2.0", ("0.2", "0.3"))
    with pytest.raises(HarnessContractError) as info:
        check_contract(EchoHarness(), core="2.0")
    assert info.value.fits == ">=0.1,<0.2"
    assert "pin jigs-core>=0.1,<0.2 (pip install 'jigs-core>=0.1,<0.2')" in str(info.value)
    assert "install a jigs-harness-echo release built for contract 2.x" in str(info.value)


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
    assert 'write contract = "1.0"' in message
    assert "upgrade jigs-core" not in message  # an upgrade would not help


def test_a_kind_whose_distribution_lacks_the_entry_point_is_told_to_declare_it():
    from jigs.errors import HarnessNotFoundError

    # jigs-harness-echo is installed here: as if its entry point were missing
    message = str(HarnessNotFoundError("echo", []))
    assert "jigs-harness-echo is installed but declares no entry point 'echo'" in message
    assert 'echo = "jigs_harness_echo.plugin"' in message
    assert "pip install jigs-harness-nope" in str(HarnessNotFoundError("nope", []))
