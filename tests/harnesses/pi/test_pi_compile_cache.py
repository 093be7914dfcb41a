"""Pi's compile cache: made once by the worker, shown read-only to a sandboxed step."""

import os

import pytest
from jigs_harness_pi._compile_cache import compile_cache
from jigs_harness_pi._executable import resolve_pi
from structlog.testing import capture_logs

pytestmark = pytest.mark.anyio


class _Log:
    def info(self, *args, **kwargs):
        return None

    def warning(self, event, **kwargs):
        raise AssertionError(f"{event}: {kwargs}")


async def test_the_cache_is_made_once_per_pi_build_and_reused(pi_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("JIGS_DATA_DIR", str(tmp_path / "data"))
    pi = resolve_pi(os.environ)
    first = await compile_cache(pi, os.environ, _Log())
    assert first is not None
    assert first.is_dir()
    assert any(first.rglob("*"))  # node wrote its cache there
    made = first.stat().st_mtime_ns
    again = await compile_cache(pi, os.environ, _Log())
    assert again == first
    assert first.stat().st_mtime_ns == made  # not made again
    assert not list(first.parent.glob("*.building-*"))


async def test_a_cache_that_cannot_be_made_is_logged_and_skipped(tmp_path, monkeypatch):
    from jigs_harness_pi._executable import PiExecutable

    monkeypatch.setenv("JIGS_CLI_DIR", str(tmp_path / "data" / "clis"))
    broken = PiExecutable(tmp_path / "nope", "test", ("/bin/false", str(tmp_path / "nope.js")))

    class Log:
        def __init__(self) -> None:
            self.seen: list[str] = []

        def info(self, *args, **kwargs):
            return None

        def warning(self, event, **kwargs):
            self.seen.append(event)

    log = Log()
    with capture_logs():
        assert await compile_cache(broken, os.environ, log) is None
    assert log.seen == ["pi.compile_cache.failed"]
    assert list((tmp_path / "data" / "caches" / "node-compile").iterdir()) == []  # no leftover
