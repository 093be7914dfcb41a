"""The echo "CLI": prints JSON lines for one turn. Directives in the prompt drive faults.

Directives (space-separated words in the prompt): ``sleep:S``, ``write:NAME:TEXT`` (TEXT URL-quoted; a file in the
cwd), ``child`` (spawn a grandchild that sleeps, to prove group kills), ``crash`` (exit 3),
``garbage`` (a non-JSON line), ``bigline:N`` (an N-byte text line), ``noresult`` (end without a
result), ``env`` (answer with the sorted environment names), ``pidfile:PATH`` (write own pid),
``leakenv:NAME`` (print NAME's value to stderr), ``sh:COMMAND`` (run COMMAND, URL-quoted, with
``sh -c`` and answer with its output), ``json:TEXT`` (answer exactly TEXT, URL-quoted), ``jsonlater:TEXT`` (answer TEXT in a later,
resumed turn: how tests make a first answer misfit and the re-asked one fit), ``calls:N`` (report N
model requests, each costing $0.01), ``fail:REASON`` (end with a failed turn of that reason), ``stdin``
(read the prompt from stdin).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import unquote


def emit(event: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _save(path: Path, history: list[str]) -> None:
    # atomically: a turn stopped mid-write (a limit, a timeout) never leaves an empty session
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(history))
    os.replace(partial, path)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", required=True)
    parser.add_argument("--resume")
    parser.add_argument("--prefix", default="")
    parser.add_argument("--prompt-stdin", action="store_true")
    parser.add_argument("--fork", action="store_true")
    parser.add_argument("prompt", nargs="?", default="")
    args = parser.parse_args()
    if args.prompt_stdin:
        args.prompt = sys.stdin.read()
    sessions = Path(args.sessions)
    sessions.mkdir(parents=True, exist_ok=True)
    history: list[str] = (
        json.loads((sessions / f"{args.resume}.json").read_text()) if args.resume else []
    )
    # --fork: continue a copy of the resumed session under a new id
    session_id = args.resume if args.resume and not args.fork else str(uuid.uuid4())
    path = sessions / f"{session_id}.json"
    # the turn's prompt is in the session from its start, as a real CLI's transcript is: a turn
    # stopped midway (an interrupt) is resumable
    _save(path, [*history, args.prompt])
    emit({"type": "start", "session_id": session_id, "pid": os.getpid()})
    emit({"type": "model", "n": 0})
    answer = f"{args.prefix}echo: {args.prompt} (turn {len(history) + 1})"
    for earlier in history:
        for word in earlier.split():
            if word.startswith("jsonlater:"):
                answer = unquote(word.removeprefix("jsonlater:"))
    for word in args.prompt.split():
        name, _, value = word.partition(":")
        if name == "sleep":
            time.sleep(float(value))
        elif name == "write":
            fname, _, quoted = value.partition(":")
            text = unquote(quoted)
            (Path.cwd() / fname).write_text(text)
            emit({"type": "tool", "name": "write", "arguments": {"path": fname, "text": text}})
            emit({"type": "model", "n": 0})  # the model reads the tool's result
        elif name == "pidfile":
            Path(value).write_text(str(os.getpid()))
        elif name == "child":
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
            emit({"type": "child", "pid": child.pid})
        elif name == "sh":
            ran = subprocess.run(
                ["sh", "-c", unquote(value)], capture_output=True, text=True, check=False
            )
            emit({"type": "tool", "name": "sh", "arguments": {"command": unquote(value)}})
            answer = ran.stdout + ran.stderr
        elif name == "leakenv":
            sys.stderr.write(f"{value}={os.environ.get(value, '')}\n")
        elif name == "crash":
            sys.stderr.write("echo: simulated crash\n")
            return 3
        elif name == "garbage":
            sys.stdout.write("this is not json\n")
            sys.stdout.flush()
        elif name == "bigline":
            emit({"type": "text", "text": "x" * int(value)})
        elif name == "noresult":
            return 0
        elif name == "calls":
            for n in range(int(value)):
                emit({"type": "model", "n": n + 1})
                emit({"type": "usage", "cost": round(0.01 * (n + 1), 4), "input": 10 * (n + 1)})
                time.sleep(0.05)
        elif name == "fail":
            history.append(args.prompt)
            _save(path, history)
            emit({"type": "failed", "reason": value, "message": f"echo failed: {value}"})
            return 1
        elif name == "json":
            answer = unquote(value)
        elif name == "env":
            answer = " ".join(sorted(os.environ))
    history.append(args.prompt)
    _save(path, history)
    emit({"type": "text", "text": answer})
    emit({"type": "usage", "cost": 0.0, "input": len(args.prompt)})
    emit({"type": "result", "text": answer, "session_id": session_id, "turns": len(history)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
