"""What a step's imports cost: ``import jigs.steps, jigs.models`` and resolving a kind stay free
of the heavy libraries, and jigs' lazy logger imports structlog only for an event someone hears.

Each check runs in a fresh interpreter (what was imported is a property of a process). These
are behaviour checks, not timings: a module that comes back here is what costs tens of ms.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

#: Libraries a step's import path must not load (each costs tens of ms in a fresh process).
HEAVY = ("structlog", "pydantic", "pydantic_core", "httpx", "mcp", "anyio", "pluggy")


def _fresh(code: str, *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


def _loaded(code: str) -> set[str]:
    """Top-level packages in ``sys.modules`` after ``code`` ran in a fresh process."""
    report = "import json, sys\nprint(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    done = _fresh(textwrap.dedent(code) + "\n" + report)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_importing_steps_and_models_loads_no_heavy_library() -> None:
    loaded = _loaded("import jigs.steps, jigs.models, jigs.harnesses, jigs.errors")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


#: Modules resolving a kind and building its descriptor must not load: the engine, the events,
#: processes, pydantic (descriptors are msgspec records) and the libraries a step only needs once
#: it runs; nothing asks importlib.metadata either (see below).
NOT_ON_RESOLVE = (
    "pydantic",
    "pydantic_core",
    "importlib.metadata",
    "anyio",
    "httpx",
    "mcp",
    "structlog",
    "subprocess",
    "tomllib",
    "jigs._engine",
    "jigs._pipeline",
    "jigs.events",
    "jigs.processes",
    "jigs.models._types",
)

#: How each installed kind's descriptor is built (Pi needs a model source).
BUILD = {
    "claude": "harnesses.claude()",
    "codex": "harnesses.codex()",
    "echo": "harnesses.echo()",
    "pi": (
        "harnesses.pi(model={'type': 'openai-compatible', 'name': 'local', "
        "'base_url': 'http://127.0.0.1:1/v1', 'model': 'm', 'api_key_env': 'LOCAL_KEY'})"
    ),
}


@pytest.mark.parametrize("kind", sorted(BUILD))
def test_resolving_a_kind_and_building_its_descriptor_stays_light(kind: str) -> None:
    """What the step's first lines cost: the import, the kind's plugin, one descriptor. The
    descriptor is real (validated: a bad setting is still refused) and its harness is usable."""
    done = _fresh(
        f"""
        import json, sys, traceback

        class Who:
            \"\"\"Records which file imports importlib.metadata (finds nothing itself).\"\"\"
            importers = []

            def find_spec(self, name, path=None, target=None):
                if name == "importlib.metadata":
                    frames = [f.filename for f in traceback.extract_stack()[:-1]]
                    outside = [f for f in frames if "importlib" not in f and "<frozen" not in f]
                    self.importers.append(outside[-1])
                return None

        sys.meta_path.insert(0, Who())
        import jigs.steps, jigs.models
        from jigs import harnesses
        from jigs.errors import DescriptorError
        descriptor = {BUILD[kind]}
        harness = harnesses._registry().get({kind!r})
        assert isinstance(descriptor, harness.descriptor_type), descriptor
        assert descriptor.kind == {kind!r}
        assert descriptor.describe()
        try:
            harnesses.{kind}(no_such_setting=1)
        except DescriptorError:
            pass
        else:
            raise AssertionError("an unknown setting was accepted")
        print(json.dumps(Who.importers))
        print(json.dumps(sorted(m for m in {NOT_ON_RESOLVE!r} if m in sys.modules)))
        """
    )
    assert done.returncode == 0, done.stderr
    *_, importers, loaded = (json.loads(line) for line in done.stdout.strip().splitlines())
    assert loaded == [], f"resolving {kind} imported {loaded}"
    # nobody asks importlib.metadata (jigs reads entry_points.txt; pydantic is not loaded)
    assert importers == [], importers


_STEP = """
import asyncio, json, sys, tempfile
from jigs import RunMetadata, harnesses
from jigs.steps import run_agent

async def main():
    kwargs = {}
    if OUTPUT:
        from pydantic import BaseModel

        class Answer(BaseModel):
            answer: int

        kwargs["output"] = Answer
    worktree = tempfile.mkdtemp()
    if RUNNER:
        from jigs.models import generate_text
        from jigs.steps import create_agent_runner

        async with create_agent_runner(
            harnesses.echo(), cwd=worktree, run=RunMetadata(workflow_run_id="imports")
        ) as runner:
            answer = await generate_text(runner.model, prompt="hi", temperature=0)
            assert answer.text == "echo: hi (turn 1)", answer
            assert runner.session_from(answer) is not None
    result = await run_agent(
        harness=harnesses.echo(), cwd=worktree, prompt='json:{"answer":%2042}' if OUTPUT else "hi",
        run=RunMetadata(workflow_run_id="imports"), **kwargs
    )
    assert result.session is not None, result
    assert result.output.answer == 42 if OUTPUT else result.text == "echo: hi (turn 1)", result
    print(json.dumps(sorted(m for m in ("pydantic", "pydantic_core") if m in sys.modules)))

asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("output", "runner"),
    [(False, False), (False, True), (True, False)],
    ids=["run_agent", "runner-generate_text", "with-output"],
)
def test_a_whole_step_without_output_never_imports_pydantic(
    output: bool, runner: bool, tmp_path: Path
) -> None:
    """A cold step's inputs, events, usage, model requests and results are records: pydantic is
    imported only for an ``output=`` model (the with-output run shows the check sees an
    import). The runner variant also runs ``create_agent_runner`` + ``generate_text``."""
    import os

    env = {**os.environ, "HOME": str(tmp_path), "JIGS_DATA_DIR": str(tmp_path / "data")}
    code = _STEP.replace("OUTPUT", repr(output)).replace("RUNNER", repr(runner))
    done = _fresh(code, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded == (["pydantic", "pydantic_core"] if output else []), loaded


def test_a_kind_package_exports_its_names_on_first_access() -> None:
    """The harness packages' public names are imported on first access, and stay the same
    objects as in their modules."""
    done = _fresh(
        """
        import sys
        import jigs_harness_claude, jigs_harness_codex, jigs_harness_pi
        assert "jigs.events" not in sys.modules and "anyio" not in sys.modules
        for package in (jigs_harness_claude, jigs_harness_codex, jigs_harness_pi):
            for name in package.__all__:
                assert getattr(package, name) is not None, (package.__name__, name)
            assert set(package.__all__) <= set(dir(package))
            try:
                package.NoSuchName
            except AttributeError:
                pass
            else:
                raise AssertionError(package.__name__)
        from jigs_harness_codex._rpc import AppServerRpcError
        from jigs_harness_claude._events import ClaudeDecoder
        from jigs_harness_pi._executable import resolve_pi
        assert jigs_harness_codex.AppServerRpcError is AppServerRpcError
        assert jigs_harness_claude.ClaudeDecoder is ClaudeDecoder
        assert jigs_harness_pi.resolve_pi is resolve_pi
        assert jigs_harness_codex.__version__
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_lazy_names_still_resolve() -> None:
    import jigs.models
    import jigs.steps

    for name in jigs.models.__all__:
        assert getattr(jigs.models, name) is not None
    for name in jigs.steps.__all__:
        assert callable(getattr(jigs.steps, name))
    with pytest.raises(AttributeError):
        _ = jigs.models.NoSuchName  # type: ignore[attr-defined]
    assert set(jigs.models.__all__) <= set(dir(jigs.models))
    from jigs.models._types import Usage

    assert jigs.models.Usage is Usage
    result = jigs.steps.AgentResult(text="t", session=None, output=None)
    assert result.usage == Usage()


def test_agent_result_keeps_its_name_and_resolvable_type_hints() -> None:
    """Temporal's and DBOS' converters call get_type_hints on a dataclass result; pickles and
    stored results name the class jigs.steps.AgentResult."""
    done = _fresh(
        """
        import pickle, typing
        from jigs.steps import AgentResult
        from jigs._types import AgentSessionRef
        from jigs.models._types import Usage
        hints = typing.get_type_hints(AgentResult)
        assert hints["session"] == AgentSessionRef | None, hints
        assert hints["usage"] is Usage, hints
        assert AgentResult.__module__ == "jigs.steps"
        assert AgentResult.__qualname__ == "AgentResult"
        ref = AgentSessionRef(harness="echo", id="s-1", descriptor="{}")
        result = AgentResult(text="t", session=ref, output=None, usage=Usage(input_tokens=3))
        assert pickle.loads(pickle.dumps(result)) == result
        assert AgentResult[None] is not None
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_an_event_nobody_can_hear_does_not_import_structlog() -> None:
    loaded = _loaded(
        """
        import logging  # imported but not configured: INFO is below the root's WARNING
        from jigs._logging import logger, timed
        logger.bind(run_id="r").info("step.opened", kind="echo")
        logger.debug("step.detail")
        with timed("step.stage", logger.bind(kind="echo")):
            pass
        """
    )
    assert "structlog" not in loaded


def test_an_event_nobody_can_hear_skips_an_imported_but_unconfigured_structlog() -> None:
    """structlog imported (by another library, say) but never configured: its default chain
    only renders and hands the event to the stdlib logger, which drops INFO; so jigs drops it
    first. Once structlog is configured, the same event goes through its processors."""
    done = _fresh(
        """
        import structlog
        from jigs import _logging
        _logging.logger.bind(run_id="r").info("step.opened", kind="echo")
        print(len(_logging._real))
        seen = []
        def keep(logger, method, event_dict):
            seen.append(event_dict["event"])
            raise structlog.DropEvent
        structlog.configure(processors=[keep])
        _logging.logger.info("step.closed")
        print(seen)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "['step.closed']"]


@pytest.mark.parametrize("case", ["edited in place", "cached, then reset"])
def test_an_unconfigured_structlog_that_still_has_listeners_gets_every_event(case: str) -> None:
    """Two ways structlog reads as unconfigured while something listens: its default processor
    list edited in place (no ``configure()``), and a configuration whose chain jigs' logger
    cached (``cache_logger_on_first_use``) before ``reset_defaults()``. Both still see info."""
    if case == "edited in place":
        setup = 'structlog.get_config()["processors"].insert(0, keep)'
        after = ""
    else:
        setup = (
            "structlog.configure(processors=[keep, structlog.processors.KeyValueRenderer()],"
            " cache_logger_on_first_use=True)"
        )
        after = "structlog.reset_defaults()"
    done = _fresh(
        f"""
        import structlog
        from jigs import _logging
        seen = []
        def keep(logger, method, event_dict):
            seen.append(event_dict["event"])
            return event_dict
        {setup}
        _logging.logger.info("first")
        {after}
        _logging.logger.info("second")
        print(seen)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "['first', 'second']"


@pytest.mark.parametrize("structlog_first", [False, True])
def test_stdlib_logging_at_info_receives_jigs_events_through_structlog(
    structlog_first: bool,
) -> None:
    # structlog imported first and never configured: the same output
    first = "import structlog" if structlog_first else ""
    done = _fresh(
        f"""
        import logging, sys
        {first}
        logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(name)s|%(message)s")
        from jigs._logging import logger
        logger.bind(run_id="r-1").info("step.opened", kind="echo")
        print("structlog" in sys.modules)
        """
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "True"
    event = next(line for line in lines if "step.opened" in line)
    assert event.startswith("jigs|")
    assert "kind=echo" in event
    assert "run_id=r-1" in event


def test_a_warning_reaches_stderr_with_nothing_configured() -> None:
    done = _fresh(
        """
        from jigs._logging import logger
        logger.warning("steplog.unwritable", path="x")
        """
    )
    assert done.returncode == 0, done.stderr
    assert "steplog.unwritable" in done.stderr
    assert "path=x" in done.stderr or "'path': 'x'" in done.stderr


def test_structlog_capture_sees_events_with_their_bound_fields() -> None:
    from jigs._logging import logger
    from structlog.testing import capture_logs

    log = logger.bind(run_id="r", kind="echo")
    with capture_logs() as logs:
        log.bind(stage="checks").info("stage.done", seconds=0.5)
        log.try_unbind("kind").warning("stage.slow")
        log.new(only="this").error("stage.failed")
    assert logs == [
        {
            "run_id": "r",
            "kind": "echo",
            "stage": "checks",
            "seconds": 0.5,
            "event": "stage.done",
            "log_level": "info",
        },
        {"run_id": "r", "event": "stage.slow", "log_level": "warning"},
        {"only": "this", "event": "stage.failed", "log_level": "error"},
    ]
    with pytest.raises(KeyError):
        log.unbind("missing")


def test_the_redacting_logger_class_is_still_exported() -> None:
    import structlog
    from jigs import _logging

    assert issubclass(_logging.RedactingLogger, structlog.stdlib.BoundLogger)
    with pytest.raises(AttributeError):
        _ = _logging.NoSuchName  # type: ignore[attr-defined]


# ------------------------------------------------------------------ entry points


def _standard(group: str) -> list[tuple[str, str, str | None, str | None]]:
    from importlib.metadata import entry_points

    rows = []
    for ep in entry_points(group=group):
        dist = ep.dist
        about = (dist.metadata["Name"], dist.version) if dist is not None else (None, None)
        rows.append((ep.name, ep.value, *about))
    return sorted(rows)


def _ours(group: str) -> list[tuple[str, str, str | None, str | None]]:
    from jigs._entry_points import entry_points

    return sorted((ep.name, ep.value, *ep.distribution()) for ep in entry_points(group))


@pytest.mark.parametrize(
    "group", ["jigs.harnesses", "console_scripts", "pytest11", "jigs.session_stores", "none.such"]
)
def test_entry_points_match_importlib_metadata(group: str) -> None:
    assert _ours(group) == _standard(group)


def _dist(site: Path, folder: str, name: str, text: str) -> None:
    info = site / folder
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n\nbody\n")
    (info / "entry_points.txt").write_text(text)


def test_entry_points_follow_importlib_rules_and_see_a_new_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    monkeypatch.setattr(sys, "path", [str(first), str(second), *sys.path])
    group = "jigs.test-group"
    _dist(
        first,
        "My.Pkg-1.0.dist-info",
        "My.Pkg",
        f"# a comment\n[other]\nx = nope\n[{group}]\n  one = mod.one:attr [extra]  \n"
        "two=mod.two\nbroken line without equals\n",
    )
    # the same distribution further down sys.path is shadowed, as importlib.metadata does
    _dist(second, "my_pkg-0.9.dist-info", "my-pkg", f"[{group}]\nshadowed = mod.old\n")
    assert _ours(group) == [
        ("one", "mod.one:attr [extra]", "My.Pkg", "1.0"),
        ("two", "mod.two", "My.Pkg", "1.0"),
    ]
    # installed after the first look: found on the next one (nothing is cached)
    _dist(second, "late_kind-2.0.dist-info", "late-kind", f"[{group}]\nlate = late.plugin\n")
    assert ("late", "late.plugin", "late-kind", "1.0") in _ours(group)


def test_entry_points_ask_importlib_for_a_zip_on_sys_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zipfile

    archive = tmp_path / "bundle.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("zipped_kind-1.0.dist-info/METADATA", "Name: zipped-kind\nVersion: 1.0\n")
        zipped.writestr(
            "zipped_kind-1.0.dist-info/entry_points.txt", "[jigs.harnesses]\nzipped = z.plugin\n"
        )
    monkeypatch.setattr(sys, "path", [str(archive), *sys.path])
    ours = _ours("jigs.harnesses")
    assert ("zipped", "z.plugin", "zipped-kind", "1.0") in ours
    assert ours == _standard("jigs.harnesses")


def test_resolving_a_kind_does_not_import_importlib_metadata_for_jigs() -> None:
    loaded = _loaded(
        """
        import sys
        from jigs._registry import Registry
        Registry().kinds()
        assert "importlib.metadata" not in sys.modules
        """
    )
    assert "jigs" in loaded


def test_entry_points_ask_importlib_where_file_access_is_forbidden(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Temporal's workflow sandbox forbids os and open() to non-stdlib modules (importlib.metadata
    is passed through): the reader must still give the standard answer there."""
    from jigs import _entry_points

    class Forbidden(RuntimeError):
        pass

    def forbidden(*args: object, **kwargs: object) -> None:
        raise Forbidden("Cannot access __builtins__.open from inside a workflow")

    expected = _standard("jigs.harnesses")
    assert expected  # the workspace installs kinds
    # open() as the sandbox has it, for this module only (importlib.metadata keeps the real one)
    monkeypatch.setattr(_entry_points, "open", forbidden, raising=False)
    assert _ours("jigs.harnesses") == expected


_PROXIED = """
import json, sys, anyio
from jigs.proxy._credential import CredentialProxy

BODY = json.dumps({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})

async def main():
    async with CredentialProxy(UPSTREAM, "sk-ant-api03-imports-0123456789abcdef") as proxy:
        path = proxy.base_url.split(str(proxy.port), 1)[1] + "/v1/messages"
        stream = await anyio.connect_tcp("127.0.0.1", proxy.port)
        head = (
            f"POST {path} HTTP/1.1\\r\\nhost: 127.0.0.1\\r\\ncontent-type: application/json\\r\\n"
            f"content-length: {len(BODY)}\\r\\nconnection: close\\r\\n\\r\\n"
        )
        await stream.send(head.encode() + BODY.encode())
        answer = b""
        try:
            while True:
                answer += await stream.receive()
        except anyio.EndOfStream:
            pass
    print(answer.split(b"\\r\\n", 1)[0].decode())
    print(json.dumps(sorted(m for m in ("httpx", "urllib.request", "http.client") if m in sys.modules)))

anyio.run(main)
"""


@pytest.mark.anyio
async def test_a_proxied_request_loads_neither_httpx_nor_urllib_request() -> None:
    """The credential proxy's upstream side is httpcore: a proxied step pays neither httpx's
    imports nor ``urllib.request``'s (only read when a proxy variable is set)."""
    import os

    import anyio
    from jigs_testing import ModelServer, text

    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    async with ModelServer([text("proxied")]) as server:
        code = _PROXIED.replace("UPSTREAM", repr(server.anthropic_base_url))
        done = await anyio.run_process([sys.executable, "-c", code], env=env, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    status, loaded = done.stdout.decode().strip().splitlines()[-2:]
    assert status.startswith("HTTP/1.1 200"), status
    assert json.loads(loaded) == [], loaded


#: What a step must not have imported when it launches its CLI: each is loaded later, while the
#: CLI starts up (or never), so a cold step's CLI starts sooner. platformdirs: the data dir's XDG
#: rule; tempfile, shutil and random: jigs._files; hashlib/hmac: the session store's digests and
#: the proxy's token check; the buffered reader: the first read; jigs._result: what run_agent
#: returns; h11/httpcore: the proxy's thread.
NOT_BEFORE_LAUNCH = (
    "platformdirs",
    "tempfile",
    "shutil",
    "random",
    "hashlib",
    "hmac",
    "anyio.streams.buffered",
    "jigs._result",
    "h11",
    "httpcore",
    "pydantic",
    "structlog",
)

#: One descriptor per kind whose launch goes through the credential proxy where it has one.
AT_LAUNCH = {
    "claude": "harnesses.claude(base_url='http://127.0.0.1:9', api_key_env='LOCAL_KEY')",
    "codex": "harnesses.codex(model='m', base_url='http://127.0.0.1:9/v1', api_key_env='LOCAL_KEY')",
    "echo": "harnesses.echo()",
    "pi": BUILD["pi"],
}

_AT_LAUNCH = """
import asyncio, json, os, subprocess, sys
import anyio
from jigs import RunMetadata, harnesses
from jigs.errors import JigsError
from jigs.steps import run_agent

seen = []

async def stop_at_launch(*args, **kwargs):
    seen.append(sorted(m for m in NOT_BEFORE_LAUNCH if m in sys.modules))
    raise FileNotFoundError(2, "stopped at the launch by the test")

anyio.open_process = stop_at_launch  # jigs.processes looks it up at each launch

async def main():
    worktree = sys.argv[1]
    try:
        await run_agent(
            harness=DESCRIPTOR, cwd=worktree, prompt="hi",
            run=RunMetadata(workflow_run_id="at-launch"), agents_env=["IS_SANDBOX"],
        )
    except JigsError as exc:
        print(type(exc).__name__, file=sys.stderr)
    print(json.dumps(seen))

asyncio.run(main())
"""


_CODEX_SEED = """
import asyncio, os, structlog
from jigs._registry import default_registry
from jigs.env import build_env
from jigs_harness_codex._seed import _build_spare, ensure_seed
exe = default_registry().get("codex").resolve_executable(os.environ).path
seed = asyncio.run(ensure_seed(exe, build_env([]), structlog.get_logger()))
assert seed is not None
_build_spare(seed, structlog.get_logger())
"""


@pytest.mark.parametrize("kind", sorted(AT_LAUNCH))
def test_a_step_launches_its_cli_before_loading_what_it_needs_later(
    kind: str, tmp_path: Path, require_cli: Any
) -> None:
    """A fresh process's step, up to its first launch (stopped there): the data dir found with
    no JIGS_DATA_DIR, the proxy prepared, the checks run, the lock taken; none of the modules a
    step needs only later is loaded yet."""
    import os

    if kind != "echo":
        require_cli(kind)
    env = {k: v for k, v in os.environ.items() if k not in ("JIGS_DATA_DIR", "XDG_DATA_HOME")}
    env |= {"HOME": str(tmp_path), "LOCAL_KEY": "sk-local-at-launch", "IS_SANDBOX": "1"}
    code = _AT_LAUNCH.replace("NOT_BEFORE_LAUNCH", repr(NOT_BEFORE_LAUNCH)).replace(
        "DESCRIPTOR", AT_LAUNCH[kind]
    )
    if kind == "codex":  # as after a first Codex step: its home seed and a spare copy ready,
        # in a CLI dir of this test's own (beside the home, so a spare is claimed by a rename)
        env |= {"JIGS_CODEX_EXECUTABLE": str(require_cli("codex")), "JIGS_CLI_DIR": str(tmp_path)}
        _fresh(_CODEX_SEED, env=env).check_returncode()
    worktree = tmp_path / "worktree"
    worktree.mkdir()
    subprocess.run(["git", "init", "-q", str(worktree)], check=True)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), str(worktree)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen, f"the {kind} step never reached its launch: {done.stderr[-2000:]}"
    assert seen[0] == [], f"loaded before {kind}'s launch: {seen[0]}"


def test_the_seed_import_works_from_steps_and_from_errors() -> None:
    """The guide jigs implements imports the two errors beside ``create_agent_runner``."""
    ran = subprocess.run(
        [
            sys.executable,
            "-c",
            "from jigs.steps import create_agent_runner, JitCheckError, AgentSessionError\n"
            "import jigs.errors\n"
            "assert JitCheckError is jigs.errors.JitCheckError\n"
            "assert AgentSessionError is jigs.errors.AgentSessionError\n"
            "print(create_agent_runner.__name__)",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "create_agent_runner"
