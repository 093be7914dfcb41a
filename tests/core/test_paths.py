"""Where jigs' data directory is: ``$JIGS_DATA_DIR``, else the user data dir platformdirs names,
and a clear error when there is no home to find that in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import platformdirs
import pytest
from jigs.errors import InvalidInputError
from jigs.policy import _paths
from jigs_testing._environ import patched_environ


def test_the_data_dir_is_where_platformdirs_puts_it(tmp_path: Path) -> None:
    with patched_environ({"HOME": str(tmp_path), "XDG_DATA_HOME": None, "JIGS_DATA_DIR": None}):
        expected = platformdirs.user_data_path("jigs", appauthor=False)
        assert _paths.data_dir() == expected
    assert expected.is_dir()


@pytest.mark.skipif(sys.platform != "linux", reason="the XDG rule is Linux's")
@pytest.mark.parametrize("xdg", [False, True], ids=["home", "xdg-data-home"])
def test_on_linux_it_follows_xdg_data_home_then_the_home(xdg: bool, tmp_path: Path) -> None:
    """Checked in a fresh process: what a user's first step finds."""
    env = {k: v for k, v in os.environ.items() if k not in ("JIGS_DATA_DIR", "XDG_DATA_HOME")}
    env["HOME"] = str(tmp_path)
    expected = tmp_path / ".local" / "share" / "jigs"
    if xdg:
        env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
        expected = tmp_path / "xdg" / "jigs"
    code = "from jigs.policy._paths import data_dir; print(data_dir())"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert Path(done.stdout.strip()) == expected
    assert expected.is_dir()


@pytest.mark.skipif(sys.platform != "linux", reason="the user database is POSIX's")
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
