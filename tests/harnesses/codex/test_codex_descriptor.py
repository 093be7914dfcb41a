"""Descriptor breadth: every data-valued key reaches Codex (the model request, the JSON-RPC
params or the private config); limits Codex cannot count are refused."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest
from codex_helpers import KEY_ENV, KEY_VALUE
from jigs import harnesses
from jigs.errors import DescriptorError
from jigs.models import generate_object, generate_text
from jigs.steps import create_agent_runner, run_agent
from jigs_harness_codex._home import render_config
from jigs_testing import text
from pydantic import BaseModel

pytestmark = pytest.mark.anyio

FAKE = Path(__file__).with_name("fake_app_server.py")


@pytest.mark.real_cli("codex")
async def test_model_request_keys_reach_the_model(model_server, descriptor, worktree, run_meta):
    model_server.add(text("tuned"), text("searching"))
    tuned = descriptor(
        base_instructions="BASE-INSTRUCTIONS-7d1",
        service_tier="flex",
        reasoning_summary="detailed",
        effort="low",
        web_search="disabled",
    )
    result = await run_agent(harness=tuned, cwd=worktree, prompt="hi", run=run_meta, agents_env=[])
    assert result.text == "tuned"
    body = model_server.model_requests[0].body
    assert body["service_tier"] == "flex"
    assert body["reasoning"] == {"effort": "low", "summary": "detailed"}
    tools = {tool.get("type") for tool in body["tools"]}
    assert "web_search" not in tools
    assert "BASE-INSTRUCTIONS-7d1" in model_server.model_requests[0].text()

    await run_agent(
        harness=descriptor(web_search="live"),
        cwd=worktree,
        prompt="hi",
        run=run_meta,
        agents_env=[],
    )
    body = model_server.model_requests[1].body
    assert "web_search" in {tool.get("type") for tool in body["tools"]}
    assert "BASE-INSTRUCTIONS-7d1" not in model_server.model_requests[1].text()
    assert "service_tier" not in body


@pytest.fixture
def recording_codex(tmp_path, monkeypatch):
    path = tmp_path / "fake-codex"
    path.write_text(f"#!{sys.executable}\n{FAKE.read_text()}")
    path.chmod(0o755)
    monkeypatch.setenv("JIGS_CODEX_EXECUTABLE", str(path))
    monkeypatch.setenv(KEY_ENV, KEY_VALUE)


def _sent(worktree: Path, method: str) -> list[dict]:
    lines = (worktree / "fake-codex-rpc.jsonl").read_text().splitlines()
    return [m["params"] for m in map(json.loads, lines) if m.get("method") == method]


class Verdict(BaseModel):
    ok: bool


async def test_thread_and_turn_keys_reach_the_app_server(recording_codex, worktree, run_meta):
    harness = harnesses.codex(
        model="gpt-test",
        base_url="http://127.0.0.1:9/v1",
        api_key_env=KEY_ENV,
        personality="pragmatic",
        developer_instructions="DEV-1",
        base_instructions="BASE-1",
        service_tier="fast",
        effort="medium",
        reasoning_summary="concise",
    )
    async with create_agent_runner(harness, cwd=worktree, run=run_meta, agents_env=[]) as runner:
        await generate_text(runner.model, prompt="first")
        await generate_text(
            runner.model, prompt="second", provider_options={"codex": {"effort": "xhigh"}}
        )
        answer = await generate_object(runner.model, schema=Verdict, prompt="third")
    assert answer.object == Verdict(ok=True)
    (thread,) = _sent(worktree, "thread/start")
    assert thread["personality"] == "pragmatic"
    assert thread["developerInstructions"] == "DEV-1"
    assert thread["baseInstructions"] == "BASE-1"
    assert thread["serviceTier"] == "fast"
    assert thread["model"] == "gpt-test"
    assert (thread["approvalPolicy"], thread["sandbox"]) == ("never", "danger-full-access")
    first, second, third, *_ = _sent(worktree, "turn/start")
    assert (first["effort"], first["summary"]) == ("medium", "concise")
    assert second["effort"] == "xhigh"  # a per-call override
    assert "outputSchema" not in first
    schema = third["outputSchema"]
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["ok"]


def test_config_keys_reach_the_private_config():
    config = tomllib.loads(
        render_config(harnesses.codex(web_search="cached", model_verbosity="low"), {})[0]
    )
    assert config["web_search"] == "cached"
    assert config["model_verbosity"] == "low"
    plain = tomllib.loads(render_config(harnesses.codex(), {})[0])
    assert "web_search" not in plain
    assert "model_verbosity" not in plain


def test_limits_and_timeouts_come_from_the_base_descriptor():
    codex = harnesses.codex(max_turns=3, turn_timeout=120, idle_timeout=30)
    assert (codex.max_turns, codex.turn_timeout, codex.idle_timeout) == (3, 120, 30)
    with pytest.raises(DescriptorError) as info:
        harnesses.codex(max_budget_usd=1.0)
    assert "max_budget_usd" in str(info.value)
    assert "no cost" in str(info.value)
    for bad in (
        {"personality": "grumpy"},
        {"reasoning_summary": "long"},
        {"web_search": "on"},
        {"service_tier": "a b"},
        {"model_verbosity": "loud"},
    ):
        with pytest.raises(DescriptorError) as info:
            harnesses.codex(**bad)
        assert next(iter(bad)) in str(info.value)
