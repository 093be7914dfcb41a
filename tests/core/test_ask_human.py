"""``ask_human``: the agent's question ends its turn, waits as a pending call, and the answer
resumes the session (every kind with its real CLI: the conformance kit's ``step_tools``). Here:
an agent that goes on after asking, with the real Codex CLI, and the decisions' rules."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jigs import RunMetadata
from jigs.errors import ApprovalPending, InvalidInputError
from jigs.steps import (
    Allow,
    Answer,
    Deny,
    GatedCall,
    PendingApproval,
    approvals_prompt,
    ask_human,
    decisions_of,
    run_agent,
)
from jigs_testing import ModelServer, text, tool_call
from proxied_kinds import proxied
from structlog.testing import capture_logs

pytestmark = pytest.mark.anyio

KEY_ENV = "JIGS_ASK_TEST_KEY"
QUESTION = "Which database should the migration target?"
ANSWER = "postgres-17, never sqlite"
MARKER = "went-on.marker"


def _tool(kind: str) -> str:
    return "mcp__tools__ask_human"


@pytest.fixture
def scratch(scratch_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(KEY_ENV, "sk-model-key-for-ask-test-1234567")
    return scratch_home


async def _step(kind: str, server: ModelServer, worktree: Path, **options: Any) -> Any:
    return await run_agent(
        harness=proxied(kind, KEY_ENV, "ask")(server),
        cwd=worktree,
        run=RunMetadata(workflow_run_id=f"ask-{kind}"),
        agents_env=["IS_SANDBOX"] if kind == "claude" else [],
        tools=[ask_human],
        **options,
    )


async def test_an_agent_that_goes_on_after_asking_is_stopped_with_its_question_pending(
    require_cli: Callable[[str], Path], scratch: Path, worktree: Path
) -> None:
    require_cli("codex")
    async with ModelServer() as server:
        server.add(
            tool_call(_tool("codex"), {"question": QUESTION}),
            tool_call("exec_command", {"cmd": f"sleep 2; touch {MARKER}"}),
            text("never reached"),
        )
        with capture_logs() as logs, pytest.raises(ApprovalPending) as raised:
            await _step("codex", server, worktree, prompt="go")
        server.script.skip_remaining()
    assert [q.question for q in raised.value.pending.questions] == [QUESTION]
    assert any(e["event"] == "turn.asked.interrupt" for e in logs)
    # the shell call's result never reached the model: the turn ended while it ran
    assert len(server.model_requests) == 2
    assert not (worktree / MARKER).exists()


def _question(call_id: str = "ask-1") -> GatedCall:
    return GatedCall(
        kind="k",
        tool="ask_human",
        category="question",
        arguments={"question": QUESTION},
        call_id=call_id,
    )


def test_a_question_takes_an_answer_and_a_tool_call_a_verdict() -> None:
    shell = GatedCall(kind="k", tool="Bash", category="shell", arguments={}, call_id="c1")
    pending = PendingApproval(session=None, calls=(_question(), shell))
    with pytest.raises(InvalidInputError, match="Answer"):
        pending.decide({"ask-1": Allow()})
    with pytest.raises(InvalidInputError, match="Allow"):
        pending.decide({"c1": Answer("yes")})
    decided = pending.decide({"ask-1": Answer(ANSWER), "c1": Deny("no")})
    prompt = approvals_prompt(decided)
    assert ANSWER in prompt
    assert QUESTION in prompt
    assert "refused: no" in prompt
    refused = approvals_prompt(
        PendingApproval(session=None, calls=(_question(),)).decide({"ask-1": Deny("nobody knows")})
    )
    assert "No answer will come (nobody knows)" in refused
    # through JSON and back, as a workflow stores it
    again = PendingApproval.model_validate_json(pending.model_dump_json())
    assert again.questions == pending.questions


def test_decisions_are_models_or_their_json_and_a_bad_one_is_not_echoed() -> None:
    sent = {"a": {"decision": "answer", "text": "yes"}, "b": {"decision": "allow"}}
    assert decisions_of(sent) == {"a": Answer("yes"), "b": Allow()}
    for bad in ({"a": {"decision": "defer"}}, {"a": "sk-typed-by-a-human-0123456789"}, ["a"]):
        with pytest.raises(InvalidInputError) as raised:
            decisions_of(bad)
        assert "sk-typed" not in str(raised.value)


def test_ask_human_is_not_for_calling() -> None:
    with pytest.raises(InvalidInputError, match="tools="):
        ask_human("why?")


def test_the_tool_server_records_a_question_and_refuses_the_rest_meanwhile() -> None:
    from jigs.engine._tool_server import ToolServer
    from jigs.engine._tools import ASKED, step_tools

    def lookup(ticket: str) -> str:
        """Look a ticket up."""
        return ticket

    asker, other = step_tools([ask_human, lookup])
    server = ToolServer([asker, other], log=_Log(), caller=None, kind="k")
    try:
        # bad questions are errors the agent reads; nothing waits
        assert server._ask(asker, {}) == (
            "invalid arguments for ask_human: question (a string) is required",
            True,
        )
        assert server._ask(asker, {"question": "  "})[1] is True
        assert server.questions == []
        assert server._ask(asker, {"question": QUESTION}) == (ASKED, False)
        (asked,) = server.questions
        assert (asked.category, asked.arguments) == ("question", {"question": QUESTION})
        # while it waits, neither another tool nor a second question runs
        for tool, arguments in ((other, {"ticket": "T-1"}), (asker, {"question": "again?"})):
            text, is_error = server._ask(tool, arguments)
            assert is_error
            assert "End your turn" in text
        assert len(server.questions) == 1
    finally:
        server.stop()


class _Log:
    def info(self, *args: Any, **kwargs: Any) -> None:
        pass

    warning = info
