"""A two-step agent workflow on DBOS: step 1 starts a session, step 2 resumes it.

Run it (SQLite, nothing to start; the echo test kind needs no model)::

    python examples/dbos_workflow.py --db sqlite:///jigs-dbos.sqlite --worktree /path/to/repo

Kill it during step 2 and run the same command again with ``--recover WORKFLOW_ID``: DBOS
recovers the workflow and re-runs step 2 from the session step 1 recorded. For Postgres, pass
``--db postgresql://user@host:5432/db``; ``--serve`` makes this process a worker of the
``jigs`` queue (run as many as you like, on as many machines). ``--enqueue`` puts one
workflow on that queue (from any process that can reach the database).

Human approval: ``--gated`` runs one turn (``--first``) whose shell commands wait for a
decision in the workflow (``jigs_dbos.run_with_approvals``); the worker may die meanwhile.
Decide from any process with ``--decide ID --allow`` or ``--decide ID --deny REASON``, then
``--recover ID`` (or any live worker of the same executor) finishes the turn.

A question: ``--ask`` runs one turn (``--first``) whose agent may ask a human
(``jigs.steps.ask_human``); its question waits in the workflow the same way. Answer it from any
process with ``--answer ID TEXT``, then ``--recover ID``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid
from typing import Any

import jigs_dbos
from dbos import DBOS, DBOSClient, DBOSConfig, EnqueueOptions
from jigs import AgentSessionRef, harnesses
from jigs.descriptors import HarnessDescriptor
from jigs.errors import AgentInterrupted
from jigs.steps import (
    AgentResult,
    Allow,
    Answer,
    Approval,
    Defer,
    Deny,
    GatedCall,
    PendingApproval,
    ask_human,
)


@jigs_dbos.step(max_attempts=12, interval_seconds=0.3, backoff_rate=1.3)
async def start_session(
    harness: HarnessDescriptor | dict[str, Any], worktree: str, prompt: str
) -> AgentResult[None]:
    """Step 1: a fresh session. Its result (text and session ref) is checkpointed by DBOS."""
    return await jigs_dbos.run_agent(harness=harness, cwd=worktree, prompt=prompt)


@jigs_dbos.step(max_attempts=12, interval_seconds=0.3, backoff_rate=1.3)
async def continue_session(
    harness: HarnessDescriptor | dict[str, Any],
    worktree: str,
    prompt: str,
    session: AgentSessionRef | None,
) -> AgentResult[None]:
    """Step 2: resumes step 1's session. Every attempt (a DBOS retry, or a re-run after the
    worker died) gets step 1's ref again, never one a failed attempt produced."""
    return await jigs_dbos.run_agent(harness=harness, cwd=worktree, prompt=prompt, resume=session)


@DBOS.workflow()
async def two_steps(
    harness: HarnessDescriptor | dict[str, Any], worktree: str, first: str, second: str
) -> list[str]:
    one = await start_session(harness, worktree, first)
    two = await continue_session(harness, worktree, second, one.session)
    return [one.text, two.text]


def defer_shell(call: GatedCall) -> Allow | Defer:
    """The gated workflow's gate: every shell command waits for a human; other tools run."""
    return Defer() if call.category == "shell" else Allow()


@jigs_dbos.step(max_attempts=12, interval_seconds=0.3, backoff_rate=1.3)
async def gated_turn(
    harness: HarnessDescriptor | dict[str, Any],
    worktree: str,
    prompt: str,
    session: AgentSessionRef | None,
    approvals: list[Approval],
) -> AgentResult[None]:
    """A turn whose shell commands need a human's approval: a deferred command raises
    ApprovalPending (not retried); the resumed turn gets the decision as ``approvals``."""
    return await jigs_dbos.run_agent(
        harness=harness, cwd=worktree, prompt=prompt, resume=session,
        approve_tool=defer_shell, approvals=approvals,
    )  # fmt: skip


@DBOS.workflow()
async def gated(
    harness: HarnessDescriptor | dict[str, Any], worktree: str, prompt: str
) -> list[str]:
    async def turn(
        prompt: Any, session: AgentSessionRef | None, approvals: list[Approval]
    ) -> AgentResult[None]:
        return await gated_turn(harness, worktree, prompt, session, approvals)

    result = await jigs_dbos.run_with_approvals(turn, prompt)
    return [result.text]


@jigs_dbos.step(max_attempts=12, interval_seconds=0.3, backoff_rate=1.3)
async def asking_turn(
    harness: HarnessDescriptor | dict[str, Any],
    worktree: str,
    prompt: str,
    session: AgentSessionRef | None,
) -> AgentResult[None]:
    """A turn whose agent may ask a human: its question raises ApprovalPending (not retried);
    the resumed turn gets the answer as its prompt."""
    return await jigs_dbos.run_agent(
        harness=harness, cwd=worktree, prompt=prompt, resume=session, tools=[ask_human]
    )


@DBOS.workflow()
async def asking(
    harness: HarnessDescriptor | dict[str, Any], worktree: str, prompt: str
) -> list[str]:
    async def turn(
        prompt: Any, session: AgentSessionRef | None, approvals: list[Approval]
    ) -> AgentResult[None]:
        return await asking_turn(harness, worktree, prompt, session)

    result = await jigs_dbos.run_with_approvals(turn, prompt)
    return [result.text]


def send_decision(db: str, workflow_id: str, verdict: Allow | Deny | Answer) -> PendingApproval:
    """Read the workflow's pending calls and send it one verdict for all of them (an Answer
    goes to its questions, Allow or Deny to its tool calls)."""
    client = DBOSClient(system_database_url=db, serializer=jigs_dbos.JigsSerializer())
    try:
        pending = client.get_event(workflow_id, jigs_dbos.APPROVAL_TOPIC, timeout_seconds=60)
        if not isinstance(pending, PendingApproval):
            raise SystemExit(f"workflow {workflow_id} has nothing waiting for a human")
        question = isinstance(verdict, Answer)
        ids = [c.call_id for c in pending.calls if (c.category == "question") == question]
        if not ids:
            raise SystemExit(
                f"workflow {workflow_id} waits for no {'answer' if question else 'decision'}"
            )
        client.send(workflow_id, dict.fromkeys(ids, verdict), jigs_dbos.APPROVAL_TOPIC)
        return pending
    finally:
        client.destroy()


@jigs_dbos.step(max_attempts=3, interval_seconds=0.3, listen=True)
async def listening_session(
    harness: HarnessDescriptor | dict[str, Any], worktree: str, prompt: str
) -> AgentResult[None]:
    """A step that can be steered or interrupted from outside the worker
    (``jigs_dbos.interrupt(client, workflow_id)``)."""
    return await jigs_dbos.run_agent(harness=harness, cwd=worktree, prompt=prompt)


@DBOS.workflow()
async def interruptible(
    harness: HarnessDescriptor | dict[str, Any], worktree: str, prompt: str
) -> dict[str, Any]:
    """One listening step: its text, or the interrupt's session to resume."""
    try:
        result = await listening_session(harness, worktree, prompt)
    except AgentInterrupted as exc:
        return {"error": type(exc).__name__, "session": exc.session}
    return {"text": result.text}


def config(db: str) -> DBOSConfig:
    return {
        "name": "jigs-example",
        "system_database_url": db,
        "serializer": jigs_dbos.JigsSerializer(),
        "executor_id": os.environ.get("JIGS_EXAMPLE_EXECUTOR", "local"),
        "application_version": "jigs-example-1",
        "notification_listener_polling_interval_sec": 0.1,
        "log_level": os.environ.get("JIGS_EXAMPLE_LOG_LEVEL", "INFO"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", required=True, help="sqlite:///FILE or postgresql://...")
    parser.add_argument("--worktree", help="the git worktree the agent works in")
    parser.add_argument("--harness", default='{"kind": "echo"}', help="descriptor JSON")
    parser.add_argument("--first", default="Write a plan.")
    parser.add_argument("--second", default="Now carry it out.")
    parser.add_argument("--id", help="workflow id (default: a new one)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--recover", metavar="ID", help="only recover and wait for ID")
    what.add_argument("--serve", action="store_true", help="work the jigs queue until killed")
    what.add_argument("--enqueue", action="store_true", help="enqueue one workflow and exit")
    what.add_argument("--gated", action="store_true", help="one turn, shell commands approved")
    what.add_argument("--decide", metavar="ID", help="decide ID's pending calls (--allow/--deny)")
    what.add_argument("--ask", action="store_true", help="one turn whose agent may ask a human")
    what.add_argument("--answer", nargs=2, metavar=("ID", "TEXT"), help="answer ID's question")
    verdict = parser.add_mutually_exclusive_group()
    verdict.add_argument("--allow", action="store_true", help="with --decide: approve")
    verdict.add_argument("--deny", metavar="REASON", help="with --decide: refuse, saying why")
    args = parser.parse_args()

    if args.decide:
        if not (args.allow or args.deny):
            parser.error("--decide needs --allow or --deny REASON")
        pending = send_decision(args.db, args.decide, Deny(args.deny) if args.deny else Allow())
        print(json.dumps({"decided": [c.model_dump(mode="json") for c in pending.calls]}))
        return 0
    if args.answer:
        pending = send_decision(args.db, args.answer[0], Answer(args.answer[1]))
        print(json.dumps({"answered": [q.model_dump(mode="json") for q in pending.questions]}))
        return 0

    if args.enqueue:
        client = DBOSClient(system_database_url=args.db, serializer=jigs_dbos.JigsSerializer())
        options: EnqueueOptions = {"queue_name": "jigs", "workflow_name": "two_steps"}
        if args.id:
            options["workflow_id"] = args.id
        handle: Any = client.enqueue(
            options, harnesses.load(json.loads(args.harness)), args.worktree, args.first,
            args.second,
        )  # fmt: skip
        print(json.dumps({"workflow_id": handle.workflow_id}), flush=True)
        client.destroy()
        return 0

    DBOS(config=config(args.db))
    DBOS.launch()  # recovers this executor's unfinished workflows
    try:
        if args.serve:
            DBOS.register_queue("jigs", worker_concurrency=4, polling_interval_sec=0.2)
            print(json.dumps({"serving": True}), flush=True)
            asyncio.run(asyncio.Event().wait())
            return 0
        if args.recover:
            workflow_id = args.recover
            handle = DBOS.retrieve_workflow(workflow_id)
        else:
            if not args.worktree:
                parser.error("--worktree is required to start a workflow")
            harness = harnesses.load(json.loads(args.harness))
            workflow_id = args.id or f"jigs-example-{uuid.uuid4().hex[:8]}"
            from dbos import SetWorkflowID

            async def start() -> list[str]:
                with SetWorkflowID(workflow_id):
                    if args.gated or args.ask:
                        started = await DBOS.start_workflow_async(
                            gated if args.gated else asking, harness, args.worktree, args.first
                        )
                    else:
                        started = await DBOS.start_workflow_async(
                            two_steps, harness, args.worktree, args.first, args.second
                        )
                print(json.dumps({"workflow_id": workflow_id}), flush=True)
                return await started.get_result()

            print(json.dumps({"texts": asyncio.run(start())}), flush=True)
            return 0
        print(json.dumps({"texts": handle.get_result()}), flush=True)
        return 0
    finally:
        DBOS.destroy()


if __name__ == "__main__":
    sys.exit(main())
