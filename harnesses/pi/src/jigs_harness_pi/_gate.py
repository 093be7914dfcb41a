"""The step's tool gate for Pi: an extension's ``tool_call`` handler asks the step over RPC.

Pi blocks a tool call only from an extension (``tool_call`` returning ``{block: true, reason}``),
and an extension reaches its host only through the UI dialogs of RPC mode. So a gated turn runs
``pi --mode rpc`` with :data:`EXTENSION` loaded (``-e``; discovery stays off): before each tool
call it asks ``ctx.ui.input(TITLE, <the call as JSON>)``, which Pi prints as an
``extension_ui_request``; :class:`GateDriver` (a :class:`jigs.plugin.TurnDriver`) answers it with
the gate's decision as JSON. Anything but an explicit ``allow`` blocks the call (a lost answer,
a cancelled dialog, a throw: Pi's own rule is that a failing ``tool_call`` handler blocks too).
``Deny`` blocks with the reason (the agent reads it); ``Defer`` blocks with ``terminate``, so
the agent stops after the call.

RPC mode prints the same session events as json mode but no session header: the driver asks
``get_state`` first and hands its answer to the decoder as the header (the session id it checks),
then sends the prompt. The turn ends at ``agent_settled`` like in json mode; the driver then
closes stdin and Pi exits. Pi's tools: ``bash`` is ``"shell"``, ``edit`` and ``write``
``"file_edit"``, an MCP server's tool (``mcp__<server>__<tool>``) ``"mcp"``, the rest (``read``,
``grep``, ``ls``, ``codemode`` ...) ``"other"``; the tools a ``codemode`` script calls pass
through the gate too (Pi runs nested calls through ``tool_call``).
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio
from jigs.errors import AgentOutputError
from jigs.plugin import PromptImage, ToolGate
from jigs.plugin.tools import gated_call
from jigs.steps import Allow, Defer, GatedCall

if TYPE_CHECKING:
    import anyio.abc

__all__ = ["EXTENSION", "TITLE", "GateDriver", "tool_call"]

#: The dialog title the extension asks under (other dialogs are cancelled).
TITLE = "jigs-tool-gate"
_STATE_ID = "jigs-state"
_PROMPT_ID = "jigs-prompt"
_GONE = (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError)
_EDITS = frozenset({"edit", "write"})

#: The extension Pi loads for a gated turn (plain JavaScript: nothing for Pi to transpile).
EXTENSION = """\
export default function (pi) {
  pi.on("tool_call", async (event, ctx) => {
    const call = JSON.stringify({tool: event.toolName, id: event.toolCallId, input: event.input});
    const answer = await ctx.ui.input("TITLE", call);
    let decision = null;
    try { decision = JSON.parse(answer ?? "null"); } catch (error) { decision = null; }
    if (decision && decision.decision === "allow") return undefined;
    const reason = (decision && decision.reason) || "refused by the step's tool gate";
    return {block: true, reason, terminate: Boolean(decision && decision.decision === "defer")};
  });
}
""".replace("TITLE", TITLE)


def tool_call(payload: Any) -> GatedCall:
    """The extension's JSON of one call as the gate sees it."""
    data = payload if isinstance(payload, dict) else {}
    name, call_id = str(data.get("tool") or ""), str(data.get("id") or "")
    return gated_call("pi", name, data.get("input"), call_id, shell={"bash"}, edits=_EDITS)


class GateDriver:
    """Speaks Pi's RPC on one gated turn's stdin (see the module docstring)."""

    def __init__(self, gate: ToolGate, prompt: str, images: Sequence[PromptImage] = ()) -> None:
        self._gate = gate
        self._prompt = prompt
        self._images = tuple(images)
        self._stdin: anyio.abc.ByteSendStream | None = None

    async def _send(self, message: dict[str, Any]) -> None:
        if self._stdin is None:
            return
        line = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        with contextlib.suppress(*_GONE):  # Pi is gone; its output or exit says why
            await self._stdin.send(line)

    async def start(self, stdin: anyio.abc.ByteSendStream) -> None:
        self._stdin = stdin
        await self._send({"id": _STATE_ID, "type": "get_state"})

    async def handle(self, message: dict[str, Any]) -> bool:
        """Answer an RPC record; True when it was one. ``get_state``'s answer becomes the
        session header the decoder reads (False: decode it)."""
        kind = message.get("type")
        if kind == "response":
            return await self._response(message)
        if kind != "extension_ui_request":
            return False
        if message.get("method") in ("select", "confirm", "input", "editor"):
            answer: dict[str, Any] = {"cancelled": True}
            if message.get("method") == "input" and message.get("title") == TITLE:
                answer = {"value": await self._decide(message.get("placeholder"))}
            await self._send({"type": "extension_ui_response", "id": message.get("id"), **answer})
        return True

    async def _response(self, message: dict[str, Any]) -> bool:
        if not message.get("success", True):
            raise AgentOutputError(
                f"Pi refused jigs' {message.get('command')} command in RPC mode: "
                f"{str(message.get('error'))[:300]}; the CLI may be too old for approve_tool "
                f"(run `jigs doctor`)",
                kind="pi",
            )
        if message.get("id") != _STATE_ID:
            return True
        data = message.get("data") or {}
        message.clear()
        message.update(type="session", id=data.get("sessionId"))
        prompt: dict[str, Any] = {"id": _PROMPT_ID, "type": "prompt", "message": self._prompt}
        if self._images:
            prompt["images"] = [
                {
                    "type": "image",
                    "data": base64.b64encode(image.path.read_bytes()).decode(),
                    "mimeType": image.media_type,
                }
                for image in self._images
            ]
        await self._send(prompt)
        return False

    async def _decide(self, placeholder: Any) -> str:
        try:
            payload = json.loads(placeholder) if isinstance(placeholder, str) else None
        except ValueError:
            payload = None
        decision = await self._gate.decide(tool_call(payload))
        if isinstance(decision, Allow):
            return json.dumps({"decision": "allow"})
        if isinstance(decision, Defer):
            reason = "this call waits for a human's approval; stop here"
            return json.dumps({"decision": "defer", "reason": reason})
        return json.dumps({"decision": "deny", "reason": decision.reason})

    async def finish(self) -> None:
        """Close stdin: Pi's RPC mode exits at its end. Never raises."""
        stdin, self._stdin = self._stdin, None
        if stdin is not None:
            with contextlib.suppress(*_GONE):
                await stdin.aclose()
