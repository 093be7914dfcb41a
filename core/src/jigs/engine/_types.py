"""Plain data that crosses the workflow/step boundary: run metadata and session references.

Both are frozen pydantic models (:class:`~jigs.policy._record.Record`) that round-trip through JSON
(``model_dump()`` / ``model_validate()``, ``model_dump_json()`` / ``model_validate_json()``),
pickle, and Temporal's pydantic data converter. Building one from bad data raises
:class:`~jigs.errors.InvalidInputError` naming the field, never echoing the value.
"""

from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from jigs.errors import InvalidInputError
from jigs.policy._record import Record

if TYPE_CHECKING:
    from jigs.errors import JigsError

__all__ = ["AgentSessionRef", "RunMetadata"]


class _Data(Record):
    @classmethod
    def _invalid(cls, message: str) -> "JigsError":
        return InvalidInputError(
            f"invalid {cls.__name__}: {message} (the value is not shown)", argument=cls.__name__
        )


class RunMetadata(_Data):
    """What jigs needs to know about the workflow run a step belongs to.

    ``workflow_run_id`` keys the durable per-run state (session stores) and names the lock holder.
    Any non-empty id a durable engine uses is accepted (``review/PR-12``, a UUID, an id with
    spaces); jigs encodes it before using it in a path.
    """

    #: The durable engine's id of the workflow run (a Temporal workflow id, a DBOS workflow id).
    workflow_run_id: Annotated[str, Field(min_length=1, max_length=4096)]
    #: The workflow's name (informational: jigs records it, nothing depends on it).
    workflow_name: str | None = None
    #: The step's name (the `jigs.step_name` attribute of the step's trace span).
    step_name: str | None = None
    #: The engine's attempt number of the step (1 for the first try), when it has one.
    attempt: Annotated[int, Field(ge=1)] | None = None


class AgentSessionRef(_Data):
    """A durable agent session a later step may resume.

    ``descriptor`` is the canonical ``describe()`` string of the descriptor the session ran under;
    :func:`jigs.steps.agent_session` resumes only when it matches the current one. ``store_key``
    and ``digest`` (optional; refs without them still load) let another machine fetch the
    session from the session store and prove it is the one this step left.
    """

    harness: str
    id: Annotated[str, Field(min_length=1)]
    descriptor: str
    #: The session store key of the session's manifest (None: the session lives only on the
    #: machine that ran it, as refs recorded before session stores did).
    store_key: Annotated[str, Field(min_length=1, max_length=1024)] | None = None
    #: ``sha256:<hex>`` of that manifest: a resume refuses a store copy that does not match.
    digest: Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")] | None = None
