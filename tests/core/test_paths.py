"""Where jigs' data directory is: the same place platformdirs names, without importing it on
Linux (a cold step's start pays for every import; see ``jigs._paths``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import platformdirs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jigs import _paths
from jigs.errors import InvalidInputError
from jigs_testing._environ import patched_environ

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the XDG rule is Linux's")

#: Values HOME and XDG_DATA_HOME take in the wild and at the edges (None: unset).
_VALUES = st.one_of(
    st.none(),
    st.sampled_from(["", "/", "//", "/home/u", "/home/u/", "relative", "./x", "~", "~/x"]),
    st.text(alphabet=st.characters(blacklist_characters="\x00", codec="utf-8"), max_size=12),
    st.builds(lambda s: "/" + s, st.text(alphabet="ab/._- ", max_size=10)),
)


def _platformdirs_answer() -> Path | type[BaseException]:
    try:
        return platformdirs.user_data_path("jigs", appauthor=False)
    except RuntimeError:
        return RuntimeError


def _jigs_answer() -> Path | type[BaseException]:
    try:
        return Path(_paths._xdg_data_home(), "jigs")
    except InvalidInputError:
        return RuntimeError


@settings(max_examples=300, deadline=None)
@given(home=_VALUES, xdg=_VALUES)
def test_the_data_home_is_where_platformdirs_puts_it(home: str | None, xdg: str | None) -> None:
    with patched_environ({"HOME": home, "XDG_DATA_HOME": xdg, "JIGS_DATA_DIR": None}):
        assert _jigs_answer() == _platformdirs_answer()


@pytest.mark.parametrize("home", ["", "relative", None])
def test_no_home_anywhere_is_a_clear_error_naming_the_fix(home: str | None) -> None:
    """A relative (or unset) HOME and no user-database entry: jigs refuses with what to set,
    where platformdirs raises a bare RuntimeError."""
    with (
        patched_environ({"HOME": home, "XDG_DATA_HOME": None, "JIGS_DATA_DIR": None}),
        mock.patch("pwd.getpwuid", side_effect=KeyError("no such uid")),
    ):
        with pytest.raises(RuntimeError):
            platformdirs.user_data_path("jigs", appauthor=False)
        with pytest.raises(InvalidInputError, match="JIGS_DATA_DIR") as caught:
            _paths.data_dir()
    assert caught.value.argument == "JIGS_DATA_DIR"


def test_jigs_data_dir_wins_and_is_created(tmp_path: Path) -> None:
    target = tmp_path / "state" / "jigs"
    with patched_environ({"JIGS_DATA_DIR": str(target), "XDG_DATA_HOME": str(tmp_path / "xdg")}):
        assert _paths.data_dir() == target
    assert target.is_dir()
    assert not (tmp_path / "xdg").exists()


def test_finding_the_data_dir_imports_no_platformdirs(tmp_path: Path) -> None:
    """The point of the Linux rule: a fresh process that finds (and creates) the data dir has
    not imported platformdirs."""
    code = (
        "import sys; from jigs._paths import data_dir; print(data_dir()); "
        "print('platformdirs' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("JIGS_DATA_DIR", "XDG_DATA_HOME")}
    env["HOME"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    where, imported = done.stdout.split()
    assert Path(where) == tmp_path / ".local" / "share" / "jigs"
    assert Path(where).is_dir()
    assert imported == "False"
