"""A stand-in for ``pi --mode json`` that misbehaves on demand (fault injection).

The prompt (the last argument) picks the behaviour by its first word: ``ok``, ``garbage``,
``nosettle``, ``crash``, ``hang``, ``hang-after-settle``, ``wrong-session``, ``length``,
``error``. It writes ``pidfile:<path>`` words' path with its pid.
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
        "usage": {"input": 3, "output": 2, "totalTokens": 5, "cost": {"total": 0}},
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
    prompt = argv[-1]
    mode = prompt.split()[0] if prompt.split() else "ok"
    for word in prompt.split():
        if word.startswith("pidfile:"):
            with open(word.split(":", 1)[1], "w") as fh:
                fh.write(str(os.getpid()))
    session = argv[argv.index("--session-id") + 1] if "--session-id" in argv else "x"
    if mode == "wrong-session":
        session = str(uuid.uuid4())
    emit({"type": "session", "version": 3, "id": session, "timestamp": "t", "cwd": os.getcwd()})
    emit({"type": "agent_start"})
    if mode == "garbage":
        sys.stdout.write("this is not json\n")
        sys.stdout.flush()
    if mode == "crash":
        sys.stderr.write("fake pi: simulated crash\n")
        return 3
    if mode == "hang":
        time.sleep(600)
    stop, error = {"length": ("length", None), "error": ("error", "500 boom")}.get(
        mode, ("stop", None)
    )
    message = assistant(f"fake answer ({mode})", stop, error)
    emit({"type": "message_end", "message": message})
    emit({"type": "agent_end", "messages": [message], "willRetry": False})
    if mode == "nosettle":
        return 0
    emit({"type": "agent_settled", "aborted": False})
    if mode == "hang-after-settle":
        time.sleep(600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
