"""The real Pi CLI against jigs_testing.ModelServer (Chat Completions)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jigs import RunMetadata
from jigs.errors import AgentSessionError, AgentTurnError
from jigs.policy._paths import data_dir
from jigs.steps import run_agent
from jigs_testing import ModelServer, error, reply, text, tool_call
from pydantic import BaseModel

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("pi_cli", "model_key")]


def _files_under(*roots: Path) -> list[Path]:
    return [p for root in roots if root.exists() for p in root.rglob("*") if p.is_file()]


async def test_two_turns_with_resume_carry_history(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    async with ModelServer([text("first answer"), reply(lambda r: f"saw {r.message_count}")]) as s:
        harness = pi_descriptor(s.openai_base_url)
        first = await run_agent(
            harness=harness, cwd=worktree, prompt="remember PINEAPPLE-17", run=run_meta
        )
        assert first.text == "first answer"
        assert first.session is not None
        assert first.session.harness == "pi"
        second = await run_agent(
            harness=harness,
            cwd=worktree,
            prompt="what did I say?",
            run=run_meta,
            resume=first.session,
        )
        assert second.session is not None
        assert second.session.id != first.session.id  # resuming forks: a new id
        requests = s.model_requests
    assert len(requests) == 2
    assert "PINEAPPLE-17" not in requests[0].text().split("remember")[0]
    later = requests[1]
    assert "PINEAPPLE-17" in later.text()
    assert "first answer" in later.text()
    assert later.message_count > requests[0].message_count
    assert second.text == f"saw {later.message_count}"
    assert first.usage.input_tokens is not None


async def test_scripted_bash_tool_creates_file(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    command = "printf 'made by pi' > created.txt; printf %s \"$PI_CODING_AGENT_DIR\" > home.txt"
    script = [tool_call("bash", {"command": command}), text("done")]
    async with ModelServer(script) as s:
        result = await run_agent(
            harness=pi_descriptor(s.openai_base_url), cwd=worktree, prompt="make it", run=run_meta
        )
    assert result.text == "done"
    assert (worktree / "created.txt").read_text() == "made by pi"
    home = Path((worktree / "home.txt").read_text())
    assert home.name.startswith("jigs-pi-agent-")
    assert not home.exists()  # the private agent dir went with the step
    assert result.provider_metadata is not None
    assert result.provider_metadata["pi"]["tool_calls"] == 1


async def test_env_canaries_and_key_stay_out(
    pi_descriptor: Callable[..., dict[str, Any]],
    worktree: Path,
    run_meta: RunMetadata,
    monkeypatch: pytest.MonkeyPatch,
    model_key: str,
) -> None:
    canary = "canary-value-0e5d1a"
    monkeypatch.setenv("JIGS_PI_CANARY", canary)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", canary + "-aws")
    async with ModelServer([tool_call("bash", {"command": "env"}), text("listed")]) as s:
        result = await run_agent(
            harness=pi_descriptor(s.openai_base_url), cwd=worktree, prompt="env?", run=run_meta
        )
        requests = s.model_requests
    assert result.text == "listed"
    tool_output = requests[1].text()
    assert "PATH=" in tool_output  # the tool really ran and printed the environment
    assert canary not in tool_output
    assert model_key not in tool_output
    assert "JIGS_TEST_OPENAI_KEY" not in tool_output
    # no file jigs wrote (sessions, state, the data dir) holds the key's value
    for path in _files_under(data_dir(), worktree):
        assert model_key.encode() not in path.read_bytes(), path


async def test_server_500_is_a_typed_error(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    async with ModelServer([error(500, "upstream exploded")]) as s:
        with pytest.raises(AgentTurnError, match="upstream exploded"):
            await run_agent(
                harness=pi_descriptor(s.openai_base_url), cwd=worktree, prompt="hi", run=run_meta
            )
        assert len(s.model_requests) == 1  # retries are off by default


class Verdict(BaseModel):
    approved: bool
    reasons: list[str]


async def test_structured_output(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    async with ModelServer([text('{"approved": true, "reasons": ["tests pass"]}')]) as s:
        result = await run_agent(
            harness=pi_descriptor(s.openai_base_url),
            cwd=worktree,
            prompt="review",
            run=run_meta,
            output=Verdict,
        )
        assert '"approved"' in s.model_requests[0].text()  # the schema went with the prompt
    assert result.output == Verdict(approved=True, reasons=["tests pass"])


async def test_structured_output_reasks_once(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    script = [text("Sure! It looks fine."), text('{"approved": false, "reasons": ["typo"]}')]
    async with ModelServer(script) as s:
        result = await run_agent(
            harness=pi_descriptor(s.openai_base_url),
            cwd=worktree,
            prompt="review",
            run=run_meta,
            output=Verdict,
        )
        requests = s.model_requests
    assert result.output == Verdict(approved=False, reasons=["typo"])
    assert len(requests) == 2
    assert "could not be used" in requests[1].text()
    assert "Sure! It looks fine." in requests[1].text()  # same session: history carried


async def test_resume_of_unknown_session_fails_before_launch(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    from jigs import AgentSessionRef
    from jigs.harnesses import load

    async with ModelServer([text("never")]) as s:
        harness = load(pi_descriptor(s.openai_base_url))
        for bad in ("no-such-session", "*", "../x"):
            ref = AgentSessionRef(harness="pi", id=bad, descriptor=harness.describe())
            with pytest.raises(AgentSessionError, match=r"is missing|not one jigs recorded"):
                await run_agent(
                    harness=harness, cwd=worktree, prompt="hi", run=run_meta, resume=ref
                )
        assert s.model_requests == []


async def test_demo_plan_writes_with_pis_own_tool_and_recalls(
    worktree: Path, run_meta: RunMetadata, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jigs_harness_pi import PiHarness

    async with ModelServer() as s:
        plan = PiHarness().demo_plan(s)
        assert plan is not None
        for name, value in plan.host_env.items():
            monkeypatch.setenv(name, value)
        prompt = plan.write_file(s, "hello.txt", "hi from pi")
        first = await run_agent(harness=plan.descriptor, cwd=worktree, prompt=prompt, run=run_meta)
        assert (worktree / "hello.txt").read_text() == "hi from pi"
        second = await run_agent(
            harness=plan.descriptor,
            cwd=worktree,
            prompt=plan.recall(s),
            run=run_meta,
            resume=first.session,
        )
        assert f"carried {s.model_requests[-1].message_count} messages" in second.text
        assert s.model_requests[-1].message_count > s.model_requests[0].message_count


@pytest.mark.parametrize("wire", ["responses", "anthropic"])
async def test_other_model_sources(
    pi_descriptor: Callable[..., dict[str, Any]],
    worktree: Path,
    run_meta: RunMetadata,
    wire: str,
) -> None:
    async with ModelServer([text(f"hello over {wire}")]) as s:
        data = pi_descriptor(s.openai_base_url)
        if wire == "responses":
            data["model"]["api"] = "responses"
        else:
            data["model"] |= {"type": "anthropic-compatible", "base_url": s.anthropic_base_url}
        result = await run_agent(harness=data, cwd=worktree, prompt="hi", run=run_meta)
        (request,) = s.model_requests
    assert result.text == f"hello over {wire}"
    assert request.wire == wire


@pytest.mark.parametrize("context_files", [False, True])
async def test_context_files_only_when_asked(
    pi_descriptor: Callable[..., dict[str, Any]],
    worktree: Path,
    run_meta: RunMetadata,
    context_files: bool,
) -> None:
    (worktree / "AGENTS.md").write_text("AGENTS-MD-MARKER-93a1: always answer in French\n")
    (worktree / ".pi").mkdir()
    (worktree / ".pi" / "settings.json").write_text('{"defaultTools": ["ls"]}')
    async with ModelServer([text("ok")]) as s:
        data = pi_descriptor(s.openai_base_url, context_files=context_files)
        await run_agent(harness=data, cwd=worktree, prompt="hi", run=run_meta)
        (request,) = s.model_requests
    assert ("AGENTS-MD-MARKER-93a1" in request.text()) is context_files
    assert "bash" in request.tool_names()  # the worktree's .pi/settings.json was ignored


def _user_texts(body: Any) -> list[str]:
    """The user messages' text of a Chat Completions request body."""
    texts = []
    for message in body.get("messages") or []:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        texts.append(content)
    return texts


async def test_a_5mb_prompt_reaches_the_model_intact(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    line = "0123456789 abcdefghij ünïcødé -- @README.md\n"
    prompt = "-BEGIN-\n" + line * (5 * 1024 * 1024 // len(line)) + "-END-"
    async with ModelServer([text("read it")]) as s:
        result = await run_agent(
            harness=pi_descriptor(s.openai_base_url), cwd=worktree, prompt=prompt, run=run_meta
        )
        (request,) = s.model_requests
    assert result.text == "read it"
    assert len(prompt.encode()) > 5 * 1024 * 1024
    assert _user_texts(request.body) == [prompt]


async def test_prompt_and_resource_keys_reach_the_request(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    (worktree / "prompts").mkdir()
    (worktree / "prompts" / "fix.md").write_text("TEMPLATE-MARKER-5b: fix the build\n")
    skill = worktree / "skills" / "review"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: review\ndescription: SKILL-MARKER-c2 reviews code\n---\nReview it.\n"
    )
    async with ModelServer([text("ok")]) as s:
        data = pi_descriptor(
            s.openai_base_url,
            append_system_prompt=["README.md", "APPENDED-MARKER-e4"],
            prompt_templates=["prompts/fix.md"],
            skills=["skills/review"],
        )
        await run_agent(harness=data, cwd=worktree, prompt="/fix", run=run_meta)
        (request,) = s.model_requests
    system = " ".join(
        str(m.get("content"))
        for m in request.body["messages"]
        if m["role"] in {"system", "developer"}
    )
    assert "APPENDED-MARKER-e4" in system
    assert "README.md" in system  # sent as text, not replaced by the file's content
    assert "scratch repo" not in system
    assert "SKILL-MARKER-c2" in system
    assert _user_texts(request.body)[0].startswith("TEMPLATE-MARKER-5b")


async def test_system_prompt_and_thinking_reach_the_request(
    pi_descriptor: Callable[..., dict[str, Any]], worktree: Path, run_meta: RunMetadata
) -> None:
    async with ModelServer([text("ok")]) as s:
        data = pi_descriptor(
            s.openai_base_url, system_prompt="SYSTEM-MARKER-9d only", thinking="high"
        )
        data["model"]["reasoning"] = True
        await run_agent(harness=data, cwd=worktree, prompt="hi", run=run_meta)
        (request,) = s.model_requests
    system = [m for m in request.body["messages"] if m["role"] in {"system", "developer"}]
    assert "SYSTEM-MARKER-9d only" in str(system[0]["content"])
    assert "running inside pi" not in request.text()
    assert request.body["reasoning_effort"] == "high"
