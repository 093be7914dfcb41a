"""``jigs.plugin.artifacts_under``, the helper kinds use for ``Harness.session_artifacts``:
both directions, names from a store that must never leave the root, and a long-lived worker
that looks up a new session id every step without keeping anything per id."""

from __future__ import annotations

import gc
import glob
import tracemalloc
import uuid
from pathlib import Path

import pytest
from jigs.plugin import artifacts_under


def _pattern(session_id: str) -> str:
    return f"rollout-*-{glob.escape(session_id)}.jsonl"  # as the codex kind names a thread


def test_finds_the_sessions_files_at_any_depth_and_skips_links_and_others(tmp_path: Path) -> None:
    ours = tmp_path / "2026" / "12" / "rollout-1-abc.jsonl"
    ours.parent.mkdir(parents=True)
    ours.write_text("{}")
    (tmp_path / "rollout-2-abd.jsonl").write_text("{}")  # another session
    (tmp_path / "rollout-3-abc.jsonl.bak").write_text("{}")
    (tmp_path / "rollout-4-abc.jsonl").symlink_to(ours)
    (tmp_path / "dir-rollout-5-abc.jsonl").mkdir()
    (tmp_path / "rollout-5-abc.jsonl").mkdir()  # a directory of the right name

    found = artifacts_under(tmp_path, _pattern("abc"))

    assert found == {"2026/12/rollout-1-abc.jsonl": ours}
    assert artifacts_under(tmp_path / "missing", _pattern("abc")) == {}


def test_a_glob_character_in_a_session_id_is_literal(tmp_path: Path) -> None:
    (tmp_path / "rollout-1-a[b].jsonl").write_text("{}")
    (tmp_path / "rollout-1-ab.jsonl").write_text("{}")
    assert list(artifacts_under(tmp_path, _pattern("a[b]"))) == ["rollout-1-a[b].jsonl"]


def test_names_from_a_store_are_placed_under_the_root(tmp_path: Path) -> None:
    names = ["2026/12/rollout-1-abc.jsonl", "rollout-2-abc.jsonl"]
    placed = artifacts_under(tmp_path, _pattern("abc"), names)
    assert placed == {name: tmp_path / name for name in names}


@pytest.mark.parametrize(
    "name",
    [
        "/etc/rollout-1-abc.jsonl",
        "../rollout-1-abc.jsonl",
        "a/../../rollout-1-abc.jsonl",
        "a\\rollout-1-abc.jsonl",
        "a//rollout-1-abc.jsonl",
        "rollout-1-abc.jsonl\n",
        "rollout-1-abd.jsonl",
        "",
    ],
)
def test_a_name_that_could_leave_the_root_or_is_not_the_sessions_is_refused(
    tmp_path: Path, name: str
) -> None:
    with pytest.raises(ValueError, match="is not a session artifact name"):
        artifacts_under(tmp_path, _pattern("abc"), [name])


def test_looking_up_a_new_session_every_step_keeps_nothing_per_session(tmp_path: Path) -> None:
    """A worker runs for months; each step looks up its session's files by a pattern naming
    its id, in both directions. Compiled patterns must not pile up per id (fnmatch's cache
    alone keeps 32,768 of them, ~1 KiB each)."""
    (tmp_path / "sub").mkdir()

    def lookups(count: int) -> None:
        for _ in range(count):
            pattern = _pattern(str(uuid.uuid4()))
            artifacts_under(tmp_path, pattern)
            with pytest.raises(ValueError):
                artifacts_under(tmp_path, pattern, ["rollout-1-other.jsonl"])

    tracemalloc.start()  # before the warm-up, so what a bounded cache drops counts too
    try:
        lookups(600)  # past the bounded caches' sizes (re keeps 512)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        lookups(1500)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 150 * 1024, f"{grown / 1024:.0f} KiB kept after 1,500 new session ids"
