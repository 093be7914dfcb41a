""":class:`jigs.steps.AgentResult`, defined on first use (see ``jigs.steps.__getattr__``).

A frozen, generic pydantic model (``AgentResult[MyOutput]`` validates ``output`` as
``MyOutput``). The class presents itself as ``jigs.steps.AgentResult`` (its ``__module__``), as it
always has: pickles and serialised workflow results name it there; defining it also puts
``AgentSessionRef`` and ``Usage`` in ``jigs.steps``' namespace for ``typing.get_type_hints``.
"""

from __future__ import annotations

from typing import Any, Generic

from pydantic import BaseModel, Field

import jigs.steps
from jigs._types import AgentSessionRef, _Data
from jigs._usage import Usage
from jigs.steps import OutputT

__all__ = ["AgentResult"]


class AgentResult(_Data, Generic[OutputT]):
    """A whole turn: the text, the session to resume, and the structured output (typed as the
    model asked for with ``output=``; None when none was)."""

    text: str
    session: AgentSessionRef | None
    output: OutputT
    usage: Usage = Field(default_factory=Usage)
    provider_metadata: dict[str, dict[str, Any]] | None = None


# ``OutputT``'s bound names BaseModel, which jigs.steps imports for type checking only
AgentResult.model_rebuild(_types_namespace={"BaseModel": BaseModel})
AgentResult.__module__ = "jigs.steps"
_namespace = vars(jigs.steps)
_namespace.setdefault("AgentSessionRef", AgentSessionRef)
_namespace.setdefault("Usage", Usage)
_namespace["AgentResult"] = AgentResult
