"""jigs.executables.build_key: what a kind keeps per build of its CLI is named by that build."""

import os

import pytest
from jigs.executables import build_key


def test_another_build_or_format_gets_another_name_and_the_same_keeps_its_own(tmp_path):
    cli = tmp_path / "cli"
    cli.write_text("v1")
    first = build_key(cli, "seed-1")
    assert build_key(cli, "seed-1") == first
    assert build_key(cli, "seed-2") != first  # a new format of what is kept
    link = tmp_path / "link"
    link.symlink_to(cli)
    assert build_key(link, "seed-1") == first  # named by the real file
    cli.write_text("v2, longer")
    second = build_key(cli, "seed-1")
    assert second != first  # another build (its size)
    stat = cli.stat()
    os.utime(cli, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert build_key(cli, "seed-1") != second  # rebuilt in place, same size


def test_a_missing_executable_is_an_oserror(tmp_path):
    with pytest.raises(OSError):
        build_key(tmp_path / "nope")
