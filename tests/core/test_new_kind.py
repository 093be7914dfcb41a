"""``jigs new-kind NAME``: the files it writes, and its refusals. (That the generated package
passes the conformance kit in a fresh venv is tests/release/test_release.py.)"""

import ast
import subprocess
import sys
import tomllib

import pytest
from jigs.cli._new_kind import new_kind, render
from jigs.errors import InvalidInputError
from jigs.plugin import CONTRACT_VERSION


def jigs(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "jigs.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
    )


def test_new_kind_writes_a_distribution_with_entry_point_bound_and_contract(tmp_path):
    result = jigs("new-kind", "my_kind-2", "--dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    root = tmp_path / "jigs-harness-my-kind-2"
    assert str(root) in result.stdout
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert project["name"] == "jigs-harness-my-kind-2"
    assert project["entry-points"]["jigs.harnesses"] == {
        "my_kind-2": "jigs_harness_my_kind_2.plugin"
    }
    assert project["dependencies"] == ["jigs-core>=0.1,<0.2"]
    package = root / "src" / "jigs_harness_my_kind_2"
    assert (package / "py.typed").exists()
    harness = (package / "_harness.py").read_text()
    assert f'contract: ClassVar[str | None] = "{CONTRACT_VERSION}"' in harness
    assert 'kind: Literal["my_kind-2"] = "my_kind-2"' in harness
    assert "class MyKind2Harness(Harness[MyKind2Descriptor])" in harness
    assert 'check_harness("my_kind-2"' in (root / "tests" / "test_conformance.py").read_text()
    assert "jigs new-kind my_kind-2" in (root / "README.md").read_text()
    for path in root.rglob("*.py"):
        ast.parse(path.read_text(), filename=str(path))  # every file is valid Python
    assert not any(
        "__" + word + "__" in path.read_text()
        for path in root.rglob("*")
        if path.is_file()
        for word in ("KIND", "MODULE", "CLASS", "DIST", "CONTRACT", "DISPLAY")
    )


@pytest.mark.parametrize(
    "name",
    [
        "",
        "My",
        "1kind",
        "-kind",
        "kind-",
        "kind_",
        "a b",
        "kind/../x",
        "k" * 41,
        "ünï",
        "x\nprint(1)",
    ],
)
def test_a_bad_name_is_refused_and_writes_nothing(tmp_path, name):
    with pytest.raises(InvalidInputError) as info:
        new_kind(name, tmp_path)
    assert info.value.argument == "NAME"
    assert "is not a harness kind name" in str(info.value)
    assert "\n" not in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_the_command_exits_2_for_a_bad_name_or_a_used_directory(tmp_path):
    bad = jigs("new-kind", "Bad", "--dir", str(tmp_path))
    assert bad.returncode == 2
    assert "'Bad' is not a harness kind name" in bad.stderr
    assert jigs("new-kind", "ok", "--dir", str(tmp_path)).returncode == 0
    again = jigs("new-kind", "ok", "--dir", str(tmp_path))
    assert again.returncode == 2
    assert "already exists and is not empty" in again.stderr


def test_an_empty_target_directory_is_used(tmp_path):
    (tmp_path / "jigs-harness-ok").mkdir()
    assert new_kind("ok", tmp_path) == tmp_path / "jigs-harness-ok"
    assert (tmp_path / "jigs-harness-ok" / "pyproject.toml").is_file()


def test_single_letter_and_longest_names_render():
    assert "src/jigs_harness_x/_harness.py" in render("x")
    assert render("k" * 40)


def test_a_name_an_installed_kind_uses_is_generated_with_a_warning(tmp_path):
    result = jigs("new-kind", "echo", "--dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "jigs-harness-echo already provides the kind 'echo'" in result.stderr
    assert (tmp_path / "jigs-harness-echo" / "pyproject.toml").is_file()
    quiet = jigs("new-kind", "nosuchkind", "--dir", str(tmp_path))
    assert quiet.stderr == ""
