"""How an unattended step answers the app server's requests: by policy, never by blocking.

The thread runs with ``approvalPolicy: "never"``, so approval requests only arrive if Codex asks
anyway; they are approved unless the step passes
``provider_options={"codex": {"approve_tool": fn}}``. ``fn(tool_name, arguments)`` (sync or
async) returns True to allow, False to decline, or a string to decline with that reason (logged:
Codex's decline carries no message). Requests map onto tool names as the events name them:

- a command (``item/commandExecution/requestApproval``, ``execCommandApproval``) ->
  ``"exec_command"`` with ``{"command", "cwd"}``;
- a file change (``item/fileChange/requestApproval``, ``applyPatchApproval``) ->
  ``"apply_patch"`` with ``{"paths", "reason"}``;
- extra permissions (``item/permissions/requestApproval``) -> ``"request_permissions"`` with
  ``{"permissions", "reason"}``;
- an MCP server's elicitation -> ``"mcp__<server>__elicitation"`` with ``{"message", "mode"}``
  (declined when no callback is given: nobody is there to fill a form).

Questions to the user get no answers; anything else gets a JSON-RPC "method not found" error.
A callback that raises fails the turn with its exception (the server gets an error reply first).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from jigs.errors import InvalidInputError

from jigs_harness_codex._rpc import NotHandled

__all__ = ["ApproveTool", "Approver", "turn_options"]

#: ``approve_tool(tool_name, arguments) -> bool | str`` (or an awaitable of it).
ApproveTool = Callable[[str, dict[str, Any]], "bool | str | Awaitable[bool | str]"]

_OPTIONS = frozenset({"approve_tool", "effort"})
_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high", "xhigh"})
_DECISIONS: dict[str, tuple[Any, Any]] = {
    "item/commandExecution/requestApproval": ({"decision": "accept"}, {"decision": "decline"}),
    "item/fileChange/requestApproval": ({"decision": "accept"}, {"decision": "decline"}),
    "execCommandApproval": ({"decision": "approved"}, {"decision": "denied"}),
    "applyPatchApproval": ({"decision": "approved"}, {"decision": "denied"}),
}


def turn_options(options: Mapping[str, Any]) -> tuple[ApproveTool | None, str | None]:
    """The step's codex provider options for one turn: ``(approve_tool, effort)``.

    Raises :class:`InvalidInputError` (``argument="provider_options"``) for an unknown key, the
    old name ``approve``, a callback that is not callable or an unknown effort.
    """
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        renamed = ""
        if "approve" in unknown:
            renamed = " (`approve` is now `approve_tool(tool_name, arguments)`)"
        raise InvalidInputError(
            f"provider_options['codex'] has unknown key(s) {unknown}{renamed}; the codex kind "
            f"reads {sorted(_OPTIONS)} (and on_event)",
            argument="provider_options",
        )
    approve = options.get("approve_tool")
    if approve is not None and not callable(approve):
        raise InvalidInputError(
            f"provider_options['codex']['approve_tool'] must be a function "
            f"fn(tool_name, arguments), not {type(approve).__name__}",
            argument="provider_options",
        )
    effort = options.get("effort")
    if effort is not None and effort not in _EFFORTS:
        raise InvalidInputError(
            f"provider_options['codex']['effort'] must be one of {sorted(_EFFORTS)}",
            argument="provider_options",
        )
    return approve, effort


def _tool(method: str, params: dict[str, Any], paths: Mapping[str, list[str]]) -> tuple[str, Any]:
    if method in ("item/commandExecution/requestApproval", "execCommandApproval"):
        return "exec_command", {"command": params.get("command"), "cwd": params.get("cwd")}
    if method == "applyPatchApproval":
        changes = params.get("fileChanges")
        names = sorted(changes) if isinstance(changes, dict) else []
        return "apply_patch", {"paths": names, "reason": params.get("reason")}
    if method == "item/fileChange/requestApproval":
        found = paths.get(str(params.get("itemId")), [])
        return "apply_patch", {"paths": found, "reason": params.get("reason")}
    if method == "item/permissions/requestApproval":
        return "request_permissions", {
            "permissions": params.get("permissions"),
            "reason": params.get("reason"),
        }
    server = params.get("serverName")
    return f"mcp__{server}__elicitation", {
        "message": params.get("message"),
        "mode": params.get("mode"),
    }


class Approver:
    """Answers one turn's server requests with the step's ``approve_tool`` (None: by policy)."""

    def __init__(
        self, approve: ApproveTool | None, paths: Mapping[str, list[str]], log: Any
    ) -> None:
        self._approve = approve
        self._paths = paths
        self._log = log

    async def _allowed(self, method: str, params: dict[str, Any], default: bool) -> bool:
        if self._approve is None:
            return default
        name, arguments = _tool(method, params, self._paths)
        verdict = self._approve(name, arguments)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if isinstance(verdict, str):
            self._log.info("codex.tool.declined", tool=name, reason=verdict[:200])
            return False
        return bool(verdict)

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
