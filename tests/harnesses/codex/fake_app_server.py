"""A fake ``codex app-server`` for fault injection in the kind's transport (mid-turn faults, the
JSON-RPC protocol, the app server's stop); the mode is the first line after the shebang (the tests
write a copy with ``MODE = "..."``). Faults at the server's start (a crash, garbage, a hang) and
the turn deadlines are the conformance kit's (``bad_output``, ``hung_cli``, ``turn_deadline``).
Modes:

ok            a well-behaved server: one turn answers "fake answer" ({"ok": true} when the
              turn has an outputSchema)
rpc-error     answer ``turn/start`` with a JSON-RPC error
hang-turn     accept ``turn/start``, then say nothing
stubborn      accept ``turn/start``, start a ``setsid`` child, ignore SIGTERM and hang
crash-turn    accept ``turn/start``, then exit 1
cut-turn      accept ``turn/start``, then print half a line (no newline) and exit 3
bigline       answer with a 2 MiB message (one 2 MiB JSON line per notification)
fail-turn     complete the turn with status "failed"
deaf          like ok, but keep running when stdin ends (only a signal stops it)
requests      during the turn, send approval requests and an unknown request; the answer text
              is the JSON of the replies received
scribbler     like ok, but the turn writes a whole rollout (ending with its task_complete) to
              $CODEX_HOME/sessions and starts a ``setsid`` child that creates files in
              $CODEX_HOME without pause until it is killed (its pid in ``scribbler.pid``)

Every mode appends each message it reads to ``fake-codex-rpc.jsonl`` in its working directory
(the worktree), so tests can assert what jigs sent.
"""

import json
import os
import sys
import time

MODE = "ok"


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def read():
    line = sys.stdin.readline()
    if not line:
        if MODE == "deaf":
            time.sleep(3600)
        sys.exit(0)
    with open("fake-codex-rpc.jsonl", "a") as log:
        log.write(line if line.endswith("\n") else line + "\n")
    return json.loads(line)


def main():
    if sys.argv[1:] == ["--version"]:
        print(os.environ.get("FAKE_CODEX_VERSION", "codex-cli 0.163.0"))
        return 0
    thread = "01a22966-6fd2-7931-9655-85c89129d947"
    turn = "turn-1"
    while True:
        msg = read()
        method = msg.get("method")
        if method == "initialize":
            send({"id": msg["id"], "result": {"userAgent": "fake/0.163.0"}})
        elif method == "initialized":
            continue
        elif method in ("thread/start", "thread/resume"):
            send({"id": msg["id"], "result": {"thread": {"id": thread}}})
        elif method == "turn/start":
            if MODE == "rpc-error":
                send({"id": msg["id"], "error": {"code": -32600, "message": "scripted refusal"}})
                continue
            send({"id": msg["id"], "result": {"turn": {"id": turn, "status": "inProgress"}}})
            if MODE == "hang-turn":
                time.sleep(3600)
            if MODE == "stubborn":
                # like Codex: the command runs in a session of its own; unlike Codex, this
                # server ignores SIGTERM, so only SIGKILL stops it and its child is orphaned
                import signal
                import subprocess

                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                child = subprocess.Popen(["sleep", "300"], start_new_session=True)
                with open(os.path.join(os.getcwd(), "child.pid"), "w") as fh:
                    fh.write(str(child.pid))
                time.sleep(3600)
            if MODE == "crash-turn":
                sys.stderr.write("fake app server: died mid-turn\n")
                sys.stderr.flush()
                return 1
            if MODE == "cut-turn":
                sys.stdout.write('{"method": "item/agentMessage/delta", "params": {"del')
                sys.stdout.flush()
                return 3
            if MODE == "scribbler":
                import subprocess

                home = os.environ["CODEX_HOME"]
                day = os.path.join(home, "sessions", "2026", "12", "01")
                os.makedirs(day, exist_ok=True)
                meta = {"type": "session_meta", "payload": {"id": thread}}
                done = {"type": "event_msg", "payload": {"type": "task_complete", "turn_id": turn}}
                with open(
                    os.path.join(day, f"rollout-2026-12-01T00-00-00-{thread}.jsonl"), "w"
                ) as fh:
                    fh.write(json.dumps(meta) + "\n" + json.dumps(done) + "\n")
                loop = (
                    "import os, sys, itertools\n"
                    "for n in itertools.count():\n"
                    "    open(os.path.join(sys.argv[1], f'scribble-{n}'), 'w').close()\n"
                )
                child = subprocess.Popen([sys.executable, "-c", loop, home], start_new_session=True)
                with open(os.path.join(os.getcwd(), "scribbler.pid"), "w") as fh:
                    fh.write(str(child.pid))
                while not any(n.startswith("scribble-") for n in os.listdir(home)):
                    time.sleep(0.005)
            answer = "fake answer"
            if (msg.get("params") or {}).get("outputSchema"):
                answer = json.dumps({"ok": True})
            if MODE == "bigline":
                answer = "x" * (2 * 1024 * 1024)
            if MODE == "requests":
                replies = {}
                base = {"threadId": thread, "turnId": turn}
                change = {"type": "fileChange", "id": "fc1", "status": "inProgress"}
                change["changes"] = [{"path": "a.txt", "kind": {"type": "add"}, "diff": "x"}]
                send({"method": "item/started", "params": {**base, "item": change}})
                asks = [
                    (
                        "item/commandExecution/requestApproval",
                        {**base, "itemId": "c1", "command": "rm -rf x", "cwd": "/w"},
                    ),
                    ("execCommandApproval", {"conversationId": thread, "command": ["ls"]}),
                    ("item/fileChange/requestApproval", {**base, "itemId": "fc1"}),
                    (
                        "applyPatchApproval",
                        {"conversationId": thread, "fileChanges": {"b.txt": {}}, "callId": "p"},
                    ),
                    (
                        "mcpServer/elicitation/request",
                        {**base, "serverName": "srv", "message": "pick", "mode": "form"},
                    ),
                    ("some/unknown/request", {}),
                ]
                for number, (ask, params) in enumerate(asks, start=100):
                    send({"id": number, "method": ask, "params": params})
                    got = read()
                    replies[ask] = got.get("result", got.get("error"))
                answer = json.dumps(replies, sort_keys=True)
            base = {"threadId": thread, "turnId": turn}
            send({"method": "turn/started", "params": {"threadId": thread, "turn": {"id": turn}}})
            item = {"type": "agentMessage", "id": "m1", "text": ""}
            send({"method": "item/started", "params": {**base, "item": item}})
            send(
                {
                    "method": "item/agentMessage/delta",
                    "params": {**base, "itemId": "m1", "delta": answer},
                }
            )
            send({"method": "item/completed", "params": {**base, "item": {**item, "text": answer}}})
            status = "failed" if MODE == "fail-turn" else "completed"
            error = {"message": "scripted turn failure"} if MODE == "fail-turn" else None
            send(
                {
                    "method": "turn/completed",
                    "params": {
                        "threadId": thread,
                        "turn": {"id": turn, "status": status, "error": error},
                    },
                }
            )
        elif "id" in msg:
            send({"id": msg["id"], "result": {}})


if __name__ == "__main__":
    sys.exit(main())
