"""The files and directories a step makes: written whole or not at all, private directories,
an anonymous file for a CLI's stderr."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest
from jigs.policy import _files


def test_write_atomic_replaces_the_file_whole_and_private(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "state.json"
    _files.write_atomic(target, b"first")
    _files.write_atomic(target, b"second", durable=False)
    assert target.read_bytes() == b"second"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in target.parent.iterdir()] == ["state.json"]  # no temporary left


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


def test_make_dir_in_a_missing_parent_raises(tmp_path: Path) -> None:
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
