"""Bad input never escapes as a raw exception (issue 10): a property test over every argument of a
step call. Whatever a caller passes, only ``JigsError`` subclasses come out, no secret-shaped
value is echoed, and a refused call launches nothing and leaves the worktree unlocked.

Decided and documented here (README "Bad input"): an empty prompt or one with a NUL byte is
refused; a prompt longer than one argv element is passed through stdin (never E2BIG); a bare
string as ``agents_env`` is refused; ``cwd`` that is empty, ``/`` or inside the jigs data dir is
refused; any non-empty workflow id is accepted (encoded for paths).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jigs import AgentSessionRef, RunMetadata
from jigs.errors import InvalidInputError, JigsError, PromptError
from jigs.policy._lock import worktree_locked
from jigs.policy._paths import data_dir
from jigs.processes import live_groups, observe_launches
from jigs.steps import create_agent_runner, run_agent

#: A value shaped like a secret; it must never appear in an error.
SECRET = "sk-live-hypothesis-canary-4f9a8b7c6d5e4f3a2b1c"
pytestmark = pytest.mark.anyio
EXAMPLES = int(os.environ.get("JIGS_HYPOTHESIS_EXAMPLES", "250"))

_nasty_text = st.one_of(
    st.just(""),
    st.just(" "),
    st.just("\x00"),
    st.just(SECRET),
    st.just(f"Bearer {SECRET}"),
    st.just(f"https://user:{SECRET}@example.invalid/?token={SECRET}"),
    st.just("x" * 300_000),
    st.just("../../etc/passwd"),
    st.text(max_size=30),
)
_nasty = st.one_of(
    _nasty_text,
    st.none(),
    st.integers(),
    st.floats(allow_nan=True),
    st.booleans(),
    st.lists(_nasty_text, max_size=3),
    st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), _nasty_text, max_size=3),
)
_keys = st.one_of(
    st.sampled_from(
        [
            "kind",
            "model",
            "prefix",
            "mcp_servers",
            "turn_timeout",
            "idle_timeout",
            "max_turns",
            "max_budget_usd",
            "env",
            "api_key",
            "settings",
        ]
    ),
    st.text(max_size=10),
    st.integers(),
    st.none(),
)
_descriptor = st.one_of(
    st.just({"kind": "echo"}),
    st.dictionaries(_keys, _nasty, max_size=4).map(lambda d: {"kind": "echo", **d}),
    st.dictionaries(_keys, _nasty, max_size=4),
    _nasty,
)


def _cwd(worktree: Path) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.just(worktree),
        st.just(str(worktree)),
        st.sampled_from(["", " ", "/", "/nonexistent/jigs", f"{worktree}\x00x", SECRET]),
        st.just("DATA"),  # replaced by the data dir (only known inside the test)
        st.just("DATA/locks"),
        st.just(worktree / "README.md"),
        _nasty,
    )


_run = st.one_of(
    st.just("VALID"),
    st.builds(lambda s: {"workflow_run_id": s}, _nasty),
    st.builds(lambda s: {"workflow_run_id": "r", "attempt": s}, _nasty),
    _nasty,
)
_resume = st.one_of(
    st.none(),
    st.builds(lambda i: {"harness": "echo", "id": i, "descriptor": '{"kind":"echo"}'}, _nasty_text),
    st.builds(lambda: {"harness": "echo", "id": "x" * 10_000, "descriptor": "{}"}),
    st.builds(lambda: {"harness": "echo", "id": "a/../../b", "descriptor": "{}"}),
    _nasty,
)
_agents_env = st.one_of(
    st.none(),
    st.just("IS_SANDBOX"),
    st.lists(_nasty_text, max_size=3),
    st.lists(st.sampled_from(["PATH", "HOME", "IS_SANDBOX", "ANTHROPIC_API_KEY"]), max_size=3),
    _nasty,
)


def _echoed(exc: BaseException) -> bool:
    shown = f"{exc}\n{exc!r}\n{exc.args!r}"
    return SECRET in shown


def _fill(value: Any, worktree: Path) -> Any:
    if value == "DATA":
        return str(data_dir())
    if value == "DATA/locks":
        path = data_dir() / "locks"
        path.mkdir(parents=True, exist_ok=True)
        return str(path)
    return value


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_step_call_fails_only_with_jigs_errors_and_never_echoes_a_secret(
    data: st.DataObject, worktree: Path, run_meta: RunMetadata
) -> None:
    descriptor = data.draw(_descriptor, label="harness")
    cwd = _fill(data.draw(_cwd(worktree), label="cwd"), worktree)
    run = data.draw(_run, label="run")
    run = run_meta if run == "VALID" else run
    resume = data.draw(_resume, label="resume")
    agents_env = data.draw(_agents_env, label="agents_env")

    async def attempt() -> None:
        runner = await create_agent_runner(
            descriptor, cwd=cwd, run=run, resume=resume, agents_env=agents_env
        )
        await runner.close()

    refused: JigsError | None = None
    with observe_launches() as launched:
        try:
            anyio.run(attempt)
        except JigsError as exc:
            refused = exc
        except BaseException as exc:  # pragma: no cover - the property's failure
            pytest.fail(f"raw {type(exc).__name__} escaped: {exc!r:.300}")
    if refused is not None:
        assert not _echoed(refused), f"{type(refused).__name__} echoed the secret: {refused}"
        assert launched == [], "a refused call launched a process"
    assert not worktree_locked(worktree)
    assert not live_groups()


@settings(max_examples=max(50, EXAMPLES // 4), deadline=None)
@given(prompt=_nasty)
def test_bad_prompts_are_refused_before_anything_starts(prompt: Any) -> None:
    # anything that is not a non-empty string without NUL (or a list of text parts that joins
    # into one) is refused up front
    if isinstance(prompt, str) and prompt.strip() and "\x00" not in prompt:
        return
    if isinstance(prompt, list | tuple) and all(isinstance(p, str) for p in prompt):
        text = "\n\n".join(p for p in prompt if p.strip())
        if text.strip() and "\x00" not in text:
            return
    with pytest.raises(PromptError) as info:
        anyio.run(
            lambda: run_agent(
                harness={"kind": "echo"},
                cwd="/nonexistent-never-checked",
                prompt=prompt,
                run=RunMetadata(workflow_run_id="r"),
            )
        )
    assert not _echoed(info.value)


@pytest.mark.parametrize("prompt", ["", "   \n", "a\x00b"])
async def test_empty_and_nul_prompts_are_refused(prompt: str, worktree: Path, run_meta) -> None:
    with observe_launches() as launched, pytest.raises(PromptError):
        await run_agent(harness={"kind": "echo"}, cwd=worktree, prompt=prompt, run=run_meta)
    assert launched == []
    assert not worktree_locked(worktree)


async def test_a_5mb_prompt_goes_through_stdin_not_argv(worktree: Path, run_meta) -> None:
    prompt = "y" * 5_000_000
    with observe_launches() as launched:
        result = await run_agent(
            harness={"kind": "echo"}, cwd=worktree, prompt=prompt, run=run_meta
        )
    assert result.text.startswith("echo: yyyy")
    assert len(result.text) > 5_000_000
    assert all(len(arg) < 200_000 for launch in launched for arg in launch.argv)


@pytest.mark.parametrize(
    ("cwd", "fragment"),
    [("", "empty"), ("/", "filesystem root"), ("DATA", "jigs data directory")],
)
async def test_unsafe_worktrees_are_refused(cwd: str, fragment: str, run_meta) -> None:
    cwd = str(data_dir()) if cwd == "DATA" else cwd
    with pytest.raises(InvalidInputError, match=fragment) as info:
        await create_agent_runner({"kind": "echo"}, cwd=cwd, run=run_meta)
    assert info.value.argument == "cwd"


async def test_a_bare_string_agents_env_is_refused(worktree: Path, run_meta) -> None:
    with pytest.raises(InvalidInputError, match="not a single string"):
        await create_agent_runner(
            {"kind": "echo"}, cwd=worktree, run=run_meta, agents_env="IS_SANDBOX"
        )


async def test_any_workflow_id_is_accepted_and_encoded_for_paths(worktree: Path) -> None:
    run = RunMetadata(workflow_run_id="review/PR-12 ../../x")
    result = await run_agent(harness={"kind": "echo"}, cwd=worktree, prompt="hi", run=run)
    assert result.session is not None
    runs = data_dir() / "runs"
    assert [p.name for p in runs.iterdir()] != []
    assert all("/" not in p.name and p.name not in {".", ".."} for p in runs.iterdir())
    assert not (data_dir().parent / "x").exists()


async def test_a_long_session_id_is_refused_as_a_session_error(worktree: Path, run_meta) -> None:
    from jigs.errors import AgentSessionError

    ref = AgentSessionRef(harness="echo", id="x" * 10_000, descriptor='{"kind":"echo"}')
    with pytest.raises(AgentSessionError) as info:
        await create_agent_runner({"kind": "echo"}, cwd=worktree, run=run_meta, resume=ref)
    assert len(str(info.value)) < 1000
    assert not worktree_locked(worktree)


ZOMBIE_CHECK = """
import os, sys
import anyio
from jigs import RunMetadata, harnesses
from jigs.errors import JigsError
from jigs.steps import create_agent_runner, run_agent

def children():
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == str(os.getpid()):
                found.append((int(entry), fields[0]))
    return found

async def main():
    pi = harnesses.pi(model={"type": "openai-compatible", "model": "m",
                             "base_url": "http://127.0.0.1:9/v1"})
    run = RunMetadata(workflow_run_id="zombie")
    try:
        if sys.argv[2] == "runner":
            async with create_agent_runner(pi, cwd=sys.argv[1], run=run):
                pass
        else:
            await run_agent(harness=pi, cwd=sys.argv[1], prompt="", run=run)
    except JigsError as exc:
        print(type(exc).__name__)
    print(children())

anyio.run(main)
"""


@pytest.mark.parametrize("call", ["runner", "empty prompt"])
def test_a_refused_call_leaves_no_child_process_not_even_a_zombie(
    call: str, worktree: Path
) -> None:
    """A fresh process (the isolation probe starts with its first step call): a
    create_agent_runner(pi) refused for having no model, and a run_agent refused for its
    prompt, leave no child behind (the probe was once left a zombie until exit)."""
    import subprocess
    import sys

    ran = subprocess.run(
        [sys.executable, "-c", ZOMBIE_CHECK, str(worktree), call.split(maxsplit=1)[0]],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    refused, children = ran.stdout.strip().splitlines()
    assert refused == ("PromptError" if call == "empty prompt" else "ModelNotAvailableError"), (
        refused
    )
    assert children == "[]", children
