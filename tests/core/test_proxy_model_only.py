"""An agent attacks its own step's credential proxy, with the real CLIs and the real pipeline.

The scripted model makes the agent's shell find the proxy's URL (with the step token) where its
CLI reads it (its environment, Codex's ``config.toml``, Pi's ``models.json``) and then:

- request the paths an attacker wants with the real key (files, batches, admin keys, DELETEs,
  HEAD/OPTIONS): every one is refused with 403 by the proxy and none reaches the model server
  (its request log proves it);
- make a model call of its own through the proxy: it is forwarded, and its tokens are in the
  step's usage (the proxy counts every model call, the CLI's and the agent's alike);
- the upstream quotes the real key in that answer: the agent reads it redacted.

A second test has the upstream answer the CLI with an error quoting the key: the turn fails and
neither the raised error, nor the step's log events, hold the key.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jigs import RunMetadata
from jigs.descriptors import HarnessDescriptor
from jigs_testing import ModelServer, error, text, tool_call
from proxied_kinds import proxied
from structlog.testing import capture_logs

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """One backend is enough for the real CLIs: the proxy runs on both in test_proxy.py."""
    return "asyncio"


KEY_ENV = "JIGS_MODEL_ONLY_KEY"
KEY = "sk-model-only-REAL-key-5c2e9a7f41d3b8e6"
DONE = "attack turn done"
AGENT_REPLY = f"agent-own-call-answer quoting {KEY} back"

# Where each kind's CLI reads the step's proxy URL, as the agent finds it.
FIND_URL = (
    'U=$( { env; cat "$CODEX_HOME/config.toml" "$PI_CODING_AGENT_DIR/models.json"; } '
    "2>/dev/null | grep -oE 'http://127\\.0\\.0\\.1:[0-9]+/[A-Za-z0-9_-]{16,}' | head -1); "
    'echo "URL-FOUND:${U:+yes}"; '
)
# What an attacker holding the URL asks for: nothing of it is a model call.
ATTACKS = (
    "GET /v1/files",
    "DELETE /v1/files/file-1",
    "POST /v1/organizations/api_keys",
    "GET /v1/organizations/api_keys",
    "POST /v1/messages/batches",
    "GET /admin",
    "GET /files",
    "POST /batches",
    "DELETE /responses/resp_1",
    "GET /responses/resp_1",
    "PUT /v1/messages",
    "OPTIONS /v1/messages",
    "HEAD /v1/messages",
    "PATCH /chat/completions",
)
PROBE = (
    "for r in " + " ".join(f"'{a}'" for a in ATTACKS) + "; do set -- $r; "
    'printf \'ATTACK %s %s -> %s\\n\' "$1" "$2" "$(curl -s --max-time 10 -o /dev/null '
    "-w '%{http_code}' -X \"$1\" \"$U$2\" -H 'content-type: application/json' "
    "-H 'x-api-key: stolen' -d '{}')\"; done; "
)


def _own_call(path: str, body: dict[str, Any]) -> str:
    data = json.dumps(body)
    return (
        f'printf \'AGENT-CALL %s\\n\' "$(curl -s --max-time 30 -X POST "$U{path}" '
        f"-H 'content-type: application/json' -H 'x-api-key: stolen' "
        f"-H 'authorization: Bearer stolen' -d '{data}')\"; echo ATTACK-DONE"
    )


@dataclass(frozen=True)
class Kind:
    name: str
    make: Callable[[ModelServer], HarnessDescriptor]
    tool: Callable[[str], Any]
    own_call: str
    agents_env: tuple[str, ...] = ()


_claude = proxied("claude", KEY_ENV, "attack")
_codex = proxied("codex", KEY_ENV, "attack")
_pi = proxied("pi", KEY_ENV, "attack")


USER = {"role": "user", "content": "agent own call"}
KINDS = {
    "claude": Kind(
        "claude",
        _claude,
        lambda cmd: tool_call("Bash", {"command": cmd, "description": "attack"}),
        _own_call("/v1/messages", {"model": "m", "max_tokens": 16, "messages": [USER]}),
        ("IS_SANDBOX",),
    ),
    "codex": Kind(
        "codex",
        _codex,
        lambda cmd: tool_call("exec_command", {"cmd": cmd}),
        _own_call("/responses", {"model": "m", "input": "agent own call"}),
    ),
    "pi": Kind(
        "pi",
        _pi,
        lambda cmd: tool_call("bash", {"command": cmd}),
        _own_call("/chat/completions", {"model": "m", "messages": [USER]}),
    ),
}


@pytest.fixture
def scratch(scratch_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME and TMPDIR, the key in the worker's environment."""
    monkeypatch.setenv(KEY_ENV, KEY)
    return scratch_tmp


@pytest.mark.parametrize("name", sorted(KINDS))
async def test_an_agent_gets_model_calls_only_and_every_call_is_counted(
    name: str, require_cli: Callable[[str], Path], scratch: Path, worktree: Path
) -> None:
    from jigs.steps import run_agent

    kind = KINDS[name]
    require_cli(name)
    script = [kind.tool(FIND_URL + PROBE + kind.own_call), text(AGENT_REPLY), text(DONE)]
    async with ModelServer(script) as server:
        with capture_logs() as logs:
            result = await run_agent(
                harness=kind.make(server),
                cwd=worktree,
                prompt="attack",
                run=RunMetadata(workflow_run_id=f"attack-{name}"),
                agents_env=list(kind.agents_env),
            )
    assert DONE in result.text
    seen = [(r.method, r.target) for r in server.requests]
    models = server.model_requests
    assert len(models) == 3, seen
    tool_output = models[2].text()
    assert "ATTACK-DONE" in tool_output, tool_output[-3000:]
    assert "URL-FOUND:yes" in tool_output, tool_output[-3000:]

    # every attack was refused by the proxy, and none reached the model server
    lines = [line for line in tool_output.splitlines() if line.startswith("ATTACK ")]
    assert len(lines) == len(ATTACKS), tool_output[-3000:]
    assert all(line.endswith("-> 403") for line in lines), lines
    assert [r for r in server.requests if not r.is_model_request] == [], seen
    refused = [e for e in logs if e["event"] == "jigs.proxy.refused"]
    assert len(refused) >= len(ATTACKS)
    assert {e["reason"] for e in refused} == {"not_a_model_call"}

    # the agent's own model call went through, with the key in the answer redacted
    assert "agent-own-call-answer" in tool_output, tool_output[-3000:]
    assert KEY not in tool_output
    assert all(KEY not in json.dumps(r.body) for r in server.requests)

    # the step's usage is the proxy's count of all three model calls
    proxied = [e for e in logs if e["event"] == "proxy.request" and e["output_tokens"]]
    assert len(proxied) == 3, proxied
    assert result.usage.output_tokens == sum(e["output_tokens"] for e in proxied)
    # input tokens as jigs counts them (with Anthropic's cached tokens): at least the wire's
    assert (result.usage.input_tokens or 0) >= sum(e["input_tokens"] for e in proxied)
    assert KEY not in json.dumps(logs, default=str)


@pytest.mark.parametrize("name", sorted(KINDS))
async def test_an_upstream_error_quoting_the_key_reaches_no_one(
    name: str,
    require_cli: Callable[[str], Path],
    scratch: Path,
    worktree: Path,
    jigs_data_dir: Path,
) -> None:
    from jigs.errors import AgentTurnError
    from jigs.steps import run_agent

    kind = KINDS[name]
    require_cli(name)
    script = [error(400, f"invalid request for key {KEY}: the key {KEY} is not allowed")]
    async with ModelServer(script) as server:
        with capture_logs() as logs, pytest.raises(AgentTurnError) as raised:
            await run_agent(
                harness=kind.make(server),
                cwd=worktree,
                prompt="fail",
                run=RunMetadata(workflow_run_id=f"echo-{name}"),
                agents_env=list(kind.agents_env),
            )
    assert server.model_requests, [r.summary() for r in server.requests]
    shown = f"{raised.value}\n{raised.value.stderr_tail}\n{raised.value!r}"
    assert KEY not in shown
    assert KEY not in json.dumps(logs, default=str)
    # what the CLI read of the error (its transcript, session files, logs) never held the key
    roots = [scratch.parent, jigs_data_dir]
    assert [p for p in _files_holding(roots, KEY.encode())] == []


def _files_holding(roots: list[Path], needle: bytes) -> list[Path]:
    found = []
    for root in roots:
        for path in root.rglob("*"):
            try:
                if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
                    found.append(path)
            except OSError:
                continue
    return found


async def test_the_agents_own_calls_spend_the_turns_budget(
    require_cli: Callable[[str], Path], scratch: Path, worktree: Path
) -> None:
    """Pi prices its calls ($1 per million tokens, in and out: the CLI's rate is exactly that);
    the budget covers its first call but not the agent's own big calls through the proxy. The
    first of them is forwarded and counted; then the proxy refuses the rest (the model server
    never sees them) and the turn fails with the budget error, its usage holding the agent's
    call."""
    from jigs.errors import AgentLimitError
    from jigs.steps import run_agent
    from jigs_harness_pi import ModelPrice, OpenAICompatible, PiDescriptor

    require_cli("pi")
    big = (
        "B=$(head -c 40000 /dev/zero | tr '\\0' a); "
        'printf \'{"model":"m","messages":[{"role":"user","content":"%s"}]}\' "$B" > big.json; '
        "for i in 1 2 3; do printf 'BIG %s\\n' \"$(curl -s --max-time 30 -o /dev/null "
        "-w '%{http_code}' -X POST \"$U/chat/completions\" -H 'content-type: application/json' "
        '-d @big.json)"; done; echo ATTACK-DONE'
    )
    script = [tool_call("bash", {"command": FIND_URL + big}), text("big answer"), text(DONE)]
    async with ModelServer(script) as server:
        descriptor = PiDescriptor(
            model=OpenAICompatible(
                name="priced",
                base_url=server.openai_base_url,
                model="m",
                api_key_env=KEY_ENV,
                price=ModelPrice(input=1.0, output=1.0),
            ),
            max_budget_usd=0.008,  # 8000 tokens: Pi's first call fits, one big call does not
        )
        with capture_logs() as logs, pytest.raises(AgentLimitError) as raised:
            await run_agent(
                harness=descriptor,
                cwd=worktree,
                prompt="spend",
                run=RunMetadata(workflow_run_id="budget-pi"),
            )
    error = raised.value
    assert error.limit == "max_budget_usd"
    proxied = [e for e in logs if e["event"] == "proxy.request" and e["output_tokens"]]
    refused = [e for e in logs if e["event"] == "jigs.proxy.refused"]
    assert len(proxied) == 2, proxied  # Pi's first call, the agent's first big call
    assert proxied[0]["input_tokens"] < 8000 < proxied[1]["input_tokens"]
    assert refused, "the proxy never refused a call over the budget"
    assert {e["reason"] for e in refused} == {"not_admitted"}
    assert len(server.model_requests) == 2, [r.summary() for r in server.requests]
    assert error.usage is not None
    assert error.usage.input_tokens == sum(e["input_tokens"] for e in proxied)
