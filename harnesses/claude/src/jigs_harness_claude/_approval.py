"""The step's tool gate (:class:`jigs.plugin.ToolGate`), answered through a PreToolUse hook over
Claude Code's stdio control protocol.

Permissions stay bypassed (policy), so Claude Code never prompts; instead, when a step passes
``approve_tool``, the turn runs with ``--input-format stream-json`` and an :class:`ApprovalDriver`
(a :class:`jigs.plugin.TurnDriver`): it registers one PreToolUse hook in the ``initialize``
control request, sends the prompt as a user message, and answers each ``hook_callback`` request
with the gate's decision on a :class:`~jigs.steps.GatedCall`: every tool Claude Code runs passes
through it (``Bash`` is ``"shell"``; ``Edit``, ``MultiEdit``, ``Write`` and ``NotebookEdit`` are
``"file_edit"``; ``mcp__<server>__<tool>`` is ``"mcp"``; the rest, ``Read``, ``Grep``, ``Task``
..., ``"other"``), its ``arguments`` the tool's input. ``Allow`` lets the tool run; ``Deny``
refuses it with the reason (the agent reads it); ``Defer`` refuses it and stops the turn
(``continue: false``), so the CLI ends with its result and the session records the call. The
gate's time counts as silence of the CLI: a gate that waits longer than the descriptor's
``idle_timeout`` ends the turn with ``AgentTimeoutError`` (use ``Defer`` for a human). stdin is
closed when the turn ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
from jigs.errors import AgentOutputError
from jigs.plugin import ToolGate
from jigs.plugin.tools import gated_call
from jigs.steps import Allow, Defer, GatedCall

from jigs_harness_claude._control import StreamInput

if TYPE_CHECKING:
    import anyio.abc

__all__ = ["ApprovalDriver", "tool_call"]

_HOOK_ID = "jigs_approve_tool"
_INIT_ID = "jigs_init"
_GONE = (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError)
_EDITS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
#: What the agent reads when its call waits for a human (the turn stops right after).
DEFERRED = "this call waits for a human's approval; the turn stops here"


def tool_call(name: str, arguments: Any, call_id: str) -> GatedCall:
    """Claude Code's tool call as the gate sees it."""
    return gated_call("claude", name, arguments, call_id, shell={"Bash"}, edits=_EDITS)


class ApprovalDriver(StreamInput):
    """Speaks the control protocol on one turn's stdin (see the module docstring); interrupts
    and steers as :class:`StreamInput` does."""

    def __init__(self, gate: ToolGate, prompt: str | list[dict[str, Any]]) -> None:
        super().__init__(prompt)
        self._gate = gate

    async def start(self, stdin: anyio.abc.ByteSendStream) -> None:
        """Register the hook and send the prompt."""
        self._stdin = stdin
        hooks = {"PreToolUse": [{"matcher": None, "hookCallbackIds": [_HOOK_ID]}]}
        await self._send(
            {
                "type": "control_request",
                "request_id": _INIT_ID,
                "request": {"subtype": "initialize", "hooks": hooks},
            }
        )
        user = {"role": "user", "content": self._prompt}
        await self._send(
            {"type": "user", "message": user, "parent_tool_use_id": None, "session_id": ""}
        )

    async def handle(self, message: dict[str, Any]) -> bool:
        """Answer a control message; True when ``message`` was one (not a turn event)."""
        kind = message.get("type")
        if kind == "control_response":
            response = message.get("response") or {}
            if response.get("request_id") == _INIT_ID and response.get("subtype") == "error":
                raise AgentOutputError(
                    f"Claude Code refused jigs' tool-approval hook: {response.get('error')}; "
                    f"the CLI may be too old for approve_tool (run `jigs doctor`)",
                    kind="claude",
                )
            return True
        if kind == "control_cancel_request":
            return True
        if kind != "control_request":
            return False
        request = message.get("request") or {}
        request_id = message.get("request_id")
        if request.get("subtype") == "hook_callback" and request.get("callback_id") == _HOOK_ID:
            payload = request.get("input") or {}
            call_id = str(payload.get("tool_use_id") or request.get("tool_use_id") or "")
            output = await self._decide(
                tool_call(
                    str(payload.get("tool_name") or ""), payload.get("tool_input") or {}, call_id
                )
            )
            response = {"subtype": "success", "request_id": request_id, "response": output}
        else:
            error = f"jigs does not handle {request.get('subtype')!r}"
            response = {"subtype": "error", "request_id": request_id, "error": error}
        await self._send({"type": "control_response", "response": response})
        return True

    async def _decide(self, call: GatedCall) -> dict[str, Any]:
        decision = await self._gate.decide(call)
        if isinstance(decision, Allow):
            return {}
        reason = DEFERRED if isinstance(decision, Defer) else decision.reason
        output: dict[str, Any] = {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }
        if isinstance(decision, Defer):
            output.update({"continue": False, "stopReason": DEFERRED})
        return output
