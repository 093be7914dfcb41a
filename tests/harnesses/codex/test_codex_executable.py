"""The runtime wheel's codex binary is found without importlib.metadata, with the same answer."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest
from jigs_harness_codex import _executable
from jigs_harness_codex._executable import RUNTIME_WHEEL, wheel_binary


def _standard() -> Path | None:
    for file in importlib.metadata.files(RUNTIME_WHEEL) or ():
        if file.as_posix() in ("codex_cli_bin/bin/codex", "codex_cli_bin/bin/codex.exe"):
            return Path(str(file.locate())).resolve()
    return None


def test_the_fast_lookup_gives_the_installed_file_lists_answer() -> None:
    expected = _standard()
    assert expected is not None, "jigs-harness-codex depends on the openai-codex-cli-bin wheel"
    assert _executable._wheel_binary_by_spec() == expected
    assert wheel_binary() == expected


def _stray(site: Path, *, metadata: bool) -> Path:
    binary = site / "codex_cli_bin" / "bin" / "codex"
    binary.parent.mkdir(parents=True)
    (site / "codex_cli_bin" / "__init__.py").write_text("")
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    if metadata:
        info = site / "openai_codex_cli_bin-9.9.9.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {RUNTIME_WHEEL}\n")
        (info / "RECORD").write_text("codex_cli_bin/bin/codex,,\n")
    return binary


def test_a_package_folder_without_the_wheels_metadata_is_not_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``codex_cli_bin`` folder ahead on sys.path (a worktree, a stray copy) that is not the
    installed wheel: the lookup falls back to the installed file list."""
    _stray(tmp_path, metadata=False)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    assert _executable._wheel_binary_by_spec() is None
    assert wheel_binary() == _standard()


def test_a_wheel_installed_ahead_on_sys_path_wins_as_importlib_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = _stray(tmp_path, metadata=True)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    assert wheel_binary() == binary.resolve() == _standard()


def test_no_wheel_anywhere_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_executable, "_WHEEL_PACKAGE", "no_such_codex_package_here")
    monkeypatch.setattr(_executable, "RUNTIME_WHEEL", "no-such-codex-wheel-here")
    assert wheel_binary() is None
