"""The worker never runs what the agent wrote into the repository.

The agent of a ``checkpoint="worktree"`` step (a real CLI driven by the scripted model, and the
echo kind) plants everything git could run: ``.git/hooks/reference-transaction``,
``post-commit`` and ``post-index-change``; ``core.fsmonitor``; an ``include.path`` to a planted
config holding a ``.gitattributes``-selected filter driver (clean, smudge, required), a
multi-file ``process`` filter, ``gpg.program`` with ``commit.gpgSign`` and an alias; and
``core.pager`` / ``diff.external``. Each writes a marker outside the worktree. The step
succeeds (its checkpoint is dropped), the next step's checkpoint is saved and restored: no marker
exists, and the checkpoint holds the agent's work byte for byte. The same plants, run with plain
git, do write their markers (so the test can fail).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from jigs import RunMetadata
from jigs.registry._registry import default_registry
from jigs.steps import run_agent
from jigs.worktrees import checkpoints
from jigs_testing import ModelServer
from jigs_testing._environ import patched_environ

pytestmark = pytest.mark.anyio

WORK = "agent-work.txt"
WORK_BYTES = "the agent's work\n"
FILTERED = "filtered.dat"
FILTERED_BYTES = "raw bytes the clean filter would change\n"


def _hook(markers: Path, name: str, *, then: str = "") -> str:
    return f"#!/bin/sh\necho ran >> {markers / name}\nenv > {markers / name}.env\n{then}"


def plant_command(markers: Path) -> str:
    """What the prompt-injected agent runs in its worktree (its cwd)."""
    files = {
        ".git/hooks/reference-transaction": _hook(markers, "reference-transaction"),
        ".git/hooks/post-commit": _hook(markers, "post-commit"),
        ".git/hooks/post-index-change": _hook(markers, "post-index-change"),
        ".git/fsmonitor.sh": _hook(markers, "fsmonitor"),
        ".git/filter.sh": _hook(markers, "filter", then="cat\n"),
        ".git/process.sh": _hook(markers, "process"),
        ".git/gpg.sh": _hook(markers, "gpg"),
        ".git/pager.sh": _hook(markers, "pager", then="cat\n"),
        ".git/diff.sh": _hook(markers, "diff-external"),
    }
    planted = [
        ("filter.evil.clean", '"$PWD/.git/filter.sh"'),
        ("filter.evil.smudge", '"$PWD/.git/filter.sh"'),
        ("filter.evil.required", "true"),
        ("filter.proc.process", '"$PWD/.git/process.sh"'),
        ("gpg.program", '"$PWD/.git/gpg.sh"'),
        ("commit.gpgSign", "true"),
        ("alias.jigs", shlex.quote(f"!echo ran > {markers}/alias")),
    ]
    steps = ["set -e", "mkdir -p .git/hooks"]
    for path, body in files.items():
        steps.append(f"printf '%s' {shlex.quote(body)} > {path} && chmod +x {path}")
    steps += [
        *(f"git config -f .git/planted.cfg {key} {value}" for key, value in planted),
        'git config include.path "$PWD/.git/planted.cfg"',
        'git config core.fsmonitor "$PWD/.git/fsmonitor.sh"',
        'git config core.pager "$PWD/.git/pager.sh"',
        'git config diff.external "$PWD/.git/diff.sh"',
        f"printf '{FILTERED} filter=evil\\n*.proc filter=proc\\n' > .gitattributes",
        f"printf '%s' {shlex.quote(FILTERED_BYTES)} > {FILTERED}",
        "echo p > x.proc",
        f"printf '%s' {shlex.quote(WORK_BYTES)} > {WORK}",
        "echo PLANTED",
    ]
    return "\n".join(steps)


def plain_git(tree: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """Git as the worker ran it before: with the worker's whole environment."""
    env = {**os.environ, "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=tree, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip


def inspect_git(tree: Path, *args: str) -> str:
    """The test's own reads: commands that run nothing from the repository."""
    env = {"PATH": os.environ["PATH"], "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", *args],
        cwd=tree, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


@pytest.mark.parametrize(
    "kind",
    ["echo", *(pytest.param(k, marks=pytest.mark.real_cli(k)) for k in ("claude", "codex", "pi"))],
)
async def test_a_checkpointed_step_runs_nothing_the_agent_planted(
    kind: str,
    tmp_path: Path,
    worktree: Path,
    require_cli: object,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if kind != "echo":
        require_cli(kind)  # type: ignore[operator]
    markers = tmp_path / "markers"
    markers.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("IS_SANDBOX", "1")  # Claude Code as root
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("JIGS_WORKER_SECRET", "sk-worker-secret-" + uuid.uuid4().hex)
    plain_git(worktree, "add", "-A", home=home)
    plain_git(worktree, "commit", "-qm", "base", home=home)
    run = RunMetadata(workflow_run_id=f"hostile-{kind}-{uuid.uuid4().hex[:8]}")

    async with ModelServer() as server:
        plan = default_registry().get(kind).demo_plan(server)  # type: ignore[attr-defined]
        assert plan.run_command is not None
        prompt = plan.run_command(server, plant_command(markers))
        with patched_environ(dict(plan.host_env)):
            async with checkpoints.step_checkpoint(worktree, f"{run.workflow_run_id}/1"):
                result = await run_agent(
                    harness=plan.descriptor,
                    cwd=worktree,
                    prompt=prompt,
                    run=run,
                    agents_env=list(plan.agents_env),
                )
    # the agent did plant everything (and the step succeeded: its checkpoint was dropped)
    assert (worktree / WORK).read_text() == WORK_BYTES, result.text
    assert (worktree / ".git" / "planted.cfg").is_file()
    assert "include.path" in inspect_git(worktree, "config", "--list", "--show-origin")
    assert inspect_git(worktree, "for-each-ref", "refs/jigs/") == ""

    # the next step: its checkpoint saved, the agent's work changed, the checkpoint restored
    await checkpoints.save(worktree, "next")
    (worktree / WORK).write_text("changed by a later attempt\n")
    (worktree / FILTERED).unlink()
    assert await checkpoints.restore(worktree, "next") is True
    await checkpoints.drop(worktree, "next")

    assert sorted(p.name for p in markers.iterdir()) == [], "the worker ran what the agent planted"
    # the checkpoint held the agent's work byte for byte (no clean or smudge filter ran)
    assert (worktree / WORK).read_text() == WORK_BYTES
    assert (worktree / FILTERED).read_text() == FILTERED_BYTES

    # the plants are live: plain git runs them (hooks, fsmonitor, filters, signing, alias)
    plain_git(worktree, "add", "-A", home=home)  # fsmonitor, filters, post-index-change
    # the process filter plant speaks no protocol: the rest runs without it
    no_process = ("-c", "filter.proc.process=")
    plain_git(worktree, *no_process, "add", "-A", home=home)
    plain_git(worktree, *no_process, "commit", "-qm", "signed", home=home)  # gpg fails it
    plain_git(worktree, *no_process, "-c", "commit.gpgSign=false", "commit", "-qm", "p", home=home)
    plain_git(worktree, "jigs", home=home)
    ran = {p.name for p in markers.iterdir() if not p.name.endswith(".env")}
    assert {
        "reference-transaction",
        "post-commit",
        "post-index-change",
        "fsmonitor",
        "filter",
        "process",
        "gpg",
        "alias",
    } <= ran, ran
    # and a hook run by plain git would have had the worker's secret: jigs' git has no env of it
    assert os.environ["JIGS_WORKER_SECRET"] in (markers / "post-commit.env").read_text()


async def test_git_gets_an_environment_built_from_empty(
    tmp_path: Path, worktree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every git command jigs runs: the hardened env (no worker variable), the -c overrides."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "git-calls"
    real = shutil.which("git")
    wrapper = bin_dir / "git"
    wrapper.write_text(
        f'#!/bin/sh\n{{ env; echo "ARGS $*"; echo ---; }} >> {log}\nexec {real} "$@"\n'
    )
    wrapper.chmod(0o755)
    secret = "sk-worker-secret-" + uuid.uuid4().hex
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("JIGS_WORKER_SECRET", secret)
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    async with checkpoints.step_checkpoint(worktree, "k"):
        (worktree / "new.txt").write_text("x\n")
    calls = log.read_text().split("---\n")[:-1]
    assert len(calls) >= 6
    allowed = {
        "PATH", "HOME", "LC_ALL", "LANG", "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL",
        "GIT_ATTR_NOSYSTEM", "GIT_TERMINAL_PROMPT", "GIT_NO_REPLACE_OBJECTS", "GIT_PAGER",
        "GIT_EDITOR", "GIT_OPTIONAL_LOCKS", "GIT_INDEX_FILE", "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
        "PWD", "SHLVL", "_", "OLDPWD",  # the wrapper's own shell adds these
    }  # fmt: skip
    for call in calls:
        names = {
            line.split("=", 1)[0]
            for line in call.splitlines()
            if "=" in line and not line.startswith("ARGS")
        }
        assert names <= allowed, names - allowed
        assert secret not in call
        assert "HOME=/nonexistent" in call
        assert "GIT_CONFIG_GLOBAL=/dev/null" in call
        args = next(line for line in call.splitlines() if line.startswith("ARGS"))
        assert "-c core.hooksPath=/dev/null" in args
        assert "-c core.fsmonitor=false" in args
        assert "-c protocol.allow=never" in args


async def test_a_work_tree_moved_by_core_worktree_is_refused(
    tmp_path: Path, worktree: Path
) -> None:
    """``core.worktree`` set by the agent cannot point jigs' ``clean -fdq`` at another dir."""
    from jigs.errors import CheckpointError

    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep\n")
    subprocess.run(["git", "config", "core.worktree", str(victim)], cwd=worktree, check=True)
    with pytest.raises(CheckpointError, match=r"core\.worktree"):
        await checkpoints.save(worktree, "k")
    assert (victim / "precious.txt").exists()


async def test_a_forged_checkpoint_message_cannot_inject_options(
    tmp_path: Path, worktree: Path
) -> None:
    """The checkpoint commit is in the agent's repository: its recorded values are checked
    before they become git arguments (``--index-output=...`` would write a file)."""
    from jigs.errors import CheckpointError

    home = tmp_path / "home"
    home.mkdir()
    plain_git(worktree, "add", "-A", home=home)
    plain_git(worktree, "commit", "-qm", "base", home=home)
    await checkpoints.save(worktree, "k")
    ref = next(
        iter(inspect_git(worktree, "for-each-ref", "--format=%(refname)", "refs/jigs/").split())
    )
    tree = inspect_git(worktree, "rev-parse", "HEAD^{tree}").strip()
    target = tmp_path / "written"
    forged = plain_git(
        worktree, "commit-tree", tree, "-m",
        f'{{"head": null, "branch": null, "index": "--index-output={target}"}}', home=home,
    ).stdout.strip()  # fmt: skip
    inspect_git(worktree, "update-ref", ref, forged)
    with pytest.raises(CheckpointError, match="does not hold what jigs recorded"):
        await checkpoints.restore(worktree, "k")
    assert not target.exists()
