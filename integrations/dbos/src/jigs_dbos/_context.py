"""``RunMetadata`` from the DBOS context of the running step."""

from __future__ import annotations

from contextvars import ContextVar

from jigs import RunMetadata
from jigs.errors import InvalidInputError

__all__ = ["current_step_name", "run_metadata"]

#: The name :func:`jigs_dbos.step` registered the running step under (DBOS does not expose it).
current_step_name: ContextVar[str | None] = ContextVar("jigs_dbos_step_name", default=None)


def run_metadata(*, workflow_name: str | None = None) -> RunMetadata:
    """The :class:`~jigs.RunMetadata` of the DBOS step running now.

    ``workflow_run_id`` is ``DBOS.workflow_id``; ``step_name`` the name the step was registered
    under by :func:`jigs_dbos.step` (None for a plain ``@DBOS.step``); ``attempt`` is DBOS'
    zero-based ``step_status.current_attempt`` plus one (1 for the first try; a step re-run after
    a worker crash starts again at 1, DBOS counts those on the workflow). Raises
    :class:`~jigs.errors.InvalidInputError` outside a DBOS workflow.
    """
    from dbos import DBOS

    workflow_id = DBOS.workflow_id
    if not workflow_id:
        raise InvalidInputError(
            "jigs_dbos.run_metadata() was called outside a DBOS workflow; call it from a step, "
            "or build RunMetadata(workflow_run_id=...) yourself",
            argument="run",
        )
    status = DBOS.step_status
    attempt = None
    if status is not None and status.current_attempt is not None:
        attempt = status.current_attempt + 1
    return RunMetadata(
        workflow_run_id=workflow_id,
        workflow_name=workflow_name,
        step_name=current_step_name.get(),
        attempt=attempt or 1,
    )
