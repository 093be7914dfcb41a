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
    loaded = _loaded("import jigs.steps, jigs.models")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


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


def test_stdlib_logging_at_info_receives_jigs_events_through_structlog() -> None:
    done = _fresh(
        """
        import logging, sys
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
