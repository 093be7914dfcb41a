"""Docs that cannot drift: every Python block of the README and the docs site runs (or, when it
truly cannot run here, is type-checked), and the drivers below call what the blocks define for
real: the claude CLI against the local model server, the echo kind, and the author's guide's
``mini`` kind built from the guide's own blocks. The convention is in ``doc_blocks``."""

from __future__ import annotations

import ast
import inspect
import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from doc_blocks import ROOT, Block, all_blocks, assemble, check_options

pytestmark = pytest.mark.anyio
pytest_plugins = ["pytester"]

GUIDE = ROOT / "docs" / "guide" / "write-a-harness-kind.md"
BLOCKS = all_blocks()


def _distinct(blocks: list[Block]) -> list[Block]:
    """One test per distinct block (the product snippet is on three pages)."""
    seen: dict[tuple[str, tuple[tuple[str, str], ...]], Block] = {}
    for block in blocks:
        seen.setdefault((block.source, tuple(sorted(block.options.items()))), block)
    return list(seen.values())


RUN = _distinct(
    [b for b in BLOCKS if b.is_python and b.mode == "run" and b.options.get("drive") != "kit"]
)
KIT = _distinct([b for b in BLOCKS if b.options.get("drive") == "kit"])
TYPECHECK = _distinct([b for b in BLOCKS if b.is_python and b.mode == "typecheck"])


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch directory as cwd and HOME; the jigs data dir is already per test."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _factory_env(root: Path, names: list[str]) -> None:
    """A factory pyproject above the worktrees that passes ``names`` to agents (agents.env)."""
    (root / "pyproject.toml").write_text(f"[tool.jigs.agents]\nenv = {names!r}\n".replace("'", '"'))


def _git_worktree(root: Path) -> Path:
    tree = root / "worktree"
    tree.mkdir()
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    return tree


# ------------------------------------------------------------------ drivers


class Driven:
    """What a driver gets: the block's namespace and the test's fixtures."""

    def __init__(
        self,
        ns: dict[str, Any],
        root: Path,
        monkeypatch: pytest.MonkeyPatch,
        run: Any,
        require_cli: Callable[[str], Path],
    ) -> None:
        self.ns, self.root, self.monkeypatch = ns, root, monkeypatch
        self.run, self.require_cli = run, require_cli


def _claude_on(d: Driven, server: Any, made: list[dict[str, Any]] | None = None) -> Any:
    """Point the blocks' ``harnesses.claude(...)`` at ``server`` (the kind's own demo plan: its
    env on the host, its agents_env in a factory pyproject); ``made`` collects the settings
    each call got. Returns the plan."""
    import jigs.harnesses
    from jigs.registry._registry import default_registry
    from jigs_testing.plan import demo_plan_of

    plan = demo_plan_of(default_registry().get("claude"), server)
    assert plan is not None
    for name, value in plan.host_env.items():
        d.monkeypatch.setenv(name, value)
    _factory_env(d.root, list(plan.agents_env))

    def claude(**settings: Any) -> Any:
        if made is not None:
            made.append(settings)
        return type(plan.descriptor).from_data({**plan.descriptor.to_data(), **settings})

    d.monkeypatch.setattr(jigs.harnesses, "claude", claude, raising=False)
    return plan


async def _drive_explain(d: Driven) -> None:
    """The product snippet, with the real claude CLI against the local model server: the
    descriptor the snippet builds gets the server as its endpoint (the kind's own demo plan)."""
    from jigs_testing import ModelServer, reply, text

    d.require_cli("claude")
    async with ModelServer() as server:
        made: list[dict[str, Any]] = []
        _claude_on(d, server, made)
        server.add(text("The test expects 3 but the function returns 2."))
        worktree = _git_worktree(d.root)
        answer, session = await d.ns["explain"](str(worktree), d.run)
        assert answer == "The test expects 3 but the function returns 2."
        assert session is not None
        assert session.harness == "claude"
        server.add(reply(lambda req: text(f"{req.message_count} messages")))
        again, _ = await d.ns["explain"](str(worktree), d.run, session)
        assert again != "1 messages", "the resumed step did not carry the first turn"
        assert made == [{"model": "sonnet"}, {"model": "sonnet"}]


async def _drive_tools(d: Driven) -> None:
    """The tools example, with the real claude CLI against the local model server: the model
    calls the tool, whose result reaches its next request."""
    from jigs_testing import ModelServer, text, tool_call

    d.require_cli("claude")
    async with ModelServer() as server:
        plan = _claude_on(d, server)
        server.add(
            tool_call("mcp__tools__record_decision", {"ticket": "T-17", "decision": "fix"}),
            text("T-17: fix"),
        )
        worktree = _git_worktree(d.root)
        answer, decisions = await d.ns["triage"](str(worktree), d.run, plan.descriptor)
        assert answer == "T-17: fix"
        assert decisions == ["T-17: fix"]
        assert "recorded fix for T-17" in server.model_requests[1].text()


async def _drive_ask(d: Driven) -> None:
    """The ask_human example, with the real claude CLI against the local model server: the
    question ends the first turn, the answer reaches the resumed turn's model request."""
    from jigs_testing import ModelServer, text, tool_call

    d.require_cli("claude")
    async with ModelServer() as server:
        plan = _claude_on(d, server)
        question = "Postgres or SQLite?"
        server.add(
            tool_call("mcp__tools__ask_human", {"question": question}),
            text("Waiting for an answer."),
            text("Migrating to Postgres."),
        )
        worktree = _git_worktree(d.root)
        asked: list[str] = []

        def answer_of(text: str) -> str:
            asked.append(text)
            return "Postgres 17"

        answer = await d.ns["plan_migration"](str(worktree), d.run, answer_of, plan.descriptor)
        assert answer == "Migrating to Postgres."
        assert asked == [question]
        assert "Postgres 17" in server.model_requests[-1].text()


async def _drive_skills(d: Driven) -> None:
    """The skills example, with the real claude CLI against the local model server: the
    declared skill is in the model's request."""
    from jigs_testing import ModelServer, text

    d.require_cli("claude")
    skill = d.root / "skills" / "release-steps"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: release-steps\ndescription: How this team cuts a release.\n---\n\n1. Tag.\n"
    )
    async with ModelServer() as server:
        _claude_on(d, server)
        server.add(text("Released."))
        worktree = _git_worktree(d.root)
        assert await d.ns["cut_release"](str(worktree), d.run, str(skill)) == "Released."
        assert "How this team cuts a release." in json.dumps(server.model_requests[0].body)


async def _drive_images(d: Driven) -> None:
    """The images example, with the real claude CLI against the local model server: the
    screenshot's bytes are in the model's request."""
    import base64

    from jigs_testing import ModelServer, text

    d.require_cli("claude")
    shot = d.root / "screenshot.gif"
    shot.write_bytes(
        b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04"
        b"\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
    )
    async with ModelServer() as server:
        _claude_on(d, server)
        server.add(text("A white pixel."))
        worktree = _git_worktree(d.root)
        answer = await d.ns["explain_screenshot"](str(worktree), d.run, shot)
        assert answer == "A white pixel."
        body = json.dumps(server.model_requests[0].body)
        assert base64.b64encode(shot.read_bytes()).decode() in body


async def _drive_watch(d: Driven) -> None:
    """The events example with the echo kind: the callback and the iterator both see events."""
    from jigs import harnesses

    worktree = _git_worktree(d.root)
    result = await d.ns["watch"](harnesses.echo(), str(worktree), d.run)
    assert "Fix it." in result.text
    assert result.session is not None


async def _drive_mini(d: Driven) -> None:
    """The guide's kind, built from the guide's blocks, runs two real turns against the local
    model server, through the credential proxy, and resumes its session."""
    from jigs_testing import ModelServer, reply, text, tool_call

    d.monkeypatch.setenv("MINI_KEY", "sk-docs-test")
    async with ModelServer() as server:
        server.add(
            tool_call("shell", {"command": "printf hello > notes.txt"}),
            text("I created notes.txt."),
            reply(lambda req: text(f"I remember: {req.message_count} messages")),
        )
        worktree = _git_worktree(d.root)
        answer = await d.ns["two_turns"](str(worktree), d.run, server.openai_base_url)
        assert (worktree / "notes.txt").read_text() == "hello"
        # user, the tool call, its result, the answer, the second question
        assert answer == "I remember: 5 messages", answer
        assert len(server.model_requests) == 3


async def _setup_mini(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Build the guide's package from its file= blocks and make it importable, here and in
    the agent (PYTHONPATH through agents.env, standing in for pip install)."""
    import jigs.registry._registry

    package = root / "jigs-harness-mini"
    written = assemble(GUIDE, package)
    assert package / "src" / "jigs_harness_mini" / "_harness.py" in written
    src = str(package / "src")
    monkeypatch.syspath_prepend(src)
    monkeypatch.setenv("PYTHONPATH", src)
    _factory_env(root, ["PYTHONPATH"])
    # the entry point the guide declares names the module that registers the kind
    project = tomllib.loads((package / "pyproject.toml").read_text())
    entry = project["project"]["entry-points"]["jigs.harnesses"]
    assert entry == {"mini": "jigs_harness_mini.plugin"}
    import importlib

    plugin = importlib.import_module(entry["mini"])
    registry = jigs.registry._registry.Registry()
    monkeypatch.setattr(jigs.registry._registry, "_default", [registry])
    plugin.jigs_register_harnesses(registry.register)
    assert registry.get("mini").kind == "mini"


DRIVERS: dict[str, Callable[[Driven], Awaitable[None]]] = {
    "explain": _drive_explain,
    "watch": _drive_watch,
    "mini": _drive_mini,
    "tools": _drive_tools,
    "ask": _drive_ask,
    "skills": _drive_skills,
    "images": _drive_images,
}
#: Drivers run from a plain (not async) test: the block is itself a pytest file whose test
#: starts its own event loop.
PYTEST_FILE_DRIVERS = {"kit"}
SETUP = {"mini": _setup_mini}


# ------------------------------------------------------------------ the tests


def test_every_block_follows_the_convention() -> None:
    problems = [f"{b.name}: {p}" for b in BLOCKS for p in check_options(b)]
    unknown = [
        f"{b.name}: no driver {b.options['drive']!r}"
        for b in BLOCKS
        if "drive" in b.options and b.options["drive"] not in {*DRIVERS, *PYTEST_FILE_DRIVERS}
    ]
    assert not problems + unknown
    # the collection itself must see what it tests
    assert len(RUN) >= 7, len(RUN)
    assert TYPECHECK
    assert KIT
    used = {b.options["drive"] for b in BLOCKS if "drive" in b.options}
    assert used == {*DRIVERS, *PYTEST_FILE_DRIVERS}, "a driver no block uses"


def test_the_checker_refuses_what_the_convention_does_not_allow(tmp_path: Path) -> None:
    from doc_blocks import blocks_in

    page = tmp_path / "page.md"
    page.write_text(
        '```python test="skip"\nx = 1\n```\n\n```python tset="typecheck"\n```\n\n'
        '```toml drive="x"\n```\n'
    )
    found = [p for b in blocks_in(page) for p in check_options(b)]
    assert any('test="skip"' in p for p in found)
    assert any("unknown option 'tset'" in p for p in found)
    assert any("other than file= on a toml block" in p for p in found)
    page.write_text("```python test=typecheck\nx = 1\n```\n")
    with pytest.raises(ValueError, match="unparsed fence options"):
        blocks_in(page)


def test_toml_blocks_parse() -> None:
    tomls = [b for b in BLOCKS if b.lang == "toml"]
    assert tomls
    for block in tomls:
        try:
            tomllib.loads(block.source)
        except tomllib.TOMLDecodeError as exc:
            pytest.fail(f"{block.name}: {exc}")


def test_the_readme_keeps_the_commands_ci_runs() -> None:
    """CI runs the README's test command: the README must still say exactly that."""
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    command = "python3 -m pip install -q uv && python3 -m uv run jigs install && python3 -m uv run"
    assert f"{command} pytest" in ci
    assert f"{command} pytest\n" in readme
    assert f"{command} jigs demo\n" in readme


async def test_the_readme_says_the_stages_in_the_order_the_code_runs_them(
    worktree: Path, run_meta: Any
) -> None:
    """The README (and the site's index and policy pages) list the lock before the checks,
    because a step does it in that order (its structlog events say so)."""
    from jigs import harnesses
    from jigs.steps import run_agent
    from structlog.testing import capture_logs

    with capture_logs() as logs:
        await run_agent(harness=harnesses.echo(), cwd=worktree, prompt="hi", run=run_meta)
    events = [e["event"] for e in logs]
    assert events.index("runner.lock.acquired") < events.index("runner.checks.descriptor")
    for page in ("README.md", "docs/index.md"):
        text = (ROOT / page).read_text()
        assert text.index("locks the worktree") < text.index("descriptor and just-in-time checks")
    policy = (ROOT / "docs" / "policy.md").read_text()
    assert policy.index("locks the worktree") < policy.index("runs the checks")


def test_the_docs_spell_uv_one_way_and_name_commands_that_are_on_path() -> None:
    """``python3 -m uv run`` everywhere (uv itself is often not on PATH: the set-up installs it
    with pip), and the Temporal dev server through it (``temporal`` lives in the workspace's
    venv, not on PATH)."""
    import re

    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        text = page.read_text()
        bare = re.findall(r"(?<!-m )(?<![\w/-])uv (?:run|pip|sync)\b", text)
        assert not bare, f"{page.name}: write `python3 -m uv ...`, not {bare}"
        for line in text.splitlines():
            if "temporal server start-dev" in line:
                assert "uv run temporal server start-dev" in line, f"{page.name}: {line}"


@pytest.mark.parametrize("block", RUN, ids=[b.name for b in RUN])
async def test_python_block_runs(
    block: Block,
    scratch: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_meta: Any,
    require_cli: Callable[[str], Path],
) -> None:
    drive = block.options.get("drive")
    if drive in SETUP:
        await SETUP[drive](scratch, monkeypatch)
    code = compile(block.source, block.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    ns: dict[str, Any] = {"__name__": "docs_block", "__doc_source__": block.source}
    outcome = eval(code, ns)  # top-level await makes a coroutine
    if inspect.iscoroutine(outcome):
        await outcome
    if drive is not None:
        await DRIVERS[drive](Driven(ns, scratch, monkeypatch, run_meta, require_cli))


def test_typecheck_blocks_and_the_guides_package_pass_mypy(tmp_path: Path) -> None:
    """Blocks that cannot run here, and the package the guide builds, pass mypy --strict."""
    from mypy import api

    files = []
    for n, block in enumerate(TYPECHECK):
        path = tmp_path / "blocks" / f"block_{n}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"# {block.name}\n{block.source}")
        files.append(str(path))
    package = tmp_path / "jigs-harness-mini"
    files += [str(p) for p in assemble(GUIDE, package) if p.suffix == ".py"]
    (package / "src" / "jigs_harness_mini" / "py.typed").touch()
    cwd = os.getcwd()
    os.chdir(ROOT)  # the root config's mypy_path is relative to it
    try:
        out, err, status = api.run(
            ["--config-file", str(ROOT / "pyproject.toml"), "--no-error-summary", *files]
        )
    finally:
        os.chdir(cwd)
    assert status == 0, out + err


@pytest.mark.parametrize("block", KIT, ids=[b.name for b in KIT])
def test_the_conformance_snippet_passes_under_plain_pytest(
    block: Block, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Driver ``kit``: the snippet as a pytest file of its own (the README's old one failed with
    "async def functions are not natively supported") passes under plain pytest, with the kit
    awaited for its kind. The kit itself is stubbed here: it runs for real on the echo kind in
    tests/core/test_conformance_and_demo.py and on every shipped kind."""
    import jigs_testing.conformance as kit

    awaited: list[str] = []

    async def check_harness(kind: str, make_descriptor: Any = None, *, tmp_path: Path) -> None:
        assert tmp_path.is_dir()
        awaited.append(kind)

    monkeypatch.setattr(kit, "check_harness", check_harness)
    pytester.makepyfile(test_conformance=block.source)
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=1)
    assert awaited == ["mini"]
    # and the snippet without its anyio wiring fails the way the old README one did
    bare = block.source.replace("pytestmark = pytest.mark.anyio", "")
    pytester.makepyfile(test_conformance=bare)
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    assert result.ret != 0
    assert awaited == ["mini"]


def test_the_guides_package_is_lint_and_format_clean(tmp_path: Path) -> None:
    """The guide's file= blocks are excluded from ``ruff format .`` (fragments of one module);
    the package they assemble into must pass ruff check and ruff format as project code does."""
    package = tmp_path / "jigs-harness-mini"
    assemble(GUIDE, package)
    config = ["--config", str(ROOT / "pyproject.toml")]
    for command in (["check", *config], ["format", "--check", "--diff", *config]):
        done = subprocess.run(
            [sys.executable, "-m", "ruff", *command, str(package / "src")],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
