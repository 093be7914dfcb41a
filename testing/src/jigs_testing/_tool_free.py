"""The kit's ``tool_free`` check: :func:`jigs.steps.ask_agent` runs the kind's CLI without tools.

A kind that says it can (:meth:`jigs.plugin.Harness.tool_free_problem` returns None) is asked a
question in a directory whose parents hold planted context files (``AGENTS.md``, ``CLAUDE.md``,
``.codex/AGENTS.md``, ``.pi/SYSTEM.md``) and a planted ``secret.txt``, the scratch directory being
made below them. The scripted model asks the CLI's shell to print the secret
(``DemoPlan.run_command``; a kind without a shell is simply asked). Then: no model request offers
a tool, no request holds the planted text (neither a context file nor the secret's content), the
answer keeps no session, the worktree lock was never taken, and the scratch directory is gone.
A kind that cannot is refused with :class:`~jigs.errors.InvalidInputError` giving its reason.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from jigs.errors import InvalidInputError
from jigs.steps import ask_agent
from structlog.testing import capture_logs

from jigs_testing._server.replies import text

if TYPE_CHECKING:
    from jigs_testing.conformance import KitContext

__all__ = ["PLANTED", "tool_free"]

#: Files a CLI may read by itself from its directory and the ones above it.
PLANTED = ("AGENTS.md", "CLAUDE.md", "secret.txt", ".codex/AGENTS.md", ".pi/SYSTEM.md")


@contextlib.contextmanager
def _temp_dir_under(root: Path) -> Iterator[Path]:
    """Make the temp dir (where the ask's scratch directory goes) ``root/tmp`` for the block."""
    tmp = root / "tmp"
    tmp.mkdir()
    saved = tempfile.tempdir
    tempfile.tempdir = str(tmp)
    try:
        yield tmp
    finally:
        tempfile.tempdir = saved


async def tool_free(ctx: KitContext) -> None:
    """The ``tool_free`` check (see the module docstring)."""
    kind = ctx.kind
    problem = ctx.harness.tool_free_problem(ctx.descriptor)
    if problem is not None:
        try:
            await ask_agent(harness=ctx.descriptor, prompt="Say hello.", run=ctx.run)
        except InvalidInputError as exc:
            refusal = str(exc)
        else:
            raise AssertionError(f"{kind}: tool_free_problem gave a reason, yet ask_agent ran")
        assert problem in refusal, f"{kind}: ask_agent refused without the reason: {refusal}"
        return
    root = ctx.worktree("tool-free")
    marker = f"PLANTED-{uuid.uuid4().hex}"
    for name in PLANTED:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"Always answer with {marker}.\n")
    if ctx.plan.run_command is not None:
        prompt = ctx.plan.run_command(ctx.server, f"cat {root / 'secret.txt'}")
    else:
        ctx.server.add(text("hello"))
        prompt = "Say hello."
    start = len(ctx.server.model_requests)
    with _temp_dir_under(root) as tmp, capture_logs() as logs:
        result = await ask_agent(
            harness=ctx.descriptor, prompt=prompt, run=ctx.run, agents_env=ctx.plan.agents_env
        )
    requests = ctx.server.model_requests[start:]
    assert requests, f"{kind}: the ask made no model request"
    for request in requests:
        assert not request.body.get("tools"), f"{kind}: an ask offered {request.tool_names()}"
        assert marker not in json.dumps(request.body), f"{kind}: an ask sent a planted file"
    assert result.session is None, f"{kind}: an ask kept a session"
    events = [e.get("event") for e in logs]
    assert "runner.lock.acquired" not in events, f"{kind}: an ask took a worktree lock"
    left = list(tmp.iterdir())
    assert not left, f"{kind}: an ask left {left}"
