"""Helpers a harness kind may use, besides the contract itself (:mod:`jigs.plugin`).

Everything here is public and stable within a contract major: a kind imports nothing private
from jigs (``jigs._*``), so a core that moves its internals does not break it.

- files: :func:`make_dir` (a fresh 0700 directory), :func:`remove_tree`, :func:`write_atomic`;
- descriptors: :func:`check_env_name` / :func:`check_url` (the secret rules for a variable name
  and a URL, raising ``ValueError`` that never echoes the value), :func:`shown` (a value as an
  error message may show it);
- secrets: :func:`secret_values` (the values in an environment that must never be shown) and
  :func:`redact_known` (a text with every secret the step knows masked);
- the CLI's output: :func:`decode_line` (one JSON line, or
  :class:`~jigs.errors.AgentOutputError` naming it, as the turn engine decodes it);
- logs: :func:`timed` (log an event with the seconds a block took);
- the tool gate: :func:`gated_call` (a CLI's tool call as the step's gate sees it);
- skills: :func:`check_skill_path` (a descriptor's ``skills`` entry), :func:`copy_skills` (into
  a step's private dir), :func:`skills_digest` (for ``describe()``), :func:`skill_name`.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from jigs.engine._gate import GatedCall
from jigs.engine._logging import timed
from jigs.errors import AgentOutputError
from jigs.policy import _secrets
from jigs.policy._files import make_dir, remove_tree, write_atomic
from jigs.policy._redact import secret_values
from jigs.policy._secrets import check_env_name, check_url, redact_known, shown
from jigs.policy._skills import check_skill_path, copy_skills, skill_name, skills_digest

__all__ = [
    "check_env_name",
    "check_skill_path",
    "check_url",
    "copy_skills",
    "decode_line",
    "gated_call",
    "make_dir",
    "redact_known",
    "remove_tree",
    "secret_values",
    "shown",
    "skill_name",
    "skills_digest",
    "timed",
    "write_atomic",
]


def decode_line(
    raw: bytes, *, kind: str, number: int, session_id: str | None = None
) -> dict[str, Any]:
    """One output line as a JSON object, or :class:`AgentOutputError` naming the line (what it
    shows of the line has every known secret value redacted: a CLI may print its environment)."""
    try:
        message = json.loads(raw)
    except ValueError:
        message = None
    if not isinstance(message, dict):
        # redact before cutting, so a secret that straddles the cut is not half shown
        line = _secrets.redact_known(raw[:4096].decode("utf-8", errors="replace"))[:120]
        raise AgentOutputError(
            f"the {kind} CLI printed a line that is not a JSON object (line {number}): "
            f"{line!r}; is the resolved executable really the {kind} CLI, and does nothing else "
            f"write to its stdout? (run `jigs doctor`)",
            kind=kind,
            line=number,
            session_id=session_id,
        )
    return message


def gated_call(
    kind: str,
    tool: str,
    arguments: object,
    call_id: str,
    *,
    shell: Collection[str],
    edits: Collection[str],
) -> GatedCall:
    """A CLI's tool call as the step's gate sees it (:class:`~jigs.steps.GatedCall`), its
    category from the kind's own tool names: a tool in ``shell`` runs commands (``"shell"``),
    one in ``edits`` writes files (``"file_edit"``), ``mcp__<server>__<tool>`` is an MCP
    server's (``"mcp"``), anything else ``"other"``. ``arguments`` that are not a JSON object
    are kept as ``{"input": arguments}``. Never raises for a well-typed call."""
    category: Any = "other"
    if tool in shell:
        category = "shell"
    elif tool in edits:
        category = "file_edit"
    elif tool.startswith("mcp__"):
        category = "mcp"
    return GatedCall(
        kind=kind,
        tool=tool,
        category=category,
        arguments=arguments if isinstance(arguments, dict) else {"input": arguments},
        call_id=call_id,
    )
