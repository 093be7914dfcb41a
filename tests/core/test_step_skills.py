"""``skills=[path, ...]`` on the claude and codex descriptors, with the real CLIs against
``jigs_testing``'s model server: a declared skill reaches the model (its request lists it), one
planted in the operator's HOME (every place the CLIs look) does not; a changed skill changes
``describe()``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from jigs import RunMetadata
from jigs_testing import ModelServer, text
from proxied_kinds import proxied

pytestmark = pytest.mark.anyio

KEY_ENV = "JIGS_SKILLS_TEST_KEY"
DECLARED = "declared-skill-marker-7c41"
PLANTED = "planted-skill-marker-9e02"


def _skill(root: Path, name: str, marker: str) -> Path:
    path = root / name
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: Use for {marker} work.\n---\n\nSteps for {marker}.\n"
    )
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME with a skill planted wherever the CLIs look for the user's."""
    home = tmp_path / "home"
    for where in (".claude/skills", ".codex/skills", ".agents/skills", ".config/agents/skills"):
        _skill(home / where, "planted", PLANTED)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.setenv("IS_SANDBOX", "1")
    monkeypatch.setenv(KEY_ENV, "sk-model-key-for-skills-test-1234567")
    return home


@pytest.mark.parametrize("kind", ["claude", "codex"])
async def test_a_declared_skill_reaches_the_model_and_a_home_skill_does_not(
    kind: str, require_cli: Callable[[str], Path], home: Path, worktree: Path, tmp_path: Path
) -> None:
    from jigs.steps import run_agent

    require_cli(kind)
    skill = _skill(tmp_path / "skills", "release-steps", DECLARED)
    _skill(worktree / ".claude" / "skills", "planted", PLANTED)
    async with ModelServer([text("done")]) as server:
        harness = proxied(kind, KEY_ENV, "skills")(server).replace(skills=(str(skill),))
        result = await run_agent(
            harness=harness,
            cwd=worktree,
            prompt="release it",
            run=RunMetadata(workflow_run_id=f"skills-{kind}"),
            agents_env=["IS_SANDBOX"] if kind == "claude" else [],
        )
        body = json.dumps(server.model_requests[0].body)
    assert result.text == "done"
    assert DECLARED in body, body[-3000:]
    assert "release-steps" in body
    assert PLANTED not in body
    # a changed skill is another descriptor: a held session is not resumed under it
    before = harness.describe()
    (skill / "SKILL.md").write_text("---\nname: release-steps\ndescription: changed\n---\n")
    assert harness.describe() != before


@pytest.fixture
def anyio_backend() -> str:
    """One backend is enough: nothing here runs on the caller's loop but the step itself."""
    return "asyncio"


def test_a_relative_or_nameless_skill_path_is_refused() -> None:
    from jigs import harnesses
    from jigs.errors import DescriptorError

    for bad in ("skills/release", "/tmp/has space", "/tmp/a\x00b"):
        with pytest.raises(DescriptorError):
            harnesses.claude(skills=[bad])
        with pytest.raises(DescriptorError):
            harnesses.codex(skills=[bad])
