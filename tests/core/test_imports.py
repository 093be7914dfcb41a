"""What the packages export (every listed name resolves, AgentResult keeps its name and type
hints), what importing them loads (no optional extra, no CLI, no kit), how many imports still sit
inside functions (pinned), and how jigs' logger reaches the application (structlog over the
stdlib ``jigs`` logger).

Checks that depend on a fresh interpreter run in one.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Where the shipped code lives: the core, the kinds, the kit and the engine integrations.
SHIPPED = ("core/src", "testing/src", "harnesses/*/src", "integrations/*/src")
#: Imports inside function bodies in the shipped code, at most (issue 30: <= 80). What stays
#: there is for optional extras (OpenTelemetry, psycopg, obstore, mcp, dbos, temporalio,
#: jigs_testing in the kinds' demo plans) and import cycles; 64 since a step's ``tools=`` load
#: their server (the mcp SDK and uvicorn) only when a step has tools; 68 since the Temporal
#: approvals and step messages import ``temporalio.workflow`` inside the workflow's own code
#: (Temporal's sandbox re-imports a module imported at the top); 69 since the kit's
#: ``tools_of_another_step`` watches the step tool servers (the mcp SDK and uvicorn) only when it
#: runs. Lower it when you move one; never raise it to defer an import that every step needs.
MAX_FUNCTION_IMPORTS = 69
#: Top-level packages that neither ``import jigs`` nor resolving a kind may load: the optional
#: extras, the engines, the kit and its model server.
NOT_ON_IMPORT = (
    "mcp",
    "opentelemetry",
    "psycopg",
    "obstore",
    "dbos",
    "temporalio",
    "jigs_testing",
    "jigs_dbos",
    "jigs_temporal",
    "uvicorn",
    "starlette",
    "yaml",
)


def shipped_files() -> list[Path]:
    return sorted(p for pattern in SHIPPED for src in ROOT.glob(pattern) for p in src.rglob("*.py"))


def function_imports(path: Path) -> list[str]:
    """``path:line statement`` for each import inside a function (or lambda) body."""
    found: list[str] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, ast.Import | ast.ImportFrom):
                found.append(f"{path.relative_to(ROOT)}:{child.lineno} {ast.unparse(child)}")
            nested = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            walk(child, in_function or nested)

    walk(ast.parse(path.read_text(), str(path)), False)
    return found


def _fresh(code: str, *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
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
def test_resolving_a_kind_builds_a_validated_descriptor(kind: str) -> None:
    """A step's first lines in a fresh process: the import, the kind's plugin, one descriptor.
    The descriptor is real (validated: a bad setting is refused) and its harness is usable."""
    done = _fresh(
        f"""
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
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_kind_package_exports_every_name_it_lists() -> None:
    """The harness packages' public names are the objects of the modules defining them."""
    done = _fresh(
        """
        import jigs_harness_claude, jigs_harness_codex, jigs_harness_pi
        for package in (jigs_harness_claude, jigs_harness_codex, jigs_harness_pi):
            for name in package.__all__:
                assert getattr(package, name) is not None, (package.__name__, name)
            assert set(package.__all__) <= set(dir(package))
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


def test_every_listed_public_name_resolves() -> None:
    import jigs
    import jigs.models
    import jigs.steps
    import jigs.stores
    import jigs_testing

    for package in (jigs, jigs.models, jigs.stores, jigs_testing):
        for name in package.__all__:
            assert getattr(package, name) is not None, (package.__name__, name)
        assert set(package.__all__) <= set(dir(package))
    for name in jigs.steps.__all__:
        # functions and classes, and one type alias (LazyPrompt: a string or a function)
        value = getattr(jigs.steps, name)
        assert callable(value) or isinstance(value, types.UnionType), name
    assert jigs.__version__
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
        from jigs.engine._types import AgentSessionRef
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
        from jigs.engine import _logging
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
        from jigs.engine._logging import logger
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
        from jigs.engine._logging import logger
        logger.warning("steplog.unwritable", path="x")
        """
    )
    assert done.returncode == 0, done.stderr
    assert "steplog.unwritable" in done.stderr
    assert "path=x" in done.stderr or "'path': 'x'" in done.stderr


def test_structlog_capture_sees_events_with_their_bound_fields() -> None:
    from jigs.engine._logging import logger
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
    from jigs.engine import _logging

    assert issubclass(_logging.RedactingLogger, structlog.stdlib.BoundLogger)


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


def test_imports_inside_functions_stay_pinned() -> None:
    """Imports sit at module level as in any library; the few left inside functions are counted
    (the counter itself is checked on a sample) and may not grow."""
    sample = ROOT / "core/src/jigs/stores/_postgres.py"
    assert any("import psycopg" in hit for hit in function_imports(sample))
    hits = [hit for path in shipped_files() for hit in function_imports(path)]
    assert len(shipped_files()) > 100
    assert len(hits) <= MAX_FUNCTION_IMPORTS, "\n".join(hits)


def test_no_module_reads_entry_points_txt_itself() -> None:
    """Every entry-point group is read through importlib.metadata (jigs.registry._registry.entry_points)."""
    readers = [p for p in shipped_files() if "entry_points.txt" in p.read_text()]
    assert readers == []


def test_the_stand_ins_are_gone() -> None:
    """The hand-written stand-ins for the stdlib and the card's libraries stay removed."""
    for gone in ("_entry_points", "_lazy", "_exit", "_result"):
        assert not (ROOT / "core/src/jigs" / f"{gone}.py").exists(), gone
    core = [p.read_text() for p in (ROOT / "core/src/jigs").rglob("*.py")]
    for marker in ("gc.freeze", "JIGS_FAST_EXIT", "_BUILTIN_DEFAULT_PROCESSORS", "LazyLogger"):
        assert not any(marker in text for text in core), marker


@pytest.mark.parametrize("code", ["import jigs", "from jigs import harnesses; harnesses.claude()"])
def test_importing_jigs_loads_no_optional_extra_nor_the_cli(code: str) -> None:
    """``import jigs`` and resolving a kind load neither an optional extra, an engine, the kit,
    its model server, nor jigs' CLI (``opentelemetry`` is only used when the application has
    imported it)."""
    done = _fresh(
        f"""
        import json, sys
        {code}
        print(json.dumps(sorted(sys.modules)))
        """
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert "jigs" in loaded
    assert [m for m in loaded if m.split(".")[0] in NOT_ON_IMPORT] == []
    assert [m for m in loaded if m == "jigs.cli" or m.startswith("jigs.cli.")] == []


#: The first-party kinds: they import nothing private from jigs (the contract is jigs.plugin,
#: jigs.descriptors and the helpers of jigs.plugin.tools), so a third-party kind never has to.
KINDS = ("harnesses/*/src", "tests/plugins/echo/src")


def _private_jigs_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "jigs" and any(part.startswith("_") for part in parts[1:]):
                found.append(f"{path}:{node.lineno}: {name}")
    return found


def test_first_party_kinds_import_nothing_private_from_jigs():
    files = [p for pattern in KINDS for p in ROOT.glob(f"{pattern}/**/*.py")]
    assert len(files) > 20  # the kinds are where this test looks
    found = [hit for path in files for hit in _private_jigs_imports(path)]
    assert found == [], "import these from jigs.plugin / jigs.plugin.tools instead:\n" + "\n".join(
        found
    )


def test_the_private_import_check_sees_every_form(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import jigs._files\nfrom jigs._engine import decode_line\nfrom jigs import _secrets\n"
        "from jigs.proxy._endpoint import x\nfrom jigs.plugin import Harness\nimport jigs\n"
    )
    hits = _private_jigs_imports(probe)
    assert [hit.split(": ", 1)[1] for hit in hits] == [
        "jigs._files",
        "jigs._engine",
        "jigs._engine.decode_line",
        "jigs._secrets",
        "jigs.proxy._endpoint",
        "jigs.proxy._endpoint.x",
    ]


def test_the_plugin_module_exports_the_contract_only():
    import jigs.plugin
    import jigs.plugin.tools

    assert "ConfigFile" not in jigs.plugin.__all__
    assert "Planted" not in jigs.plugin.__all__
    assert len(jigs.plugin.__all__) <= 18
    for name in [*jigs.plugin.__all__, *jigs.plugin.tools.__all__]:
        assert getattr(jigs.plugin, name, None) or getattr(jigs.plugin.tools, name)
