"""jigs-testing is a distribution of its own: the core contract and the harness wheels run
without it, ``jigs demo``/``jigs model-server`` name the ``pip install`` when it is missing, and a
kind takes part in the demo and the kit through its own ``demo_plan`` method."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.anyio

# Makes ``import jigs_testing`` fail as it does where the distribution is not installed.
HIDE = "import sys; sys.modules['jigs_testing'] = None; "


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("command", [["demo", "--harness", "echo"], ["model-server"]])
def test_the_cli_names_the_install_when_jigs_testing_is_missing(command):
    ran = _python(HIDE + f"from jigs.cli import main; sys.exit(main({command!r}))")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "MissingDistributionError" in ran.stderr
    assert "pip install jigs-testing" in ran.stderr
    assert f"jigs {command[0]} needs the jigs-testing distribution" in ran.stderr
    assert "Traceback" not in ran.stderr


def test_the_core_and_every_kind_run_without_jigs_testing(tmp_path):
    code = HIDE + (
        "import anyio, jigs.plugin, jigs.steps\n"
        "from jigs import RunMetadata, harnesses\n"
        "from jigs.registry._registry import default_registry\n"
        "import jigs_harness_claude._harness, jigs_harness_codex._harness, jigs_harness_pi._harness\n"
        "for kind in ('claude', 'codex', 'pi', 'echo'):\n"
        "    default_registry().get(kind)\n"
        "assert not hasattr(jigs.plugin.Harness, 'demo_plan')\n"
        "result = anyio.run(lambda: jigs.steps.run_agent(\n"
        "    harness=harnesses.loads('{\"kind\": \"echo\"}'), cwd=sys.argv[1], prompt='hi',\n"
        "    run=RunMetadata(workflow_run_id='no-testing'), agents_env=()))\n"
        "assert 'jigs_testing' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "print('answer:', result.text)\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "answer: echo: hi (turn 1)" in ran.stdout


def test_the_installed_kinds_support_the_demo_protocol():
    from jigs.plugin import Harness
    from jigs.registry._registry import default_registry
    from jigs_testing import SupportsDemo

    assert not hasattr(Harness, "demo_plan")
    for kind in ("claude", "codex", "pi", "echo"):
        assert isinstance(default_registry().get(kind), SupportsDemo), kind


@pytest.fixture
def echo_without_demo_plan(monkeypatch):
    from jigs_harness_echo._harness import EchoHarness

    monkeypatch.delattr(EchoHarness, "demo_plan")


@pytest.mark.usefixtures("echo_without_demo_plan")
async def test_the_kit_names_a_missing_demo_plan_and_how_to_write_it(tmp_path):
    from jigs_testing.conformance import check_harness

    with pytest.raises(AssertionError) as caught:
        await check_harness("echo", tmp_path=tmp_path)
    message = str(caught.value)
    assert "has no demo_plan(server) method" in message
    assert "def demo_plan(self, server: ModelServer) -> DemoPlan" in message
    assert not isinstance(caught.value, AttributeError)


@pytest.mark.usefixtures("echo_without_demo_plan")
async def test_the_demo_reports_a_missing_demo_plan(capsys):
    from jigs_testing.demo import run_demo

    (report,) = await run_demo(["echo"])
    assert not report.ok
    assert "has no demo_plan(server) method" in (report.error or "")
    assert "FAILED: the echo harness has no demo_plan(server) method" in capsys.readouterr().out


def test_the_missing_distribution_error_pickles_with_its_fields():
    import pickle

    from jigs.errors import JigsError, MissingDistributionError

    error = MissingDistributionError("jigs-testing", needed_for="jigs demo")
    back = pickle.loads(pickle.dumps(error))
    assert isinstance(back, JigsError)
    assert isinstance(back, ImportError)
    assert (back.distribution, back.needed_for, back.retryable) == (
        "jigs-testing",
        "jigs demo",
        False,
    )
    assert str(back) == str(error)
    assert "pip install jigs-testing" in str(back)
