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


async def test_the_cache_holds_everything_a_turn_compiles(pi_cli, tmp_path, monkeypatch):
    # a real turn given a writable copy of the cache adds nothing to it: each entry a turn
    # needs is there (a cache made by `pi --version` alone lacked the agent loop, tools and
    # providers, which every sandboxed turn then compiled afresh)
    import shutil

    import anyio
    from jigs import harnesses
    from jigs_harness_pi._home import PiHome, model_flag
    from jigs_testing import ModelServer, text

    monkeypatch.setenv("JIGS_DATA_DIR", str(tmp_path / "data"))
    pi = resolve_pi(os.environ)
    cache = await compile_cache(pi, os.environ, _Log())
    assert cache is not None
    copy = tmp_path / "copy"
    shutil.copytree(cache, copy)
    before = sorted(p.relative_to(copy) for p in copy.rglob("*"))
    async with ModelServer() as server:
        server.add(text("cached"))
        source = {"type": "openai-compatible", "name": "local", "model": "m"}
        source |= {"base_url": server.openai_base_url, "api_key_env": "PI_TEST_KEY"}
        descriptor = harnesses.pi(model=source)
        home = PiHome(descriptor)
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PI_TEST_KEY": "k"}
        env |= {"NODE_COMPILE_CACHE": str(copy), "PI_CODING_AGENT_DIR": str(home.path)}
        argv = [*pi.argv, "--mode", "json", "--model", model_flag(descriptor), "--no-session"]
        argv += ["-ne", "-ns", "-np", "--no-themes", "-na", "--no-mcp", "-nc", "--", "hi"]
        with anyio.fail_after(60):
            done = await anyio.run_process(argv, env=env, cwd=tmp_path, check=False)
        home.remove()
    assert b"cached" in done.stdout, done.stderr[-2000:]
    assert sorted(p.relative_to(copy) for p in copy.rglob("*")) == before
