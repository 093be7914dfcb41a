"""The tool-approval callback: a PreToolUse hook answered by the step, over Claude Code's stdio
control protocol.

Permissions stay bypassed (policy), so Claude Code never prompts; instead, when a step passes
``provider_options={"claude": {"approve_tool": fn}}``, the turn runs with
``--input-format stream-json``: jigs registers one PreToolUse hook in the ``initialize`` control
request, sends the prompt as a user message, and answers each ``hook_callback`` request by calling
``fn(tool_name, tool_input)``. ``fn`` (sync or async) returns ``True`` to let the tool run,
``False`` to refuse it, or a string to refuse it with that message to the agent. A callback that
raises fails the turn (the process is stopped). stdin is closed once the result arrives.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from typing import Any

from jigs.errors import AgentOutputError
from jigs.processes import ManagedProcess

__all__ = ["ApprovalBridge", "ApproveTool", "approval_setup"]

ApproveTool = Callable[[str, dict[str, Any]], "bool | str | Awaitable[bool | str]"]

_HOOK_ID = "jigs_approve_tool"
_INIT_ID = "jigs_init"


def approval_setup(fn: Callable[..., Any] | None) -> Callable[..., Any] | None:
    """The callback to bridge, or None when the step gave none."""
    return fn


class ApprovalBridge:
    """Speaks the control protocol on one process's stdin/stdout for one turn."""

    def __init__(self, proc: ManagedProcess, approve: Callable[..., Any]) -> None:
        self._proc = proc
        self._approve = approve
        self._closed = False

    async def _send(self, message: dict[str, Any]) -> None:
        stdin = self._proc.stdin
        assert stdin is not None
        await stdin.send((json.dumps(message, separators=(",", ":")) + "\n").encode())

    async def start(self, prompt: str) -> None:
        """Register the hook and send the prompt."""
        await self._send(
            {
                "type": "control_request",
                "request_id": _INIT_ID,
                "request": {
                    "subtype": "initialize",
                    "hooks": {"PreToolUse": [{"matcher": None, "hookCallbackIds": [_HOOK_ID]}]},
                },
            }
        )
        await self._send(
            {
                "type": "user",
                "message": {"role": "user", "content": prompt},
                "parent_tool_use_id": None,
                "session_id": "",
            }
        )

    async def handle(self, event: dict[str, Any]) -> bool:
        """Answer a control message; True when ``event`` was one (not a turn event)."""
        kind = event.get("type")
        if kind == "control_response":
            response = event.get("response") or {}
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
        request = event.get("request") or {}
        request_id = event.get("request_id")
        if request.get("subtype") == "hook_callback" and request.get("callback_id") == _HOOK_ID:
            payload = request.get("input") or {}
            output = await self._decide(
                str(payload.get("tool_name") or ""), payload.get("tool_input") or {}
            )
            await self._reply(request_id, output)
        else:
            await self._send(
                {
                    "type": "control_response",
                    "response": {
                        "subtype": "error",
                        "request_id": request_id,
                        "error": f"jigs does not handle {request.get('subtype')!r}",
                    },
                }
            )
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

    async def _reply(self, request_id: Any, output: dict[str, Any]) -> None:
        await self._send(
            {
                "type": "control_response",
                "response": {"subtype": "success", "request_id": request_id, "response": output},
            }
        )

    async def close(self) -> None:
        """Close stdin so the CLI exits after its result."""
        if not self._closed:
            self._closed = True
            stdin = self._proc.stdin
            if stdin is not None:
                await stdin.aclose()
