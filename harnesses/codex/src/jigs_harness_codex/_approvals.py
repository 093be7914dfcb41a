"""How an unattended step answers the app server's requests: by policy, never by blocking.

Commands, file changes and permission requests are approved (the thread runs with
``approvalPolicy: "never"``, so these only arrive if Codex asks anyway). A step may pass
``provider_options={"codex": {"approve": fn}}``; ``fn(method, params)`` (sync or async) returning
False declines that one request. MCP elicitations are declined (nobody is there to fill a form),
questions to the user get no answers, and anything else gets a JSON-RPC "method not found" error.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from jigs_harness_codex._rpc import NotHandled

__all__ = ["ApprovalHook", "answer_by_policy"]

#: ``approve(method, params) -> bool`` (or an awaitable of it), from the call's provider options.
ApprovalHook = Callable[[str, Any], Any]

_ACCEPT_DECLINE: dict[str, tuple[Any, Any]] = {
    "item/commandExecution/requestApproval": ({"decision": "accept"}, {"decision": "decline"}),
    "item/fileChange/requestApproval": ({"decision": "accept"}, {"decision": "decline"}),
    "execCommandApproval": ({"decision": "approved"}, {"decision": "denied"}),
    "applyPatchApproval": ({"decision": "approved"}, {"decision": "denied"}),
}


async def _approved(hook: ApprovalHook | None, method: str, params: Any) -> bool:
    if hook is None:
        return True
    verdict = hook(method, params)
    if inspect.isawaitable(verdict):
        verdict = await verdict
    return bool(verdict)


async def answer_by_policy(method: str, params: Any, hook: ApprovalHook | None) -> Any:
    """The result for one server->client request. Raises :class:`NotHandled` for a request
    jigs does not handle (the client answers it with a JSON-RPC error)."""
    if method in _ACCEPT_DECLINE:
        accept, decline = _ACCEPT_DECLINE[method]
        return accept if await _approved(hook, method, params) else decline
    if method == "item/permissions/requestApproval":
        requested = params.get("permissions", {}) if isinstance(params, dict) else {}
        if await _approved(hook, method, params):
            return {"permissions": requested, "scope": "turn"}
        return {"permissions": {}, "scope": "turn"}
    if method == "mcpServer/elicitation/request":
        return {"action": "decline", "content": None}
    if method == "item/tool/requestUserInput":
        return {"answers": {}}
    raise NotHandled(f"jigs runs Codex unattended and does not handle {method!r}")
