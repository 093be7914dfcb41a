""":class:`jigs.steps.AgentResult`, defined on first use so that ``import jigs.steps`` stays
cheap (``dataclasses`` and the records it holds load only when a step builds one).

The class presents itself as ``jigs.steps.AgentResult`` (its ``__module__``), as it always has:
pickles and serialised workflow results name it there. So that ``typing.get_type_hints`` (which
Temporal's and DBOS' converters call on a dataclass) resolves its field types in that module,
defining it also puts ``AgentSessionRef`` and ``Usage`` in ``jigs.steps``' namespace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic

import jigs.steps
from jigs._types import AgentSessionRef
from jigs._usage import Usage
from jigs.steps import OutputT

__all__ = ["AgentResult"]


@dataclass(frozen=True, slots=True)
class AgentResult(Generic[OutputT]):
    """A whole turn: the text, the session to resume, and the structured output (typed as the
    model asked for with ``output=``; None when none was)."""

    text: str
    session: AgentSessionRef | None
    output: OutputT
    usage: Usage = field(default_factory=Usage)
    provider_metadata: dict[str, dict[str, Any]] | None = None


AgentResult.__module__ = "jigs.steps"
_namespace = vars(jigs.steps)
_namespace.setdefault("AgentSessionRef", AgentSessionRef)
_namespace.setdefault("Usage", Usage)
_namespace["AgentResult"] = AgentResult
