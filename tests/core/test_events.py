"""One event stream for every kind (issue 16): on_event, the persisted step log, and OpenTelemetry
spans with the GenAI conventions' names. The echo kind drives the engine here; the real kinds
prove their decoders in their own tests and in the conformance kit."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from jigs import RunMetadata, harnesses
from jigs.engine._steplog import read_events, step_logs
from jigs.events import (
    AgentEvent,
    ModelCallStarted,
    SessionStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnCompleted,
    UsageUpdated,
)
from jigs.policy._paths import run_state_dir
from jigs.steps import run_agent
from pydantic import TypeAdapter

pytestmark = pytest.mark.anyio


async def test_on_event_sees_the_whole_turn_in_order(worktree: Path, run_meta: RunMetadata):
    seen: list[AgentEvent] = []
    result = await run_agent(
        harness=harnesses.echo(),
        cwd=worktree,
        prompt="write:a.txt:hello",
        run=run_meta,
        on_event=seen.append,
    )
    kinds = [type(e) for e in seen]
    assert kinds[0] is SessionStarted
    assert kinds[-1] is TurnCompleted
    assert kinds.index(ToolCallStarted) < kinds.index(ToolCallFinished)
    assert kinds.count(ModelCallStarted) == 2
    started = next(e for e in seen if isinstance(e, ToolCallStarted))
    assert started.name == "write"
    assert started.arguments == {"path": "a.txt", "text": "hello"}
    text = "".join(e.text for e in seen if isinstance(e, TextDelta))
    assert text == result.text
    assert any(isinstance(e, UsageUpdated) for e in seen)
    assert result.session is not None
    assert seen[0].session_id == result.session.id  # type: ignore[union-attr]


async def test_an_async_on_event_is_awaited(worktree: Path, run_meta: RunMetadata):
    seen: list[str] = []

    async def record(event: AgentEvent) -> None:
        seen.append(event.type)

    await run_agent(
        harness=harnesses.echo(), cwd=worktree, prompt="x", run=run_meta, on_event=record
    )
    assert seen[0] == "session"
    assert seen[-1] == "turn-completed"


async def test_the_step_log_keeps_every_event_redacted(
    worktree: Path, run_meta: RunMetadata, monkeypatch
):
    secret = "ghp_stepLogCanary0123456789abcdefABCDEF"
    monkeypatch.setenv("STEP_LOG_TOKEN", secret)
    seen: list[AgentEvent] = []
    await run_agent(
        harness=harnesses.echo(),
        cwd=worktree,
        prompt=f"write:b.txt:{secret}",
        run=run_meta,
        agents_env=["STEP_LOG_TOKEN"],
        on_event=seen.append,
    )
    run_dir = run_state_dir(run_meta.workflow_run_id, "echo").parent
    logs = step_logs(run_dir)
    assert len(logs) == 1
    assert oct(logs[0].stat().st_mode & 0o777) == "0o600"
    raw = logs[0].read_text()
    assert secret not in raw
    assert "[redacted]" in raw
    events = list(read_events(logs[0]))
    assert [e["type"] for e in events] == [e.type for e in seen]
    assert all(e["turn"] == 1 for e in events)
    # each line is the event itself: it validates back into the union
    adapter: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)
    for line in events:
        data = {k: v for k, v in line.items() if k not in {"turn", "at"}}
        adapter.validate_python(data)


async def test_spans_for_the_step_its_stages_turns_and_tools(
    worktree: Path, run_meta: RunMetadata, monkeypatch
):
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    import jigs.engine._otel

    monkeypatch.setattr(jigs.engine._otel, "_cache", {"tracer": provider.get_tracer("jigs")})
    with tracer.start_as_current_span("workflow-step") as outer:
        await run_agent(
            harness=harnesses.echo(),
            cwd=worktree,
            prompt="write:c.txt:traced env",
            run=run_meta,
        )
    spans = {s.name: s for s in exporter.get_finished_spans()}
    step = spans["jigs.step"]
    assert step.parent is not None
    assert step.parent.span_id == outer.get_span_context().span_id
    assert step.attributes["jigs.kind"] == "echo"
    for stage in ("runner.env.built", "runner.lock.acquired", "runner.checks.jit"):
        assert spans[stage].parent.span_id == step.context.span_id, stage
    turn = spans["invoke_agent echo"]
    assert turn.parent.span_id == step.context.span_id
    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert turn.attributes["gen_ai.agent.name"] == "echo"
    assert isinstance(turn.attributes["gen_ai.usage.input_tokens"], int)
    assert turn.attributes["gen_ai.conversation.id"]
    tool = spans["execute_tool write"]
    assert tool.parent.span_id == turn.context.span_id
    assert tool.attributes["gen_ai.tool.name"] == "write"
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert trace.get_current_span() is not None


async def test_the_turn_process_gets_the_trace_context(
    worktree: Path, run_meta: RunMetadata, monkeypatch
):
    import jigs.engine._otel
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    monkeypatch.setattr(jigs.engine._otel, "_cache", {"tracer": provider.get_tracer("jigs")})
    result = await run_agent(harness=harnesses.echo(), cwd=worktree, prompt="env", run=run_meta)
    assert "TRACEPARENT" in result.text.split()


async def test_without_tracing_nothing_imports_opentelemetry(tmp_path: Path, worktree: Path):
    import subprocess
    import sys

    script = (
        "import anyio, sys\n"
        "from jigs import RunMetadata, harnesses\n"
        "from jigs.steps import run_agent\n"
        f"anyio.run(lambda: run_agent(harness=harnesses.echo(), cwd={str(worktree)!r}, "
        "prompt='x', run=RunMetadata(workflow_run_id='r')))\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('opentelemetry'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json\n" + script],
        capture_output=True,
        text=True,
        env={**os.environ, "JIGS_DATA_DIR": str(tmp_path / "data")},
        check=True,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


async def test_stream_agent_yields_the_events_then_the_result(worktree: Path, run_meta):
    from jigs.steps import stream_agent

    async with stream_agent(
        harness=harnesses.echo(), cwd=worktree, prompt="write:d.txt:x", run=run_meta
    ) as turn:
        types = [event.type async for event in turn]
    assert types[0] == "session"
    assert "tool-call-started" in types
    assert types[-1] == "turn-completed"
    assert turn.result is not None
    assert turn.result.text.startswith("echo: write:d.txt:x")


async def test_stream_agent_keeps_the_session_in_the_session_store(
    worktree: Path, run_meta, tmp_path: Path
):
    from jigs.steps import stream_agent

    store = f"file://{tmp_path / 'bucket'}"
    async with stream_agent(
        harness=harnesses.echo(), cwd=worktree, prompt="hello", run=run_meta, session_store=store
    ) as turn:
        async for _ in turn:
            pass
    assert turn.result is not None
    assert turn.result.session is not None
    assert turn.result.session.store_key is not None  # stored, as run_agent does


async def test_stream_agent_raises_the_turn_error_from_the_iteration(worktree: Path, run_meta):
    from jigs.errors import AgentCrashedError
    from jigs.policy._lock import worktree_locked
    from jigs.steps import stream_agent

    async def drain() -> None:
        async with stream_agent(
            harness=harnesses.echo(), cwd=worktree, prompt="crash", run=run_meta
        ) as turn:
            async for _ in turn:
                pass

    with pytest.raises(AgentCrashedError):
        await drain()
    assert not worktree_locked(worktree)


async def test_leaving_a_stream_early_stops_the_agent(worktree: Path, run_meta):
    import time

    from jigs.policy._lock import worktree_locked
    from jigs.processes import live_groups
    from jigs.steps import stream_agent

    started = time.monotonic()
    async with stream_agent(
        harness=harnesses.echo(), cwd=worktree, prompt="sleep:60", run=run_meta
    ) as turn:
        async for event in turn:
            if event.type == "session":
                break
    assert time.monotonic() - started < 10
    assert not live_groups()
    assert not worktree_locked(worktree)


def test_jigs_run_shows_tool_calls_as_they_happen(worktree: Path, tmp_path: Path):
    import subprocess
    import sys

    jigs = Path(sys.executable).parent / "jigs"
    out = subprocess.run(
        [str(jigs), "run", "--harness", "echo", "--cwd", str(worktree), "write:e.txt:hi"],
        capture_output=True,
        text=True,
        env={**os.environ, "JIGS_DATA_DIR": str(tmp_path / "data")},
        check=True,
    )
    assert '> write {"path": "e.txt", "text": "hi"}' in out.stderr
    assert out.stdout.startswith("echo: write:e.txt:hi")


def test_jigs_runs_show_events_reads_the_step_log(worktree: Path, tmp_path: Path):
    import subprocess
    import sys

    jigs = Path(sys.executable).parent / "jigs"
    env = {**os.environ, "JIGS_DATA_DIR": str(tmp_path / "data")}
    subprocess.run(
        [
            str(jigs),
            "run",
            "--harness",
            "echo",
            "--cwd",
            str(worktree),
            "--run-id",
            "r-ev",
            "write:f.txt:hi",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    shown = subprocess.run(
        [str(jigs), "runs", "show", "r-ev", "--events", "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    (step,) = json.loads(shown.stdout)
    assert step["kind"] == "echo"
    types = [e["type"] for e in step["events"]]
    assert types[0] == "session"
    assert "tool-call-started" in types
    assert types[-1] == "turn-completed"
    plain = subprocess.run(
        [str(jigs), "runs", "show", "r-ev", "--events"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert '> write {"path": "f.txt", "text": "hi"}' in plain.stdout
