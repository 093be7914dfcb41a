"""Plugin discovery through real entry points: extra distributions are laid out as dist-info
folders on PYTHONPATH of a child interpreter, exactly as pip would install them."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


def make_dist(site: Path, dist: str, kind: str, module: str, source: str) -> None:
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[jigs.harnesses]\n{kind} = {module}\n")
    (site / f"{module}.py").write_text(textwrap.dedent(source))


GOOD = """
    from typing import Literal
    from jigs.descriptors import HarnessDescriptor
    from jigs.plugin import Harness, hookimpl

    class D(HarnessDescriptor):
        kind: Literal["KIND"] = "KIND"

    class H(Harness):
        kind = "KIND"
        contract = "2.0"
        display_name = "KIND"
        descriptor_type = D

        def resolve_executable(self, env):
            raise NotImplementedError

        def launch_turn(self, turn, ctx, state):
            raise NotImplementedError

        def decoder(self, turn):
            raise NotImplementedError

    @hookimpl
    def jigs_register_harnesses(register):
        register(H())
"""


def jigs_cli(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = os.environ | {"PYTHONPATH": str(site)} | env
    return subprocess.run(
        [sys.executable, "-m", "jigs.cli", *args],
        capture_output=True,
        text=True,
        env=environ,
        check=False,
    )


@pytest.fixture
def site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    make_dist(site, "jigs-harness-alpha", "alpha", "alpha_plugin", GOOD.replace("KIND", "alpha"))
    make_dist(site, "jigs-harness-broken", "broken", "broken_plugin", "raise ImportError('boom')\n")
    return site


def listed(site: Path, **env: str) -> dict[str, dict[str, object]]:
    result = jigs_cli(site, "harnesses", "--json", **env)
    assert result.returncode == 0, result.stderr
    return {row["kind"]: row for row in json.loads(result.stdout)}


def test_a_broken_plugin_does_not_break_the_others(site):
    rows = listed(site)
    assert rows["alpha"]["error"] is None
    assert rows["alpha"]["distribution"] == "jigs-harness-alpha"
    assert rows["echo"]["error"] is None
    error = rows["broken"]["error"]
    assert isinstance(error, str)
    assert "jigs-harness-broken" in error
    assert "broken = broken_plugin" in error
    assert "ImportError: boom" in error


def test_using_a_broken_kind_names_the_failure(site):
    code = (
        "from jigs import harnesses\n"
        "try:\n    harnesses.broken()\n"
        "except LookupError as e:\n    print(type(e).__name__, e)\n"
        "print(harnesses.alpha().describe())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ | {"PYTHONPATH": str(site)},
    ).stdout
    assert out.startswith("HarnessNotFoundError the 'broken' harness is installed but its plugin")
    assert '{"kind":"alpha"}' in out


def test_the_same_kind_from_two_distributions_is_refused(site):
    make_dist(site, "jigs-harness-alpha2", "alpha", "alpha2_plugin", GOOD.replace("KIND", "alpha"))
    error = listed(site)["alpha"]["error"]
    assert isinstance(error, str)
    assert "more than one distribution" in error
    assert "jigs-harness-alpha" in error
    assert "jigs-harness-alpha2" in error


def test_a_plugin_registering_the_wrong_kind_is_refused(site):
    make_dist(site, "jigs-harness-liar", "liar", "liar_plugin", GOOD.replace("KIND", "other"))
    error = listed(site)["liar"]["error"]
    assert isinstance(error, str)
    assert "must register exactly one Harness with kind 'liar'" in error


def test_jigs_disable_plugins_blocks_named_kinds(site):
    rows = listed(site, JIGS_DISABLE_PLUGINS="alpha, broken")
    assert rows["alpha"]["disabled"] is True
    assert rows["broken"]["disabled"] is True
    assert "JIGS_DISABLE_PLUGINS" in str(rows["alpha"]["error"])
    assert rows["echo"]["error"] is None


def test_resolving_one_kind_loads_only_that_plugin(site):
    code = (
        "import sys\nfrom jigs import harnesses\nharnesses.alpha()\n"
        "print('broken_plugin' in sys.modules, 'jigs_harness_echo' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ | {"PYTHONPATH": str(site)},
    ).stdout
    assert out.split() == ["False", "False"]


TWO_KINDS = """
    from typing import Literal
    from jigs.descriptors import HarnessDescriptor
    from jigs.plugin import Harness, hookimpl

    def make(name):
        class D(HarnessDescriptor):
            kind: Literal[name] = name

        class H(Harness):
            kind = name
            contract = "2.0"
            display_name = name
            descriptor_type = D

            def resolve_executable(self, env):
                raise NotImplementedError

            def launch_turn(self, turn, ctx, state):
                raise NotImplementedError

            def decoder(self, turn):
                raise NotImplementedError

        return H()

    @hookimpl
    def jigs_register_harnesses(register):
        register(make("one"))
        register(make("two"))
"""


def test_one_plugin_module_can_serve_two_kinds(site):
    make_dist(site, "jigs-harness-pair", "one", "pair_plugin", TWO_KINDS)
    info = site / "jigs_harness_pair-0.1.dist-info" / "entry_points.txt"
    info.write_text("[jigs.harnesses]\none = pair_plugin\ntwo = pair_plugin\n")
    rows = listed(site)
    assert rows["one"]["error"] is None
    assert rows["two"]["error"] is None


def test_a_wheel_folder_is_trusted_while_its_dist_info_is_there(tmp_path, monkeypatch):
    """wheel_package_dir reads a site dir's listing once per change of it: a removed
    distribution (its .dist-info gone) is seen at the next lookup, a reinstalled one too."""
    import importlib

    from jigs.executables import wheel_package_dir

    site = tmp_path / "site"
    (site / "jigs_probe_pkg").mkdir(parents=True)
    (site / "jigs_probe_pkg" / "__init__.py").write_text("")
    info = site / "jigs_probe_dist-1.0.dist-info"
    info.mkdir()
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    assert wheel_package_dir("jigs_probe_pkg", "jigs-probe-dist") == site / "jigs_probe_pkg"
    assert wheel_package_dir("jigs_probe_pkg", "jigs-probe-dist") == site / "jigs_probe_pkg"
    assert wheel_package_dir("jigs_probe_pkg", "another-dist") is None
    info.rmdir()
    assert wheel_package_dir("jigs_probe_pkg", "jigs-probe-dist") is None
    (site / "jigs_probe_dist-1.1.dist-info").mkdir()
    assert wheel_package_dir("jigs_probe_pkg", "jigs-probe-dist") == site / "jigs_probe_pkg"


def test_a_test_kind_resolves_but_is_listed_only_when_asked(tmp_path: Path):
    """jigs' echo kind is declared in ``jigs.test_kinds`` too (tests/plugins/echo): users' listings
    (jigs harnesses, --version, and the kinds doctor and demo take by default) leave it out; it
    still resolves by name; ``JIGS_SHOW_TEST_KINDS=1`` (tests/conftest.py sets it) lists it."""
    hidden = {**os.environ, "JIGS_SHOW_TEST_KINDS": ""}
    shown = {**os.environ, "JIGS_SHOW_TEST_KINDS": "1"}
    code = (
        "import json\n"
        "from jigs.registry._registry import Registry\n"
        "r = Registry()\n"
        "print(json.dumps([r.kinds(), r.enabled_kinds(), [i.kind for i in r.all_info()],"
        " r.get('echo').kind]))\n"
    )
    for env, listed_echo in ((hidden, False), (shown, True)):
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        kinds, enabled, infos, resolved = json.loads(done.stdout)
        assert resolved == "echo"
        assert "claude" in kinds
        for listing in (kinds, enabled, infos):
            assert ("echo" in listing) is listed_echo, listing
        for args in (["harnesses"], ["--version"]):
            out = subprocess.run(
                [sys.executable, "-m", "jigs.cli", *args],
                capture_output=True,
                text=True,
                env=env,
                check=False,
            ).stdout
            assert "claude" in out
            assert ("jigs-harness-echo" in out) is listed_echo, out


def test_every_group_is_read_afresh_through_importlib_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One reader for every jigs group: the first distribution of a name on ``sys.path`` wins
    (a shadowed copy further down is not listed), and a distribution installed after a first
    look is found by the next one (nothing is cached across looks)."""
    from jigs.registry._registry import distribution_of, entry_points

    first, second = tmp_path / "a", tmp_path / "b"
    monkeypatch.setattr(sys, "path", [str(first), str(second), *sys.path])
    group = "jigs.session_stores"

    def install(site: Path, folder: str, name: str, text: str) -> None:
        info = site / folder
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(text)

    install(first, "My.Pkg-1.0.dist-info", "My.Pkg", f"[{group}]\none = mod.one:attr\n")
    install(second, "my_pkg-0.9.dist-info", "my-pkg", f"[{group}]\nshadowed = mod.old\n")

    def mine() -> list[tuple[str, str, str | None, str | None]]:
        found = [e for e in entry_points(group) if e.value.startswith(("mod.", "late."))]
        return sorted((e.name, e.value, *distribution_of(e)) for e in found)

    assert mine() == [("one", "mod.one:attr", "My.Pkg", "1.0")]
    install(second, "late_kind-2.0.dist-info", "late-kind", f"[{group}]\nlate = late.plugin\n")
    assert ("late", "late.plugin", "late-kind", "1.0") in mine()
