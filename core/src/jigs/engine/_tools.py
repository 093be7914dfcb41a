"""A step's Python tools (``tools=[fn, ...]``): each function checked and described once, before
the step acquires anything.

A tool is a plain sync or async function with a typed signature: pydantic builds the model of
its arguments (and so the JSON schema the agent sees), its docstring is the description, its
``__name__`` the tool's name. :mod:`jigs.engine._tool_server` serves them to the agent.

One ready tool ships here: :func:`ask_human`. Its call does not run in the worker: the tool
server records the question as a pending call (category ``"question"``), tells the agent to end
its turn, and the step raises :class:`~jigs.errors.ApprovalPending` when the turn ends, the
deferred approvals' mechanism: an engine helper waits for the answer and resumes the session
with it.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, create_model

from jigs.errors import InvalidInputError

__all__ = ["ASKED", "TOKEN_ENV", "TOOLS_SERVER", "StepTool", "ask_human", "step_tools"]

#: The name the step's tools are served under (``mcp__tools__<name>`` for Claude Code).
TOOLS_SERVER = "tools"
#: The agent-side variable holding the tool server's step token (read by its CLI's MCP client).
TOKEN_ENV = "JIGS_TOOLS_TOKEN"
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


@dataclass(frozen=True)
class StepTool:
    """One tool: its name, description, arguments model and the function itself."""

    name: str
    description: str
    arguments: type[BaseModel]
    fn: Callable[..., Any]
    is_async: bool
    #: :func:`ask_human`: the server records the question instead of calling ``fn``.
    asks_human: bool = False

    def schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments (an object, never ``None``)."""
        return self.arguments.model_json_schema()


#: What the agent reads after :func:`ask_human`: the turn is to end now.
ASKED = (
    "Your question is with a human now. End your turn: reply with one short line saying you "
    "are waiting, and call no other tool. Their answer will be the next message you receive."
)


def ask_human(question: str) -> str:
    """Ask a human a question you cannot answer from the repository or your tools (a decision,
    a preference, a missing fact). The answer comes later, as the next message: after calling
    this, end your turn at once."""
    # the step's tool server answers this tool itself (StepTool.asks_human): the question
    # waits in the workflow, not in a thread of the worker
    raise InvalidInputError(
        "ask_human is a tool for the agent: pass it in a step's tools=[...], do not call it",
        argument="tools",
    )


def _refuse(message: str) -> InvalidInputError:
    return InvalidInputError(message, argument="tools")


def _arguments(fn: Callable[..., Any], name: str) -> type[BaseModel]:
    """A pydantic model of ``fn``'s parameters; every parameter must be annotated."""
    try:
        hints = get_type_hints(fn)
        signature = inspect.signature(fn)
    except (NameError, TypeError, ValueError) as exc:
        raise _refuse(f"the tool {name!r} has a signature jigs cannot read ({exc})") from None
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise _refuse(
                f"the tool {name!r} takes *args, **kwargs or positional-only parameters; give it "
                f"named, typed parameters (the agent calls it with a JSON object)"
            )
        if param.name not in hints:
            raise _refuse(
                f"the parameter {param.name!r} of the tool {name!r} has no type annotation; "
                f"annotate it (pydantic builds the schema the agent sees from it)"
            )
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (hints[param.name], default)
    config = ConfigDict(extra="forbid", arbitrary_types_allowed=False)
    try:
        return create_model(f"{name}_arguments", __config__=config, **fields)
    except Exception as exc:  # pydantic cannot build a schema for a parameter's type
        raise _refuse(
            f"the tool {name!r} has a parameter type pydantic cannot use ({exc})"
        ) from None


def _one(fn: object) -> StepTool:
    if not callable(fn) or isinstance(fn, type):
        raise _refuse(f"tools must be functions, got {type(fn).__name__}")
    name = getattr(fn, "__name__", "")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise _refuse(
            "a tool's name is its function's __name__: letters, digits, '_' or '-', at most 64, "
            "starting with a letter (a lambda has none: use a def)"
        )
    description = inspect.getdoc(fn)
    if not description:
        raise _refuse(f"the tool {name!r} has no docstring; it is the description the agent reads")
    arguments = _arguments(fn, name)
    try:
        arguments.model_json_schema()
    except Exception as exc:
        raise _refuse(f"the tool {name!r} has arguments without a JSON schema ({exc})") from None
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an object whose __call__ is async
    )
    return StepTool(name, description, arguments, fn, is_async, asks_human=fn is ask_human)


def step_tools(tools: object) -> list[StepTool]:
    """The checked tools (empty for ``None``); raises :class:`~jigs.errors.InvalidInputError`
    naming the tool and what to fix."""
    if tools is None:
        return []
    if isinstance(tools, str | bytes) or not isinstance(tools, Sequence):
        raise _refuse("tools must be a list of functions")
    checked = [_one(fn) for fn in tools]
    names = [tool.name for tool in checked]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate is not None:
        raise _refuse(f"two tools are named {duplicate!r}; each needs a name of its own")
    return checked
