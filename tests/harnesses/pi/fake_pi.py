"""A stand-in for ``pi --mode json`` that misbehaves on demand (fault injection).

The prompt (on stdin, as jigs sends it) picks the behaviour by its first word: ``ok``,
``hang-after-settle``, ``wrong-session``, ``length``, ``error``; ``argv:<path>`` writes its
arguments there (JSON), and ``echo`` answers with the prompt it read. The turn engine's faults
(crash, garbage, hangs, deadlines, limits) are tested once for every kind:
tests/core/test_turn_faults.py and the conformance kit.
"""

import json
import os
import sys
import time
import uuid


def emit(event: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def assistant(text: str, stop: str = "stop", error: str | None = None) -> dict[str, object]:
    message: dict[str, object] = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "provider": "local",
        "model": "fake-model",
        "usage": {"input": 3, "output": 2, "totalTokens": 5, "cost": {"total": 0.25}},
        "stopReason": stop,
    }
    if error:
        message["errorMessage"] = error
    return message


def main() -> int:
    argv = sys.argv[1:]
    if "--version" in argv:
        print("1.6.0")
        return 0
    prompt = sys.stdin.read().strip()
    mode = prompt.split()[0] if prompt.split() else "ok"
    for word in prompt.split()[:4]:
        if word.startswith("argv:"):
            with open(word.split(":", 1)[1], "w") as fh:
                json.dump(argv, fh)
    if "--session-id" in argv:  # a fresh session: write its file where Pi would
        session = argv[argv.index("--session-id") + 1]
        sessions = argv[argv.index("--session-dir") + 1]
        with open(os.path.join(sessions, f"2026-01-01T00-00-00_{session}.jsonl"), "w") as fh:
            fh.write(json.dumps({"type": "session", "id": session}) + "\n")
    else:
        resumed = os.path.basename(argv[argv.index("--session") + 1])
        session = resumed.split("_", 1)[1].removesuffix(".jsonl")
    if mode == "wrong-session":
        session = str(uuid.uuid4())
    emit({"type": "session", "version": 3, "id": session, "timestamp": "t", "cwd": os.getcwd()})
    emit({"type": "agent_start"})
    stop, error = {"length": ("length", None), "error": ("error", "500 boom")}.get(
        mode, ("stop", None)
    )
    answer = f"echo:{len(prompt)}:{prompt[-20:]}" if mode == "echo" else f"fake answer ({mode})"
    message = assistant(answer, stop, error)
    emit({"type": "message_end", "message": message})
    emit({"type": "agent_end", "messages": [message], "willRetry": False})
    emit({"type": "agent_settled", "aborted": False})
    if mode == "hang-after-settle":
        time.sleep(600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
