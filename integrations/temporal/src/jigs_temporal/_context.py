"""``RunMetadata`` from the running Temporal activity."""

from __future__ import annotations

from jigs import RunMetadata
from jigs.errors import InvalidInputError

__all__ = ["run_metadata"]


def run_metadata() -> RunMetadata:
    """The :class:`~jigs.RunMetadata` of the activity running now: ``workflow_run_id`` is the
    workflow id, ``workflow_name`` the workflow type, ``step_name`` the activity type and
    ``attempt`` Temporal's attempt number (1 for the first; a retry after a worker died counts
    too). Raises :class:`~jigs.errors.InvalidInputError` outside an activity."""
    from temporalio import activity

    if not activity.in_activity():
        raise InvalidInputError(
            "jigs_temporal.run_metadata() was called outside a Temporal activity; call it from "
            "an activity, or build RunMetadata(workflow_run_id=...) yourself",
            argument="run",
        )
    info = activity.info()
    return RunMetadata(
        workflow_run_id=info.workflow_id or info.activity_id,
        workflow_name=info.workflow_type,
        step_name=info.activity_type,
        attempt=max(info.attempt, 1),
    )
