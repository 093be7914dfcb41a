"""Constants and process-table helpers shared by the codex tests."""

from __future__ import annotations

import contextlib
import os
import signal

KEY_ENV = "JIGS_TEST_CODEX_KEY"
KEY_VALUE = "sk-jigs-test-codex-key-value"


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            state = fh.read().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                rest = fh.read().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if len(rest) >= 3 and rest[0] != "Z" and rest[2] == str(pgid):
            members.append(int(entry))
    return members


def kill_quietly(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def app_server_pid(run_id: str) -> int:
    """The pid of the one app server jigs runs for ``run_id`` (the leader of its group)."""
    from jigs.processes import live_groups

    (pgid,) = [p for p, owner in live_groups().items() if owner == f"codex for run {run_id}"]
    return pgid
