""":class:`Usage`: token counts and cost, shared by the event stream and the model protocol.

A frozen pydantic model (:class:`~jigs.policy._record.Record`), the one usage type: the turn
engine, the credential proxy's accounting and the model protocol all count with it;
:mod:`jigs.models` re-exports it.
"""

from jigs.policy._record import Record

__all__ = ["Usage"]


class Usage(Record):
    """Token counts and cost of one call; None where the harness does not report it."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    #: Input tokens read from the provider's prompt cache (included in ``input_tokens``).
    cached_input_tokens: int | None = None
    #: Input tokens written to the provider's prompt cache (Anthropic's cache creation).
    cache_write_tokens: int | None = None
    cost_usd: float | None = None
