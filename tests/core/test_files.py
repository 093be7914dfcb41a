"""``jigs._files``' stand-ins for tempfile and shutil.which give the stdlib's answers (they exist
so a cold step's CLI starts without those imports)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jigs import _files
from jigs.executables import which

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the stand-ins are POSIX's")

#: What one PATH directory holds under the looked-for name.
_ENTRIES = ("exec", "plain", "dir", "link-to-exec", "broken-link", "nothing")


def _layout(root: Path, entries: list[str]) -> list[str]:
    """One directory per entry under ``root``, each holding ``tool`` as that entry says."""
    target = root / "real-tool"
    target.write_text("#!/bin/sh\n")
    target.chmod(0o755)
    dirs = []
    for number, entry in enumerate(entries):
        directory = root / f"d{number}"
        directory.mkdir()
        tool = directory / "tool"
        if entry == "exec":
            tool.write_text("#!/bin/sh\n")
            tool.chmod(0o755)
        elif entry == "plain":
            tool.write_text("data\n")
            tool.chmod(0o644)
        elif entry == "dir":
            tool.mkdir()
            tool.chmod(0o755)
        elif entry == "link-to-exec":
            tool.symlink_to(target)
        elif entry == "broken-link":
            tool.symlink_to(root / "missing")
        dirs.append(str(directory))
    return dirs


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    entries=st.lists(st.sampled_from(_ENTRIES), max_size=5),
    order=st.lists(st.integers(min_value=0, max_value=7), max_size=8),
    name=st.sampled_from(["tool", "./tool", "d0/tool", "missing", "ABS"]),
)
def test_which_finds_what_shutil_which_finds(
    tmp_path_factory: pytest.TempPathFactory, entries: list[str], order: list[int], name: str
) -> None:
    root = tmp_path_factory.mktemp("which")
    dirs = _layout(root, entries)
    # PATH entries: the directories in any order, repeated, plus an empty entry, a missing dir
    pool = [*dirs, "", str(root / "no-such-dir")]
    path = os.pathsep.join(pool[i % len(pool)] for i in order)
    if name == "ABS":
        name = str(root / "real-tool")
    cwd = os.getcwd()
    os.chdir(root)  # a relative name and the empty PATH entry are looked up here
    try:
        assert which(name, path=path) == shutil.which(name, path=path)
    finally:
        os.chdir(cwd)


def test_which_without_a_path_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert which("sh") == shutil.which("sh")
    monkeypatch.delenv("PATH")
    assert which("sh") == shutil.which("sh")  # the system's default path
    assert which("sh", path="") is None


_COMPARE = """
import os, sys
from jigs import _files
ours = _files.temp_dir()
assert "tempfile" not in sys.modules, "temp_dir imported tempfile"
import tempfile
print(ours == tempfile.gettempdir(), ours)
"""


@pytest.mark.parametrize("tmpdir", ["unset", "a-dir", "missing", "a-file", "relative", "empty"])
def test_the_temp_dir_is_the_one_tempfile_names(tmp_path: Path, tmpdir: str) -> None:
    """In a fresh process (tempfile not loaded): the same directory ``tempfile.gettempdir``
    picks, for TMPDIR set to each kind of value, without importing tempfile."""
    env = {k: v for k, v in os.environ.items() if k not in ("TMPDIR", "TEMP", "TMP")}
    place = tmp_path / "place"
    place.mkdir()
    if tmpdir == "a-dir":
        env["TMPDIR"] = str(place)
    elif tmpdir == "missing":
        env["TMPDIR"] = str(tmp_path / "missing")
    elif tmpdir == "a-file":
        (tmp_path / "file").write_text("")
        env["TMPDIR"] = str(tmp_path / "file")
    elif tmpdir == "relative":
        env["TMPDIR"] = "place"
    elif tmpdir == "empty":
        env["TMPDIR"] = ""
    done = subprocess.run(
        [sys.executable, "-c", _COMPARE],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    same, where = done.stdout.split()
    assert same == "True", where


def test_the_temp_dir_defers_to_tempfile_once_it_is_loaded(tmp_path: Path) -> None:
    """An application that set ``tempfile.tempdir`` gets that directory."""
    saved = tempfile.tempdir
    tempfile.tempdir = str(tmp_path)
    try:
        assert _files.temp_dir() == str(tmp_path)
        made = _files.make_dir("jigs-test-")
        assert made.parent == tmp_path
    finally:
        tempfile.tempdir = saved


def test_make_dir_makes_a_private_fresh_directory(tmp_path: Path) -> None:
    first = _files.make_dir("jigs-x-", tmp_path)
    second = _files.make_dir("jigs-x-", tmp_path)
    assert first != second
    for made in (first, second):
        assert made.parent == tmp_path
        assert made.name.startswith("jigs-x-")
        assert made.is_dir()
        assert list(made.iterdir()) == []
        assert stat.S_IMODE(made.stat().st_mode) == 0o700


def test_make_dir_retries_a_name_that_is_taken(tmp_path: Path) -> None:
    taken = tmp_path / ("jigs-y-" + "00" * 6)
    taken.mkdir()
    with mock.patch("os.urandom", side_effect=[b"\x00" * 6, b"\x01" * 6]):
        made = _files.make_dir("jigs-y-", tmp_path)
    assert made == tmp_path / ("jigs-y-" + "01" * 6)


def test_make_dir_in_a_missing_parent_raises_as_mkdtemp_does(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        tempfile.mkdtemp(dir=tmp_path / "missing")
    with pytest.raises(FileNotFoundError):
        _files.make_dir("jigs-z-", tmp_path / "missing")


def test_an_anonymous_file_has_no_name_and_keeps_what_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with _files.anonymous_file("jigs-stderr-") as fh:
        assert list(tmp_path.iterdir()) == []  # nothing named in the directory
        fh.write(b"line one\nline two\n")
        fh.flush()
        os.write(fh.fileno(), b"from a child\n")  # as a process writing its stderr there
        fh.seek(0)
        assert fh.read() == b"line one\nline two\nfrom a child\n"
        assert stat.S_IMODE(os.fstat(fh.fileno()).st_mode) == 0o600


def test_an_anonymous_file_falls_back_to_tempfile_where_o_tmpfile_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filesystem without O_TMPFILE: tempfile's own way (a name, unlinked at once)."""
    real_open = os.open

    def no_tmpfile(path: object, flags: int, *args: object) -> int:
        if flags & getattr(os, "O_TMPFILE", 0) == getattr(os, "O_TMPFILE", -1):
            raise OSError(95, "Operation not supported")
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(os, "open", no_tmpfile)
    monkeypatch.setattr(tempfile, "_O_TMPFILE_WORKS", False, raising=False)
    with _files.anonymous_file("jigs-stderr-") as fh:
        fh.write(b"kept")
        fh.seek(0)
        assert fh.read() == b"kept"
        assert list(tmp_path.iterdir()) == []


def test_make_dir_leaves_a_temp_dir_that_refuses_it_to_mkdtemp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A $TMPDIR this user may write to but that refuses new entries (full, out of inodes, a
    security module): temp_dir() only asked for permission, so make_dir() hands over to
    tempfile.mkdtemp, which probes it, skips it and uses the next temp dir, as before."""
    full = tmp_path / "full"
    full.mkdir()
    refused = OSError(28, "No space left on device")
    real_mkdir, real_open = os.mkdir, os.open

    def mkdir(path: object, *args: object, **kwargs: object) -> None:
        if str(path).startswith(str(full)):
            raise refused
        real_mkdir(path, *args, **kwargs)  # type: ignore[arg-type]

    def open_(path: object, *args: object, **kwargs: object) -> int:
        if str(path).startswith(str(full)):
            raise refused
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setenv("TMPDIR", str(full))
    monkeypatch.delitem(sys.modules, "tempfile")  # as in a step: tempfile not loaded yet
    monkeypatch.setattr(os, "mkdir", mkdir)
    monkeypatch.setattr(os, "open", open_)
    made = _files.make_dir("jigs-full-")
    try:
        assert made.is_dir()
        assert full not in made.parents
        assert stat.S_IMODE(made.stat().st_mode) == 0o700
    finally:
        made.rmdir()
    with pytest.raises(OSError, match="No space"):  # a parent the caller named: its error
        _files.make_dir("jigs-full-", full)
