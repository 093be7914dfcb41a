"""Plain data that crosses the workflow/step boundary: run metadata and session references.

Both are frozen pydantic models that round-trip through JSON (``model_dump(mode="json")`` /
``model_validate``) and pickle. Building one from bad data raises
:class:`~jigs.errors.InvalidInputError` naming the field, never a raw pydantic error that would
echo the value.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["AgentSessionRef", "RunMetadata"]


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            from jigs.errors import InvalidInputError

            fields = sorted({".".join(map(str, e["loc"])) or "(all)" for e in exc.errors()})
            raise InvalidInputError(
                f"invalid {type(self).__name__}: check {', '.join(fields)} (the value is not "
                f"shown)",
                argument=type(self).__name__,
            ) from None


class RunMetadata(_Data):
    """What jigs needs to know about the workflow run a step belongs to.

    ``workflow_run_id`` keys the durable per-run state (session stores) and names the lock holder.
    Any non-empty id a durable engine uses is accepted (``review/PR-12``, a UUID, an id with
    spaces); jigs encodes it before using it in a path.
    """

    workflow_run_id: str = Field(min_length=1, max_length=4096)
    workflow_name: str | None = None
    step_name: str | None = None
    #: The engine's attempt number of the step (1 for the first try), when it has one.
    attempt: int | None = Field(default=None, ge=1)


class AgentSessionRef(_Data):
    """A durable agent session a later step may resume.

    ``descriptor`` is the canonical ``describe()`` string of the descriptor the session ran under;
    :func:`jigs.steps.agent_session` resumes only when it matches the current one. ``store_key``
    and ``digest`` (optional; refs without them still load) let another machine fetch the
    session from the session store and prove it is the one this step left.
    """

    harness: str
    id: str = Field(min_length=1)
    descriptor: str
    #: The session store key of the session's manifest (None: the session lives only on the
    #: machine that ran it, as refs recorded before session stores did).
    store_key: str | None = Field(default=None, min_length=1, max_length=1024)
    #: ``sha256:<hex>`` of that manifest: a resume refuses a store copy that does not match.
    digest: str | None = Field(default=None, pattern=r"^sha256:[0-9a-f]{64}$")
