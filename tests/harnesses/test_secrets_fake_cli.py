"""A CLI that prints every environment value to stderr and exits 1: the errors of every kind and
``jigs doctor`` show none of the step's secrets, whatever the variables are called."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jigs import harnesses
from jigs.errors import JigsError
from jigs.models import generate_text
from jigs.steps import create_agent_runner, run_agent

pytestmark = pytest.mark.anyio

#: Secret values under names that say nothing about secrets (only the declarations do).
SECRETS = {
    "GATEWAY_VALUE": "model-key-correct-horse-1",  # the model key, named by api_key_env
    "GH_TOKEN": "ghp_fakefakefakefakefakefake0123",  # agents.env
    "DEPLOY_WORDS": "battery-staple-deploy-phrase",  # agents.env, a plain name
    "MCP_CREDENTIAL_X": "mcp-credential-value-77",  # an MCP server's env
}
PROXY_PASSWORD = "proxy-pass-hunter2"
PROXY = f"http://bob:{PROXY_PASSWORD}@127.0.0.1:9"
EVERY_SECRET = [*SECRETS.values(), PROXY_PASSWORD]

#: Prints every variable (so every secret), a filler, then the secrets again as the last lines:
#: whatever part of stderr a kind keeps (head, tail), it holds whole secret values.
FAKE = """
import os, sys
dump = "".join(f"{k}={v}\\n" for k, v in os.environ.items())
last = "".join(f"{v}\\n" for k, v in os.environ.items() if k in NAMES)
sys.stderr.write(last + dump + "-" * 400 + "\\n" + last)
sys.stderr.flush()
sys.exit(1)
"""


@pytest.fixture
def leaky_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "leaky-cli"
    names = [*SECRETS, "HTTPS_PROXY"]
    script.write_text(f"#!{sys.executable}\nNAMES = {names!r}\n{FAKE}")
    script.chmod(0o755)
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HTTPS_PROXY", PROXY)
    for var in ("JIGS_CODEX_EXECUTABLE", "JIGS_PI_EXECUTABLE", "JIGS_CLAUDE_EXECUTABLE"):
        monkeypatch.setenv(var, str(script))
    monkeypatch.setenv("IS_SANDBOX", "1")
    return script


def _mcp() -> dict[str, object]:
    return {
        "s": {
            "command": sys.executable,
            "args": ["-c", "pass"],
            "env": {"TOKEN_FOR_SERVER": "MCP_CREDENTIAL_X"},
            "probe": {"tool": "t"},
        }
    }


DESCRIPTORS = {
    "codex": lambda: harnesses.codex(
        model="m",
        base_url="http://127.0.0.1:9/v1",
        api_key_env="GATEWAY_VALUE",
        startup_timeout=5,
    ),
    "pi": lambda: harnesses.pi(
        model={
            "type": "openai-compatible",
            "model": "m",
            "base_url": "http://127.0.0.1:9/v1",
            "api_key_env": "GATEWAY_VALUE",
        }
    ),
    "claude": lambda: harnesses.claude(
        base_url="http://127.0.0.1:9", api_key_env="GATEWAY_VALUE", max_retries=0
    ),
}


def _assert_clean(text: str) -> None:
    for value in EVERY_SECRET:
        assert value not in text
        assert value[-10:] not in text, "a secret is shown in part"


async def _one_turn(kind: str, worktree: Path, run_meta: Any) -> None:
    agents_env = ["GH_TOKEN", "DEPLOY_WORDS", "IS_SANDBOX"]
    if kind == "pi":  # a runner-less kind: one run_agent call
        await run_agent(
            harness=DESCRIPTORS[kind](),
            cwd=worktree,
            prompt="hello",
            run=run_meta,
            agents_env=agents_env,
        )
        return
    async with create_agent_runner(
        DESCRIPTORS[kind](), cwd=worktree, run=run_meta, agents_env=agents_env
    ) as runner:
        await generate_text(runner.model, prompt="hello")


@pytest.mark.parametrize("kind", sorted(DESCRIPTORS))
async def test_a_crashing_cli_that_prints_its_env_leaks_no_secret(
    kind: str, leaky_cli: Path, worktree: Path, run_meta: object
) -> None:
    with pytest.raises(JigsError) as info:
        await _one_turn(kind, worktree, run_meta)
    error = info.value
    shown = [str(error), repr(error), *(str(a) for a in error.args)]
    tail = getattr(error, "stderr_tail", "")
    shown.append(tail)
    _assert_clean("\n".join(shown))
    # the CLI did run and print its environment: redaction, not luck, hid it
    assert "[redacted]" in tail, str(error)


def test_jigs_doctor_shows_no_secret(leaky_cli: Path, tmp_path: Path) -> None:
    project = tmp_path / "factory"
    project.mkdir()
    (project / "jigs.toml").write_text('[agents]\nenv = ["GH_TOKEN", "DEPLOY_WORDS"]\n')
    result = subprocess.run(
        [sys.executable, "-m", "jigs.cli", "doctor", "--harness", "codex", "--harness", "pi"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        cwd=project,
        check=False,
        timeout=120,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output  # the fake CLI fails its checks
    assert "[redacted]" in output, output  # the checks did show what the CLI printed
    _assert_clean(output)
