"""The tool gate's own rules, without a CLI (the kit's tool_gate and approval_pending checks run
them through every kind's real CLI)."""

from __future__ import annotations

import pickle

import pytest
from jigs.engine._gate import ToolGate, gate_from_options
from jigs.errors import ApprovalPending, InvalidInputError, ToolGateError
from jigs.steps import Allow, Approval, Defer, Deny, GatedCall, PendingApproval

pytestmark = pytest.mark.anyio


def _call(command: str, call_id: str = "c1") -> GatedCall:
    return GatedCall(
        kind="k", tool="Bash", category="shell", arguments={"command": command}, call_id=call_id
    )


async def test_an_approved_call_runs_once_and_a_denied_one_stays_denied() -> None:
    asked: list[GatedCall] = []

    async def gate(call: GatedCall) -> Deny:
        asked.append(call)
        return Deny("ask me")

    approvals = [
        Approval(call=_call("make deploy"), decision=Allow()),
        Approval(call=_call("rm -rf /", "c2"), decision=Deny("never")),
    ]
    tool_gate = ToolGate(gate, approvals)
    # the re-issued call has a new id: matched on tool and arguments
    assert await tool_gate.decide(_call("make deploy", "new")) == Allow()
    assert await tool_gate.decide(_call("make deploy", "again")) == Deny("ask me")
    for _ in range(2):
        assert await tool_gate.decide(_call("rm -rf /", "x")) == Deny("never")
    assert [c.call_id for c in asked] == ["again"]


async def test_after_a_defer_every_call_of_the_turn_is_deferred_and_a_turn_starts_afresh() -> None:
    answers = iter([Defer(), Allow(), Allow()])
    tool_gate = ToolGate(lambda call: next(answers))
    assert await tool_gate.decide(_call("a", "1")) == Defer()
    assert await tool_gate.decide(_call("b", "2")) == Defer()  # the gate was not asked
    assert [c.call_id for c in tool_gate.pending] == ["1", "2"]
    tool_gate.start_turn()
    assert await tool_gate.decide(_call("c", "3")) == Allow()
    assert tool_gate.pending == []


@pytest.mark.parametrize("answer", [True, "no", None, {"decision": "allow"}])
async def test_a_gate_that_answers_nonsense_or_raises_fails_the_turn(answer: object) -> None:
    with pytest.raises(ToolGateError, match="returned"):
        await ToolGate(lambda call: answer).decide(_call("x"))  # type: ignore[arg-type,return-value]

    def explode(call: GatedCall) -> Allow:
        raise KeyError("boom")

    with pytest.raises(ToolGateError) as info:
        await ToolGate(explode).decide(_call("x"))
    assert isinstance(info.value.__cause__, KeyError)
    assert not info.value.retryable


def test_pending_approval_round_trips_and_decides_only_pending_ids() -> None:
    error = ApprovalPending(
        "waiting", kind="k", pending=PendingApproval(session=None, calls=(_call("make deploy"),))
    )
    assert not error.retryable
    back = pickle.loads(pickle.dumps(error))
    pending = PendingApproval.model_validate_json(back.pending.model_dump_json())
    assert pending.calls == (_call("make deploy"),)
    (approval,) = pending.decide({"c1": Deny("not today")})
    assert Approval.model_validate_json(approval.model_dump_json()) == approval
    with pytest.raises(InvalidInputError, match="no pending call"):
        pending.decide({"other": Allow()})


@pytest.mark.parametrize(
    ("approve", "approvals", "options", "argument"),
    [
        ("yes", None, None, "approve_tool"),
        (None, {"c1": "allow"}, None, "approvals"),
        (None, [{"call": "x"}], None, "approvals"),
        (None, None, {"claude": {"approve_tool": print}}, "provider_options"),
    ],
)
def test_bad_gate_options_are_invalid_input(
    approve: object, approvals: object, options: object, argument: str
) -> None:
    with pytest.raises(InvalidInputError) as info:
        gate_from_options(approve, approvals, options, None)  # type: ignore[arg-type]
    assert info.value.argument == argument
