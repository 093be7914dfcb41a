"""Structured output, once for every kind: the prompt instruction and the one JSON extractor.

A kind with a native mode (Claude ``--json-schema``, Codex's output schema) gets the schema on its
:class:`~jigs.plugin.TurnSpec`; any other kind is *prompted*: :func:`instruction` is appended to the
prompt. Either way the core reads the answer with :func:`extract` (the whole text, a fenced block,
or the outermost ``{...}`` slice, checked against the schema's top-level shape), validates it with
the pydantic model, and re-asks once in the same session with :func:`reask_prompt` when it does not
fit (:func:`jigs.steps.run_agent`).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["extract", "instruction", "reask_prompt"]

_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)\n\s*```", re.DOTALL)
_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
}


def instruction(schema: dict[str, Any]) -> str:
    """The text appended to the prompt when a structured answer is asked for."""
    return (
        "\n\nWhen you have finished, reply with only one JSON object (no prose, no code fence) "
        "that matches this JSON schema:\n" + json.dumps(schema, separators=(",", ":"))
    )


def reask_prompt(problem: str, schema: dict[str, Any]) -> str:
    """The follow-up prompt when the answer did not fit."""
    return (
        f"Your last answer could not be used: {problem}. Reply again with only one JSON object "
        "(no prose, no code fence) that matches this JSON schema:\n"
        + json.dumps(schema, separators=(",", ":"))
    )


def _candidates(text: str) -> list[str]:
    stripped = text.strip()
    found = [stripped]
    found += [m.group(1).strip() for m in _FENCE.finditer(text)]
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        found.append(stripped[start : end + 1])
    return found


def _shape_problem(value: Any, schema: dict[str, Any]) -> str | None:
    expected = schema.get("type")
    if isinstance(expected, str) and expected in _TYPES:
        python_type = _TYPES[expected]
        if not isinstance(value, python_type) or (
            expected in {"integer", "number"} and isinstance(value, bool)
        ):
            return f"the answer is a JSON {type(value).__name__}, not a JSON {expected}"
    if isinstance(value, dict):
        required = schema.get("required")
        missing = [k for k in required if k not in value] if isinstance(required, list) else []
        if missing:
            return f"the JSON object lacks the required key(s) {', '.join(map(str, missing))}"
    return None


def extract(text: str, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """``(value, None)`` when ``text`` holds a JSON answer of the schema's top-level shape, else
    ``(None, problem)``."""
    problem = "the answer is not JSON"
    for candidate in _candidates(text):
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        shape = _shape_problem(value, schema)
        if shape is None:
            return value, None
        problem = shape
    return None, problem
