"""The model key never enters the agent's process tree: every kind, real CLI, real pipeline.

Each kind's descriptor names a key (``api_key_env``) for the local :class:`ModelServer`. The
scripted model makes the agent's own shell dump its environment, ``/proc/$PPID/environ`` and every
``/proc/*/environ`` and ``cmdline`` it can read into a file, and print the lines that look like
keys; the next model request carries that output. The real key must be in none of it, in no
launched process's environment or argv, in no file under the data dir or the step's temporary
dirs, in no request body and no log event; the model server must still get the real key in the
auth header (the proxy adds it) and never the placeholder. The turn works (text deltas where
the kind streams, one tool call); a wrong token is refused while the step runs; after the step the
proxy's port refuses connections.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import pytest
from jigs import RunMetadata
from jigs.descriptors import HarnessDescriptor
from jigs.plugin import ModelEndpoint
from jigs.processes import observe_launches, value_digest
from jigs_testing import ModelServer, text, tool_call
from proxied_kinds import proxied
from structlog.testing import capture_logs

pytestmark = pytest.mark.anyio

KEY_ENV = "JIGS_ISOLATION_MODEL_KEY"
# unique per run: a process holding it can only have got it from this run
KEY = f"sk-isolation-REAL-key-{uuid.uuid4().hex}"
DONE = "isolation turn done"
DUMP = "agent-scan.txt"
# What a prompt-injected agent runs: its own env, its parent's, every process it can read.
SCAN = (
    f"{{ echo '# self'; env; echo '# parent'; tr '\\0' '\\n' < /proc/$PPID/environ; "
    f"echo '# all'; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do "
    f"tr '\\0' '\\n' < \"$f\"; echo; done; }} > {DUMP} 2>/dev/null; "
    f"grep -E '(KEY|TOKEN)=' {DUMP} | sort -u | head -40; echo SCAN-DONE"
)


@dataclass(frozen=True)
class Kind:
    name: str
    make: Callable[[ModelServer], HarnessDescriptor]
    tool: Callable[[str], Any]
    auth_header: str
    agents_env: tuple[str, ...] = ()


_claude = proxied("claude", KEY_ENV, "isolation")
_codex = proxied("codex", KEY_ENV, "isolation")
_pi = proxied("pi", KEY_ENV, "isolation")


KINDS = {
    "claude": Kind(
        "claude",
        _claude,
        lambda cmd: tool_call("Bash", {"command": cmd, "description": "scan"}),
        "x-api-key",
        ("IS_SANDBOX",),
    ),
    "codex": Kind(
        "codex", _codex, lambda cmd: tool_call("exec_command", {"cmd": cmd}), "authorization"
    ),
    "pi": Kind("pi", _pi, lambda cmd: tool_call("bash", {"command": cmd}), "authorization"),
}


@pytest.fixture
def auth_seen(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, str]]:
    """The auth header values each request to the model server carried (the server itself
    keeps only header names)."""
    from jigs_testing._server import app

    seen: list[dict[str, str]] = []
    original = app.Application._record

    def record(self: Any, ex: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(
            {
                name: value
                for name, value in ex.request.headers
                if name.lower() in ("x-api-key", "authorization")
            }
        )
        return original(self, ex, *args, **kwargs)

    monkeypatch.setattr(app.Application, "_record", record)
    return seen


@pytest.fixture
def endpoints(monkeypatch: pytest.MonkeyPatch) -> list[ModelEndpoint]:
    """Every proxied endpoint the pipeline opens."""
    from jigs.proxy import _endpoint

    opened: list[ModelEndpoint] = []
    original = _endpoint.prepare_model_endpoint

    def spy(*args: Any, **kwargs: Any) -> tuple[ModelEndpoint, Any, Any, Any]:
        endpoint, begin, stop, serve_also = original(*args, **kwargs)
        opened.append(endpoint)
        return endpoint, begin, stop, serve_also

    monkeypatch.setattr(_endpoint, "prepare_model_endpoint", spy)
    return opened


@pytest.fixture
def scratch(scratch_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME and TMPDIR (the kinds' private dirs land there), the key in the host env."""
    monkeypatch.setenv(KEY_ENV, KEY)
    return scratch_tmp


def _files_holding(roots: list[Path], needle: bytes) -> Iterator[Path]:
    for root in roots:
        for path in root.rglob("*"):
            try:
                if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
                    yield path
            except OSError:
                continue


def _port_refuses(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        try:
            sock.connect(("127.0.0.1", port))
        except ConnectionRefusedError:
            return True
        return False


@pytest.mark.parametrize("name", sorted(KINDS))
async def test_no_process_the_agent_can_see_holds_the_key(
    name: str,
    require_cli: Callable[[str], Path],
    scratch: Path,
    worktree: Path,
    jigs_data_dir: Path,
    auth_seen: list[dict[str, str]],
    endpoints: list[ModelEndpoint],
) -> None:
    from jigs.events import ToolCallFinished
    from jigs.steps import create_agent_runner, run_agent

    kind = KINDS[name]
    require_cli(name)
    run = RunMetadata(workflow_run_id=f"isolation-{name}")
    probes: dict[str, Any] = {}

    async def while_the_tool_runs() -> None:
        """The CLI is alive: files, a wrong token, the right token without the real key."""
        (endpoint,) = endpoints
        roots = [jigs_data_dir, scratch, scratch.parent / "home"]
        probes["files"] = [str(p) for p in _files_holding(roots, KEY.encode())]
        parts = urlsplit(endpoint.base_url)
        wrong = f"{parts.scheme}://{parts.netloc}/not-the-step-token/v1/messages"
        async with httpx.AsyncClient(trust_env=False) as client:
            probes["wrong_token"] = (await client.post(wrong, content=b"{}")).status_code

    async with ModelServer([kind.tool(SCAN), text(DONE)]) as server:
        descriptor = kind.make(server)
        with observe_launches() as launches, capture_logs() as logs:
            if name == "pi":

                async def on_event(event: Any) -> None:
                    if isinstance(event, ToolCallFinished) and "files" not in probes:
                        await while_the_tool_runs()

                result = await run_agent(
                    harness=descriptor,
                    cwd=worktree,
                    prompt="scan",
                    run=run,
                    agents_env=list(kind.agents_env),
                    on_event=on_event,
                )
                answer, deltas = result.text, []
            else:
                from jigs.models import stream_text

                async with create_agent_runner(
                    descriptor, cwd=worktree, run=run, agents_env=list(kind.agents_env)
                ) as runner:
                    parts = []
                    async for part in stream_text(runner.model, prompt="scan"):
                        parts.append(part)
                        if part.type == "tool-result" and "files" not in probes:
                            await while_the_tool_runs()
                answer = "".join(p.text for p in parts if p.type == "text-delta")
                deltas = [p for p in parts if p.type == "text-delta"]
                assert any(p.type == "tool-call" for p in parts), parts

    # the turn worked: one tool call, its output back to the model, the final text
    assert DONE in answer
    if name != "pi":
        assert deltas, "no text delta was streamed"
    requests = server.model_requests
    assert len(requests) == 2, [r.summary() for r in server.requests]
    tool_output = requests[1].text()
    assert "SCAN-DONE" in tool_output, tool_output[-2000:]
    (endpoint,) = endpoints

    # what the agent read: the full dump in the worktree and what went back to the model
    dump = (worktree / DUMP).read_text(errors="replace")
    assert "# parent" in dump
    assert "# all" in dump
    assert KEY not in dump, "the agent's scan found the real key"
    assert endpoint.key in dump, "the scan should see the CLI's placeholder in /proc"
    assert KEY not in tool_output
    assert all(KEY not in json.dumps(r.body) for r in server.requests)

    # the real key reached the model server in the auth header, the placeholder never did
    assert auth_seen
    assert all(kind.auth_header in seen for seen in auth_seen), auth_seen
    for seen in auth_seen:
        assert KEY in seen[kind.auth_header]
        assert all(endpoint.key not in value for value in seen.values())

    # no launched process got the key in its env or argv; no file held it
    assert launches
    for launch in launches:
        assert value_digest(KEY) not in launch.value_digests, launch.argv[0]
        assert KEY_ENV not in launch.env_names or name != "claude"
        assert not any(KEY in arg for arg in launch.argv)
    assert probes["files"] == [], probes["files"]

    # a wrong token was refused while the step ran; the port is closed after it
    assert probes["wrong_token"] == 401
    port = urlsplit(endpoint.base_url).port
    assert port is not None
    assert _port_refuses(port)

    # usage per request on the step's log; no event holds the key or the step token
    token = urlsplit(endpoint.base_url).path.strip("/")
    proxied = [e for e in logs if e["event"] == "proxy.request"]
    assert len(proxied) == 2, [e["event"] for e in logs]
    assert all(e["status"] == 200 and e["output_tokens"] for e in proxied)
    rendered = json.dumps(logs, default=str)
    assert KEY not in rendered
    assert token not in rendered
    assert os.environ[KEY_ENV] == KEY  # the worker still holds it


async def test_a_step_that_cannot_start_its_proxy_leaves_nothing(
    scratch: Path, worktree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unusable upstream fails the step before any process starts; the lock is released."""
    from jigs.errors import CredentialProxyError
    from jigs.plugin import ModelRoute
    from jigs.policy._lock import worktree_locked
    from jigs.steps import run_agent
    from jigs_harness_pi import OpenAICompatible, PiDescriptor, PiHarness

    monkeypatch.setattr(
        PiHarness,
        "model_route",
        lambda self, d: ModelRoute(upstream="ftp://nowhere", key_env=KEY_ENV),
    )
    descriptor = PiDescriptor(
        model=OpenAICompatible(base_url="http://127.0.0.1:9/v1", model="m", api_key_env=KEY_ENV)
    )
    with observe_launches() as launches, pytest.raises(CredentialProxyError):
        await run_agent(
            harness=descriptor, cwd=worktree, prompt="x", run=RunMetadata(workflow_run_id="r")
        )
    assert not launches
    assert not worktree_locked(worktree)


async def test_the_runner_closes_from_another_task_and_cancel_scope(
    require_cli: Callable[[str], Path],
    scratch: Path,
    worktree: Path,
    endpoints: list[ModelEndpoint],
) -> None:
    """The proxy holds no cancel scope in the caller's task: a runner opened inside a cancel
    scope that has ended since, closed from another task, still stops the proxy."""
    from jigs.steps import create_agent_runner

    require_cli("codex")
    async with ModelServer() as server:
        with anyio.fail_after(30):
            runner = await create_agent_runner(
                _codex(server), cwd=worktree, run=RunMetadata(workflow_run_id="r")
            )
        (endpoint,) = endpoints
        port = urlsplit(endpoint.base_url).port
        assert port is not None
        assert not _port_refuses(port)
        async with anyio.create_task_group() as group:
            group.start_soon(runner.close)
    assert _port_refuses(port)


async def test_a_cli_said_done_has_its_proxy_stopped_while_the_close_waits(
    require_cli: Callable[[str], Path],
    scratch: Path,
    worktree: Path,
    endpoints: list[ModelEndpoint],
) -> None:
    """Once a kind says, during the close, that its CLI is done (``ctx.sessions_complete()``,
    Codex's after it killed its app server), the core stops the step's proxy at once, while the
    kind still waits for its processes to be gone, not after."""
    from jigs.steps import create_agent_runner

    require_cli("codex")
    async with ModelServer() as server:
        server.add(text("proxied answer"))
        with anyio.fail_after(60):
            runner = await create_agent_runner(
                _codex(server), cwd=worktree, run=RunMetadata(workflow_run_id="r")
            )
            from jigs.models import generate_text

            assert (await generate_text(runner.model, prompt="hi")).text == "proxied answer"
        (endpoint,) = endpoints
        port = urlsplit(endpoint.base_url).port
        assert port is not None
        assert not _port_refuses(port)
        ctx = runner._step.ctx
        assert ctx is not None
        refused_while_waiting: list[bool] = []

        async def a_cli_that_takes_its_time_to_die() -> None:
            ctx.sessions_complete()
            for _ in range(500):
                if _port_refuses(port):
                    break
                await anyio.sleep(0.01)
            refused_while_waiting.append(_port_refuses(port))

        runner._step.stack.push_async_callback(a_cli_that_takes_its_time_to_die)
        await runner.close()
    assert refused_while_waiting == [True]
    assert _port_refuses(port)


def test_an_http_proxy_in_the_agents_env_is_bypassed_for_the_loopback_proxy() -> None:
    from jigs.engine._pipeline import _bypass_proxy_for_loopback

    plain = {"PATH": "/bin"}
    assert _bypass_proxy_for_loopback(dict(plain)) == plain
    proxied = _bypass_proxy_for_loopback({"HTTPS_PROXY": "http://corp:3128"})
    assert proxied["NO_PROXY"] == proxied["no_proxy"] == "127.0.0.1"
    kept = _bypass_proxy_for_loopback({"https_proxy": "http://corp:3128", "no_proxy": "corp.lan"})
    assert kept == {"https_proxy": "http://corp:3128", "no_proxy": "corp.lan,127.0.0.1"}
    same = {"HTTP_PROXY": "http://corp:3128", "NO_PROXY": "localhost, 127.0.0.1"}
    assert _bypass_proxy_for_loopback(dict(same)) == same
