"""Plain data that crosses the workflow/step boundary: run metadata and session references."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AgentSessionRef", "RunMetadata"]


class RunMetadata(BaseModel):
    """What jigs needs to know about the workflow run a step belongs to.

    ``workflow_run_id`` keys the durable per-run state (session stores) and names the lock holder.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    workflow_run_id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._:@+-]+$")
    workflow_name: str | None = None
    step_name: str | None = None


class AgentSessionRef(BaseModel):
    """A durable agent session a later step may resume.

    ``descriptor`` is the canonical ``describe()`` string of the descriptor the session ran under;
    :func:`jigs.steps.agent_session` resumes only when it matches the current one.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    harness: str
    id: str = Field(min_length=1)
    descriptor: str
