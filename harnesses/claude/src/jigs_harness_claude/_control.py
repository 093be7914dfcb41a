"""A turn's stdin in Claude Code's stream-json input: the prompt, then what the step says while
the turn runs.

Every turn of a step (an ask excepted) runs with ``--input-format stream-json`` and a
:class:`StreamInput` driver (a :class:`jigs.plugin.TurnDriver`): the prompt goes in as the first
user message, and stdin stays open until the turn ends, so that the step can

- ``interrupt()``: a ``control_request`` of subtype ``interrupt`` (what claude-agent-sdk's
  ``interrupt()`` sends); Claude Code stops its model call or tool at once, records the
  interruption in the session's transcript and ends the turn with its result;
- ``steer(text)``: another user message; Claude Code queues it and hands it to the model with
  its next request of the same turn.

stdin is closed when the turn ends, and the CLI exits. Writes are serialised: the engine's
reader answers control requests while the step's task interrupts or steers.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    import anyio.abc

__all__ = ["StreamInput", "user_message"]

_GONE = (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError)


def user_message(content: str | list[dict[str, Any]]) -> dict[str, Any]:
    """One stream-json user message: a text, or content blocks (text and images)."""
    user = {"role": "user", "content": content}
    return {"type": "user", "message": user, "parent_tool_use_id": None, "session_id": ""}


class StreamInput:
    """The stdin of one stream-json turn (see the module docstring)."""

    def __init__(self, prompt: str | list[dict[str, Any]]) -> None:
        self._prompt = prompt
        self._stdin: anyio.abc.ByteSendStream | None = None
        self._writing = anyio.Lock()
        self._requests = 0

    async def _send(self, message: dict[str, Any]) -> bool:
        """Write one line; False when stdin is closed or the CLI gone (its output says why)."""
        line = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        async with self._writing:
            if self._stdin is None:
                return False
            with contextlib.suppress(*_GONE):
                await self._stdin.send(line)
                return True
        return False

    async def start(self, stdin: anyio.abc.ByteSendStream) -> None:
        """Send the prompt."""
        self._stdin = stdin
        await self._send(user_message(self._prompt))

    async def handle(self, message: dict[str, Any]) -> bool:
        """Control messages are the driver's: answers to its requests are dropped, a request
        of the CLI's (none is expected without hooks) is refused so that it never waits."""
        kind = message.get("type")
        if kind in ("control_response", "control_cancel_request"):
            return True
        if kind != "control_request":
            return False
        request = message.get("request") or {}
        error = f"jigs does not handle {request.get('subtype')!r}"
        response = {"subtype": "error", "request_id": message.get("request_id"), "error": error}
        await self._send({"type": "control_response", "response": response})
        return True

    async def interrupt(self) -> bool:
        """Ask Claude Code to end its turn now."""
        self._requests += 1
        return await self._send(
            {
                "type": "control_request",
                "request_id": f"jigs_interrupt_{self._requests}",
                "request": {"subtype": "interrupt"},
            }
        )

    async def steer(self, text: str) -> bool:
        """Send ``text`` as user input the running turn reads."""
        return await self._send(user_message(text))

    async def finish(self) -> None:
        """Close stdin so the CLI exits after its result. Never raises."""
        async with self._writing:
            stdin, self._stdin = self._stdin, None
        if stdin is not None:
            with contextlib.suppress(*_GONE):
                await stdin.aclose()
