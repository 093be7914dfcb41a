import pickle
from pathlib import Path

import pytest
from jigs.checks import Check, CheckFailure, run_checks
from jigs.errors import (
    AgentCrashedError,
    AgentSessionError,
    CliNotFoundError,
    HarnessNotFoundError,
    JigsError,
    JitCheckError,
    ModelNotAvailableError,
    StructuredOutputError,
    WorktreeBusyError,
)

pytestmark = pytest.mark.anyio


async def _failed_outcome():
    async def run():
        return CheckFailure(reason="r", repair="p")

    (outcome,) = await run_checks([Check("a.b", "A B", run)])
    return outcome


@pytest.mark.parametrize(
    "make",
    [
        lambda: AgentSessionError("gone", kind="claude", session_id="s1"),
        lambda: WorktreeBusyError(Path("/w"), "run-1", 42),
        lambda: HarnessNotFoundError("x", ["echo"]),
        lambda: CliNotFoundError("pi", ["PATH"], "install it"),
        lambda: AgentCrashedError("died", kind="echo", returncode=3, stderr_tail="boom"),
        lambda: StructuredOutputError("bad", raw="{}"),
        lambda: ModelNotAvailableError("pi"),
    ],
)
def test_errors_pickle_with_their_fields(make):
    error = make()
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error)
    assert str(back) == str(error)
    assert back.__dict__ == error.__dict__
    assert isinstance(back, JigsError)


async def test_jit_check_error_pickles_with_its_failures():
    error = JitCheckError([await _failed_outcome()])
    back = pickle.loads(pickle.dumps(error))
    assert back.failures == error.failures
    assert str(back) == "A B: r"


async def test_a_check_returning_the_wrong_type_is_a_failure_of_that_check():
    async def broken():
        return None

    async def fine():
        return CheckFailure(reason="nope", repair="fix")

    bad, good = await run_checks([Check("x.broken", "Broken", broken), Check("y", "Y", fine)])
    assert not bad.ok
    assert "returned NoneType, not a check result" in bad.reason
    assert good.reason == "nope"


async def test_a_check_that_hangs_is_reported_as_unanswered():
    import anyio

    async def hang():
        await anyio.sleep(30)

    (outcome,) = await run_checks([Check("h", "Hang", hang, timeout=0.2)])
    assert outcome.unanswered
    assert "did not answer within 0.2s" in outcome.reason
