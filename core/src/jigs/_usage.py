""":class:`Usage`: token counts and cost, shared by the event stream and the model protocol.

A :class:`~jigs._record.Record` (no pydantic), because the turn engine builds it while a step in a
fresh process is still starting; :mod:`jigs.models` re-exports it.
"""

from jigs._record import Record

__all__ = ["Usage"]


class Usage(Record):
    """Token counts and cost of one call; None where the harness does not report it."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cached_input_tokens: int | None = None
    cost_usd: float | None = None
