"""How the app server's requests are answered: by the step's tool gate, or by policy.

Without a gate the thread runs with ``approvalPolicy: "never"``: Codex does not ask, and a
request that arrives anyway is approved. With one (a step's ``approve_tool``) each turn starts
with ``approvalPolicy: "untrusted"``: Codex then asks before every command it does not know to be
read-only (it runs ``ls``, ``cat``, ``rg`` ... without asking) and before every file change, and
each request becomes a :class:`~jigs.steps.GatedCall` for :meth:`~jigs.plugin.ToolGate.decide`:

- a command (``item/commandExecution/requestApproval``, ``execCommandApproval``) ->
  ``"exec_command"``, ``"shell"``, with ``{"command", "cwd"}``;
- a file change (``item/fileChange/requestApproval``, ``applyPatchApproval``) ->
  ``"apply_patch"``, ``"file_edit"``, with ``{"paths", "reason"}``;
- extra permissions (``item/permissions/requestApproval``) -> ``"request_permissions"``,
  ``"other"``, with ``{"permissions", "reason"}``;
- an MCP tool call (the step's servers get ``default_tools_approval_mode = "prompt"`` when the
  step is gated; Codex asks with an elicitation whose ``_meta.codex_approval_kind`` is
  ``"mcp_tool_call"``) -> ``"mcp__<server>__<tool>"``, ``"mcp"``, with the tool's arguments;
- any other MCP server's elicitation -> ``"mcp__<server>__elicitation"``, ``"mcp"``, with
  ``{"message", "mode"}`` (declined when no gate is given: nobody is there to fill a form).

``Allow`` accepts, ``Deny`` declines (Codex's decline carries no message: the reason is logged,
the agent reads that the user declined), ``Defer`` declines and interrupts the turn. Questions to
the user get no answers; anything else gets a JSON-RPC "method not found" error. A gate that
raises fails the turn with :class:`~jigs.errors.ToolGateError` (the server gets an error reply
first, so the call does not run).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from jigs.errors import InvalidInputError
from jigs.plugin import ToolGate
from jigs.steps import Allow, Defer, Deny, GatedCall

from jigs_harness_codex._rpc import NotHandled

__all__ = ["Approver", "turn_options"]

_OPTIONS = frozenset({"effort"})
_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high", "xhigh"})
_DECISIONS: dict[str, tuple[Any, Any]] = {
    "item/commandExecution/requestApproval": ({"decision": "accept"}, {"decision": "decline"}),
    "item/fileChange/requestApproval": ({"decision": "accept"}, {"decision": "decline"}),
    "execCommandApproval": ({"decision": "approved"}, {"decision": "denied"}),
    "applyPatchApproval": ({"decision": "approved"}, {"decision": "denied"}),
}


def turn_options(options: Mapping[str, Any]) -> str | None:
    """The step's codex provider options for one turn: the ``effort``.

    Raises :class:`InvalidInputError` (``argument="provider_options"``) for an unknown key or an
    unknown effort.
    """
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        moved = ""
        if "approve" in unknown:
            moved = " (`approve` is now the step option approve_tool=fn, fn(call: GatedCall))"
        raise InvalidInputError(
            f"provider_options['codex'] has unknown key(s) {unknown}{moved}; the codex kind "
            f"reads {sorted(_OPTIONS)} (and on_event)",
            argument="provider_options",
        )
    effort = options.get("effort")
    if effort is not None and effort not in _EFFORTS:
        raise InvalidInputError(
            f"provider_options['codex']['effort'] must be one of {sorted(_EFFORTS)}",
            argument="provider_options",
        )
    return effort


_Category = Literal["shell", "file_edit", "mcp", "other"]
#: Codex names the tool only in its question: 'Allow the x MCP server to run tool "lookup"?'
_TOOL_IN_MESSAGE = re.compile(r'run tool "([^"]+)"')


def tool_call(method: str, params: dict[str, Any], paths: Mapping[str, list[str]]) -> GatedCall:
    """The server's request as the gate sees it."""
    call_id = str(params.get("approvalId") or params.get("itemId") or params.get("callId") or "")
    tool, category, arguments = _tool(method, params, paths)
    return GatedCall(
        kind="codex", tool=tool, category=category, arguments=arguments, call_id=call_id
    )


def _tool(
    method: str, params: dict[str, Any], paths: Mapping[str, list[str]]
) -> tuple[str, _Category, dict[str, Any]]:
    if method in ("item/commandExecution/requestApproval", "execCommandApproval"):
        return "exec_command", "shell", {"command": params.get("command"), "cwd": params.get("cwd")}
    if method == "applyPatchApproval":
        changes = params.get("fileChanges")
        names = sorted(changes) if isinstance(changes, dict) else []
        return "apply_patch", "file_edit", {"paths": names, "reason": params.get("reason")}
    if method == "item/fileChange/requestApproval":
        found = paths.get(str(params.get("itemId")), [])
        return "apply_patch", "file_edit", {"paths": found, "reason": params.get("reason")}
    if method == "item/permissions/requestApproval":
        arguments = {"permissions": params.get("permissions"), "reason": params.get("reason")}
        return "request_permissions", "other", arguments
    server = params.get("serverName")
    meta = params.get("_meta")
    if isinstance(meta, dict) and meta.get("codex_approval_kind") == "mcp_tool_call":
        named = _TOOL_IN_MESSAGE.search(str(params.get("message") or ""))
        tool = named.group(1) if named else "tool"
        given = meta.get("tool_params")
        return f"mcp__{server}__{tool}", "mcp", given if isinstance(given, dict) else {}
    arguments = {"message": params.get("message"), "mode": params.get("mode")}
    return f"mcp__{server}__elicitation", "mcp", arguments


class Approver:
    """Answers one turn's server requests with the step's gate (None: by policy).
    :attr:`deferred` turns True once the gate deferred a call (the turn is then interrupted)."""

    def __init__(self, gate: ToolGate | None, paths: Mapping[str, list[str]], log: Any) -> None:
        self._gate = gate
        self._paths = paths
        self._log = log
        self.deferred = False

    async def _allowed(self, method: str, params: dict[str, Any], default: bool) -> bool:
        if self._gate is None:
            return default
        call = tool_call(method, params, self._paths)
        decision = await self._gate.decide(call)
        if isinstance(decision, Defer):
            self.deferred = True
        elif isinstance(decision, Deny):
            self._log.info("codex.tool.declined", tool=call.tool, reason=decision.reason[:200])
        return isinstance(decision, Allow)

    async def __call__(self, method: str, params: Any) -> Any:
        """The result for one server->client request; :class:`NotHandled` for the rest."""
        params = params if isinstance(params, dict) else {}
        if method in _DECISIONS:
            accept, decline = _DECISIONS[method]
            return accept if await self._allowed(method, params, True) else decline
        if method == "item/permissions/requestApproval":
            if await self._allowed(method, params, True):
                return {"permissions": params.get("permissions", {}), "scope": "turn"}
            return {"permissions": {}, "scope": "turn"}
        if method == "mcpServer/elicitation/request":
            if await self._allowed(method, params, False):
                return {"action": "accept", "content": {}}
            return {"action": "decline", "content": None}
        if method == "item/tool/requestUserInput":
            return {"answers": {}}
        raise NotHandled(f"jigs runs Codex unattended and does not handle {method!r}")
