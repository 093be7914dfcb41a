""":class:`Usage`: token counts and cost, shared by the event stream and the model protocol.

A :class:`~jigs._record.Record`; :mod:`jigs.models` re-exports it.
"""

# no `from __future__ import annotations`: msgspec reads these classes' annotations as objects,
# never by looking the module up in sys.modules (a Temporal workflow sandbox does not have it)

from jigs._record import Record

__all__ = ["Usage"]


class Usage(Record):
    """Token counts and cost of one call; None where the harness does not report it."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cached_input_tokens: int | None = None
    cost_usd: float | None = None
