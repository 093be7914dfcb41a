"""The tool-approval callback: a PreToolUse hook answered by the step, over Claude Code's stdio
control protocol.

Permissions stay bypassed (policy), so Claude Code never prompts; instead, when a step passes
``provider_options={"claude": {"approve_tool": fn}}``, the turn runs with
``--input-format stream-json`` and an :class:`ApprovalDriver` (a :class:`jigs.plugin.TurnDriver`):
it registers one PreToolUse hook in the ``initialize`` control request, sends the prompt as a user
message, and answers each ``hook_callback`` request by calling ``fn(tool_name, arguments)``.
``fn`` (sync or async) returns ``True`` to let the tool run, ``False`` to refuse it, or a string
to refuse it with that message to the agent. A callback that raises fails the turn with its own
exception (the core stops the process). Its time counts as silence of the CLI: a callback that
waits longer than the descriptor's ``idle_timeout`` ends the turn with ``AgentTimeoutError``.
stdin is closed when the turn ends.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
from jigs.errors import AgentOutputError, InvalidInputError

from jigs_harness_claude._control import StreamInput

if TYPE_CHECKING:
    import anyio.abc

__all__ = ["ApprovalDriver", "ApproveTool", "approve_tool"]

ApproveTool = Callable[[str, dict[str, Any]], "bool | str | Awaitable[bool | str]"]

_HOOK_ID = "jigs_approve_tool"
_INIT_ID = "jigs_init"
_GONE = (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError)


def approve_tool(options: Mapping[str, Any]) -> ApproveTool | None:
    """The step's ``approve_tool`` callback, or None; :class:`InvalidInputError` when it is
    not a function."""
    fn = options.get("approve_tool")
    if fn is None or callable(fn):
        return fn
    raise InvalidInputError(
        "provider_options['claude']['approve_tool'] must be a function "
        "fn(tool_name, arguments) -> bool | str (or an awaitable of one)",
        argument="provider_options",
    )


class ApprovalDriver(StreamInput):
    """Speaks the control protocol on one turn's stdin (see the module docstring); interrupts
    and steers as :class:`StreamInput` does."""

    def __init__(self, approve: ApproveTool, prompt: str | list[dict[str, Any]]) -> None:
        super().__init__(prompt)
        self._approve = approve

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
            output = await self._decide(
                str(payload.get("tool_name") or ""), payload.get("tool_input") or {}
            )
            response = {"subtype": "success", "request_id": request_id, "response": output}
        else:
            error = f"jigs does not handle {request.get('subtype')!r}"
            response = {"subtype": "error", "request_id": request_id, "error": error}
        await self._send({"type": "control_response", "response": response})
        return True

    async def _decide(self, name: str, arguments: Any) -> dict[str, Any]:
        verdict = self._approve(name, arguments)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is True:
            return {}
        reason = verdict if isinstance(verdict, str) and verdict else f"{name} was refused"
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }
