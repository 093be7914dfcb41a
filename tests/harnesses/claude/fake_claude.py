"""A fake ``claude`` for the kind's own checks (a missing CLI, a stale session, a missing key or
``IS_SANDBOX``): it prints an init and a result; ``--version`` prints a version. Every run writes
its arguments to a ``.fake-claude-marker`` file in its working directory (the step's worktree: the
only place a sandboxed step may write), so a test can prove the CLI never ran by the marker's
absence. The turn engine's faults (crash, garbage, huge lines, hangs) are tested once for every
kind: tests/core/test_turn_faults.py and the conformance kit.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

MARKER = ".fake-claude-marker"


def emit(event: Mapping[str, object]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main() -> int:
    Path(MARKER).write_text(" ".join(sys.argv[1:]))
    if "--version" in sys.argv:
        print("2.1.332 (Claude Code)")
        return 0
    session = "00000000-0000-4000-8000-000000000001"
    init = {"type": "system", "subtype": "init", "session_id": session, "model": "fake"}
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "fake done",
        "session_id": session,
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
        "total_cost_usd": 0.0,
    }
    emit(init)
    emit(result)
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main())
