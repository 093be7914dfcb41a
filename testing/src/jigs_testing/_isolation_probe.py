"""Pieces of the conformance kit's isolation checks: a worker process that runs one step, the
commands the agent runs through its own shell tool, and how their output is read back.

A *worker* is a fresh Python process (``python -c WORKER_SCRIPT ARGS``) that runs one
:func:`jigs.steps.run_agent` step, the way a durable-workflow worker does; the kit signals it
mid-turn. :data:`DESCENDANTS` is the shell command that starts a ``sleep`` in every way a
detaching process can (plain background, ``setsid``, ``nohup``, a double fork) and then sleeps
in the foreground, so the turn is mid-tool when the signal arrives. :func:`view_command` is a
command that lists every process the agent can see and reads each one's environment, reporting
canaries by the digest of their values (the command never holds a canary value itself).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "DESCENDANTS",
    "RESET_SIGINT",
    "SLEEPERS",
    "VIEW_BEGIN",
    "VIEW_END",
    "WORKER_SCRIPT",
    "SeenProcess",
    "boot_ticks",
    "parse_view",
    "sleepers",
    "view_command",
]

#: Every detaching form the issue names; ``SLEEPERS`` sleeps in all once the command runs.
DESCENDANTS = (
    "sleep 300 >/dev/null 2>&1 & "
    "setsid sleep 300 >/dev/null 2>&1 & "
    "nohup sleep 300 >/dev/null 2>&1 & "
    "sh -c 'sleep 300 >/dev/null 2>&1 &' & "
    "sleep 300"
)
SLEEPERS = 5

#: The first lines of every worker the kit starts. A process started with SIGINT ignored (a
#: shell's ``cmd &``, a CI runner, a script's background job) passes that on through exec, and
#: Python then keeps ignoring it instead of raising KeyboardInterrupt: the kit's SIGINTed worker
#: would live on and the failure would blame the kind. Reset it to what a foreground Python has.
RESET_SIGINT = """
import signal
signal.signal(signal.SIGINT, signal.default_int_handler)
"""

WORKER_SCRIPT = (
    RESET_SIGINT
    + """
import json, sys
import anyio
from jigs import harnesses
from jigs.engine._types import RunMetadata
from jigs.steps import run_agent

args = json.loads(sys.argv[1])

async def main():
    await run_agent(
        harness=harnesses.loads(args["descriptor"]),
        cwd=args["cwd"],
        prompt=args["prompt"],
        run=RunMetadata(workflow_run_id=args["run"]),
        agents_env=tuple(args["agents_env"]),
    )

anyio.run(main)
"""
)

VIEW_BEGIN = "JIGS-PROCESS-VIEW-BEGIN"
VIEW_END = "JIGS-PROCESS-VIEW-END"

_VIEW = """
import hashlib, os
bad = set(%r)
print(%r)
for pid in sorted(int(e) for e in os.listdir("/proc") if e.isdigit()):
    try:
        start = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19]
        argv0 = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")[0]
    except (OSError, IndexError):
        continue
    name = os.path.basename(argv0.decode(errors="replace")) or "-"
    try:
        pairs = [e.split(b"=", 1) for e in open(f"/proc/{pid}/environ", "rb").read().split(b"\\0")]
    except OSError as exc:
        print(pid, start, name, "environ=" + type(exc).__name__, "canaries=-")
        continue
    pairs = [p for p in pairs if len(p) == 2]
    hits = sorted({p[0].decode(errors="replace") for p in pairs
                   if hashlib.sha256(p[1]).hexdigest() in bad})
    print(pid, start, name, "environ=%%d" %% len(pairs), "canaries=" + (",".join(hits) or "none"))
print(%r)
"""


def view_command(canary_digests: Iterable[str]) -> str:
    """A shell command listing ``pid start-ticks argv0 environ=N canaries=NAMES`` for every
    process visible in ``/proc``, between :data:`VIEW_BEGIN` and :data:`VIEW_END`."""
    script = _VIEW % (sorted(canary_digests), VIEW_BEGIN, VIEW_END)
    encoded = base64.b64encode(script.encode()).decode()
    # the system's python3: the agent's sandbox shows the system, not the worker's Python
    return f"python3 -I -S -c \"import base64; exec(base64.b64decode('{encoded}'))\""


@dataclass(frozen=True, slots=True)
class SeenProcess:
    """One line of the agent's process listing."""

    pid: int
    start: int
    name: str
    environ: str
    canaries: str


def parse_view(text: str) -> list[SeenProcess] | None:
    """The listing in ``text`` (the last complete one), or None when there is none."""
    begin = text.rfind(VIEW_BEGIN)
    end = text.find(VIEW_END, begin + 1)
    if begin < 0 or end < 0:
        return None
    seen = []
    for line in text[begin + len(VIEW_BEGIN) : end].splitlines():
        fields = line.split()
        if len(fields) == 5 and fields[0].isdigit() and fields[1].isdigit():
            pid, start, name, environ, canaries = fields
            seen.append(
                SeenProcess(
                    int(pid),
                    int(start),
                    name,
                    environ.removeprefix("environ="),
                    canaries.removeprefix("canaries="),
                )
            )
    return seen


def boot_ticks() -> int:
    """Now, in the clock ticks since boot that ``/proc/<pid>/stat`` start times use."""
    with open("/proc/uptime", encoding="ascii") as fh:
        uptime = float(fh.read().split()[0])
    return int(uptime * os.sysconf("SC_CLK_TCK"))


def sleepers(procs: Iterable[tuple[int, str]]) -> list[tuple[int, str]]:
    """The ``sleep 300`` processes among ``procs``."""
    found = []
    for pid, started in procs:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", b"300"] or (
            len(argv) >= 2 and argv[0].endswith(b"/sleep") and argv[1] == b"300"
        ):
            found.append((pid, started))
    return found
