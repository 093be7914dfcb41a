"""A fake ``claude`` for fault injection the real CLI cannot produce on demand.

The mode is the last word of the prompt (the last argument): ``crash`` (stderr, exit 3),
``garbage`` (a non-JSON line), ``bigline`` (a valid 2 MB assistant event, then a result),
``biggarbage`` (a 2 MB non-JSON line), ``hang`` (spawn a sleeping child, then sleep),
``noresult`` (init, then exit 0), ``silent`` (print nothing, sleep), ``ok`` (init and a result). ``--version`` prints a version.
Every run writes its arguments to a ``.fake-claude-marker`` file in its working directory (the
step's worktree: the only place a sandboxed step may write), so a test can prove the CLI never
ran by the marker's absence; ``hang`` writes its child's pid to ``.fake-claude-child.pid``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

MARKER = ".fake-claude-marker"
CHILD_PID = ".fake-claude-child.pid"


def emit(event: Mapping[str, object]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main() -> int:
    Path(MARKER).write_text(" ".join(sys.argv[1:]))
    if "--version" in sys.argv:
        print("2.1.332 (Claude Code)")
        return 0
    mode = sys.argv[-1].split()[-1]
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
    if mode == "silent":
        time.sleep(300)
        return 0
    if mode == "crash":
        sys.stderr.write("fake claude: simulated crash\n")
        return 3
    emit(init)
    if mode == "garbage":
        print("this is not json", flush=True)
        time.sleep(30)
    elif mode == "bigline":
        big = {
            "type": "assistant",
            "message": {"content": [{"type": "text", "text": "x" * 2_000_000}]},
        }
        emit({**big, "session_id": session, "parent_tool_use_id": None})
        emit(result)
    elif mode == "biggarbage":
        sys.stdout.write("y" * 2_000_000 + "\n")
        sys.stdout.flush()
        time.sleep(30)
    elif mode == "hang":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        Path(CHILD_PID).write_text(str(child.pid))
        time.sleep(300)
    elif mode == "noresult":
        pass
    else:
        emit(result)
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main())
