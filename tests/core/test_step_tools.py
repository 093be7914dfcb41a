"""``tools=[fn, ...]``: Python functions served to the agent from the worker, each kind with its real
CLI against ``jigs_testing``'s model server, sandboxed (the agent reaches the tool server through
its relay).

One step per kind: the model calls a tool that records its argument (its result reaches the next
model request), then one that raises (the agent reads the error, redacted; the step succeeds),
then its shell asks the tool server without the token (401); after the step the port is closed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from jigs import RunMetadata
from jigs.errors import InvalidInputError
from jigs.events import ToolCallFinished, ToolCallStarted
from jigs_testing import ModelServer, text, tool_call
from proxied_kinds import proxied
from structlog.testing import capture_logs

pytestmark = pytest.mark.anyio

KEY_ENV = "JIGS_TOOLS_TEST_KEY"
SECRET = "sk-tool-SECRET-never-shown-3f9a1c7e52"
DONE = "tools turn done"
# the MCP call a tool server answers, without the step's token
NO_TOKEN = (
    'printf "NO-TOKEN %s\\n" "$(curl -s --max-time 10 -o /dev/null -w "%{{http_code}}" '
    "-X POST http://127.0.0.1:{port}/mcp -H 'content-type: application/json' "
    "-H 'accept: application/json, text/event-stream' "
    '-d \'{{"jsonrpc":"2.0","id":1,"method":"tools/list"}}\')"'
)
SHELL: dict[str, Callable[[str], Any]] = {
    "claude": lambda cmd: tool_call("Bash", {"command": cmd, "description": "probe"}),
    "codex": lambda cmd: tool_call("exec_command", {"cmd": cmd}),
    "pi": lambda cmd: tool_call("bash", {"command": cmd}),
    "opencode": lambda cmd: tool_call("bash", {"command": cmd, "description": "probe"}),
}


def _tool(kind: str, name: str) -> str:
    """The name the kind's CLI gives the step's tool ``name`` (opencode: ``<server>_<tool>``)."""
    return f"tools_{name}" if kind == "opencode" else f"mcp__tools__{name}"


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME, the model key and a secret in the worker's environment."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("IS_SANDBOX", "1")
    monkeypatch.setenv(KEY_ENV, "sk-model-key-for-tools-test-1234567")
    monkeypatch.setenv("JIGS_TOOLS_TEST_SECRET", SECRET)
    return home


@pytest.mark.parametrize("kind", ["claude", "codex", "pi", "opencode"])
async def test_the_agent_calls_python_tools_in_the_worker(
    kind: str, require_cli: Callable[[str], Path], scratch: Path, worktree: Path
) -> None:
    from jigs.steps import run_agent

    require_cli(kind)
    recorded: list[str] = []
    events: list[Any] = []

    async with ModelServer() as server:
        with capture_logs() as logs:

            async def record_decision(decision: str, confidence: float = 1.0) -> str:
                """Record the agent's decision for the workflow."""
                recorded.append(f"{decision}@{confidence}")
                # on the caller's loop, mid-turn: script the rest, now that the port is known
                port = next(e["port"] for e in logs if e["event"] == "runner.tools.started")
                server.add(
                    tool_call(_tool(kind, "explode"), {"reason": "on purpose"}),
                    SHELL[kind](NO_TOKEN.format(port=port)),
                    text(DONE),
                )
                return f"RECORDED-{decision.upper()}"

            def explode(reason: str) -> str:
                """A tool that always fails."""
                raise RuntimeError(f"exploded ({reason}) with {SECRET}")

            server.add(
                tool_call(_tool(kind, "record_decision"), {"decision": "ship", "confidence": 0.5})
            )
            result = await run_agent(
                harness=proxied(kind, KEY_ENV, "tools")(server),
                cwd=worktree,
                prompt="use the tools",
                run=RunMetadata(workflow_run_id=f"tools-{kind}"),
                agents_env=["IS_SANDBOX"] if kind == "claude" else [],
                tools=[record_decision, explode],
                on_event=events.append,
            )
        models = server.model_requests
    assert result.text == DONE
    assert recorded == ["ship@0.5"]
    assert "RECORDED-SHIP" in models[1].text()
    assert "explode failed: RuntimeError: exploded (on purpose)" in models[2].text()
    assert SECRET not in json.dumps([m.body for m in models])
    assert "NO-TOKEN 401" in models[3].text(), models[3].text()[-2000:]
    assert [e for e in logs if e["event"] == "jigs.tools.refused"]
    called = [(e["tool"], e["is_error"]) for e in logs if e["event"] == "tool.called"]
    assert called == [("record_decision", False), ("explode", True)]
    names = [(e.type, e.name) for e in events if isinstance(e, ToolCallStarted | ToolCallFinished)]
    assert any("record_decision" in n for _, n in names), names
    # after close nothing listens on the tool server's port
    port = next(e["port"] for e in logs if e["event"] == "runner.tools.started")
    with pytest.raises(OSError):
        await anyio.connect_tcp("127.0.0.1", port)


def test_a_tool_without_types_or_a_docstring_is_refused() -> None:
    from jigs.engine._tools import step_tools

    def untyped(x):  # type: ignore[no-untyped-def]
        """Untyped."""

    def undocumented(x: int) -> int:
        return x

    def twice(x: int) -> int:
        """Twice."""
        return x

    for bad in ([untyped], [undocumented], [lambda: None], [twice, twice], "twice"):
        with pytest.raises(InvalidInputError):
            step_tools(bad)
