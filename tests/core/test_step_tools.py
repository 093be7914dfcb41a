"""``tools=[fn, ...]``: what is refused before a step starts. The tools themselves run through
each kind's real CLI in the conformance kit (``step_tools``: results, errors, ``ask_human``, the
server gone after close; ``tools_of_another_step``: the token and the port, attacked from
another step's agent)."""

from __future__ import annotations

import pytest
from jigs.errors import InvalidInputError


def test_a_tool_without_types_or_a_docstring_is_refused() -> None:
    from jigs.engine._tools import step_tools

    def untyped(x):  # type: ignore[no-untyped-def]
        """Untyped."""

    def undocumented(x: int) -> int:
        return x

    def twice(x: int) -> int:
        """Twice."""
        return x

    for bad in ([untyped], [undocumented], [lambda: None], [twice, twice], "twice"):
        with pytest.raises(InvalidInputError):
            step_tools(bad)
