"""``jigs demo``: every installed kind, end to end, against the local model server.

For each kind: a scratch git repository, a first turn in which the scripted model has the CLI's
own tool write a file, and a second turn that resumes the session and answers from its history.
It prints what jigs did (environment names, the lock, the session, the tool call and its effect on
disk, the answer, timings). A kind whose CLI is missing gets its ``jigs doctor`` fix, not a
traceback. Exits non-zero if any installed kind failed or none ran (none installed, or every
kind's CLI missing). No credentials, no network.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from jigs.checks import run_checks
from jigs.engine._types import RunMetadata
from jigs.env import build_env
from jigs.errors import JigsError
from jigs.policy._paths import data_dir
from jigs.registry._registry import default_registry
from jigs.steps import run_agent
from structlog.testing import capture_logs

from jigs_testing import ModelServer
from jigs_testing._environ import patched_environ
from jigs_testing.plan import DemoPlan, demo_plan_of, has_demo_plan, how_to_write_demo_plan

__all__ = ["KindReport", "main", "run_demo"]


@dataclass
class KindReport:
    """What the demo saw for one kind."""

    kind: str
    ok: bool = False
    skipped: str | None = None
    error: str | None = None
    env_names: list[str] = field(default_factory=list)
    #: The model key's variable when the step proxied it (the key stayed in the worker).
    proxied_key: str | None = None
    lock: str | None = None
    lock_released: bool = False
    session_id: str | None = None
    resumed_session_id: str | None = None
    file: str | None = None
    file_content: str | None = None
    answers: list[str] = field(default_factory=list)
    timings: list[float] = field(default_factory=list)
    model_requests: int = 0


def _scratch_repo(root: Path, kind: str) -> Path:
    repo = root / f"demo-{kind}"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "README.md").write_text(f"jigs demo worktree for the {kind} kind\n")
    return repo


async def _install_fix(kind: str, agents_env: Sequence[str]) -> str | None:
    """The kind's CLI check (``harness.<kind>-cli``, under the environment its demo step gets)
    as one line, or None when it passes. A login is not needed: demo descriptors name a key."""
    harness = default_registry().get(kind)
    checks = [
        c
        for c in harness.installation_checks(build_env(agents_env))
        if c.id == f"harness.{kind}-cli"
    ]
    outcomes = await run_checks(checks)
    failed = [o for o in outcomes if not o.ok]
    if not failed:
        return None
    return "; ".join(f"{o.label}: {o.reason} (fix: {o.repair})" for o in failed)


async def _demo_kind(kind: str, root: Path) -> KindReport:
    """One kind's demo: a turn whose tool writes a file, then a resumed turn that answers from
    the session's history, against a local model server."""
    report = KindReport(kind)
    try:
        harness = default_registry().get(kind)
    except JigsError as exc:
        report.error = str(exc)
        return report
    async with ModelServer() as server:
        plan = await _runnable_plan(report, harness, server)
        if plan is None:
            return report
        repo = _scratch_repo(root, kind)
        run = RunMetadata(workflow_run_id=f"demo-{kind}-{uuid.uuid4().hex[:8]}")
        name, content = "hello-from-jigs.txt", f"written by the {kind} agent"
        try:
            with patched_environ(dict(plan.host_env)), capture_logs() as logs:
                await _two_turns(
                    report, plan, server, repo=repo, run=run, name=name, content=content
                )
        except JigsError as exc:
            report.error = f"{type(exc).__name__}: {exc}"
            return report
        finally:
            report.model_requests = len(server.model_requests)
        _read_logs(report, logs)
        _judge(report, name, content)
    return report


async def _runnable_plan(
    report: KindReport, harness: object, server: ModelServer
) -> DemoPlan | None:
    """The kind's demo plan when its CLI can run; None (with why in ``report``) otherwise."""
    kind = report.kind
    if not has_demo_plan(harness):
        report.error = how_to_write_demo_plan(kind)
        return None
    plan = demo_plan_of(harness, server)
    if plan is None:
        report.skipped = f"the {kind} harness has no demo plan"
        return None
    with patched_environ(dict(plan.host_env)):
        fix = await _install_fix(kind, plan.agents_env)
    if fix is not None:
        report.skipped = fix
        return None
    return plan


async def _two_turns(
    report: KindReport,
    plan: DemoPlan,
    server: ModelServer,
    *,
    repo: Path,
    run: RunMetadata,
    name: str,
    content: str,
) -> None:
    """The first turn (the file written by the CLI's tool), then the resumed one."""
    started = time.perf_counter()
    first = await run_agent(
        harness=plan.descriptor,
        cwd=repo,
        prompt=plan.write_file(server, name, content),
        run=run,
        agents_env=plan.agents_env,
    )
    report.timings.append(time.perf_counter() - started)
    report.answers.append(first.text)
    report.session_id = first.session.id if first.session else None
    written = repo / name
    report.file = str(written)
    report.file_content = written.read_text() if written.exists() else None
    started = time.perf_counter()
    second = await run_agent(
        harness=plan.descriptor,
        cwd=repo,
        prompt=plan.recall(server),
        run=run,
        resume=first.session,
        agents_env=plan.agents_env,
    )
    report.timings.append(time.perf_counter() - started)
    report.answers.append(second.text)
    report.resumed_session_id = second.session.id if second.session else None


def _read_logs(report: KindReport, logs: Sequence[Mapping[str, Any]]) -> None:
    """What the step's log events say: the environment's names, the proxied key, the lock."""
    for event in logs:
        if event["event"] == "runner.env.built" and not report.env_names:
            report.env_names = list(event["names"])
        elif event["event"] == "runner.proxy.started" and not report.proxied_key:
            report.proxied_key = str(event["key_env"])
        elif event["event"] == "runner.lock.acquired":
            report.lock = str(event["lock"])
        elif event["event"] == "runner.lock.released":
            report.lock_released = True


def _judge(report: KindReport, name: str, content: str) -> None:
    """The demo passed when the agent's tool wrote the file and the first turn had a session."""
    problems = []
    if report.file_content != content:
        problems.append(f"the file {name} was not written by the agent's tool")
    if report.session_id is None:
        problems.append("the first turn reported no session")
    if problems:
        report.error = "; ".join(problems)
    else:
        report.ok = True


def _print_report(report: KindReport) -> None:
    print(f"\n== {report.kind}")
    if report.skipped:
        print(f"   not run: {report.skipped}")
        return
    if report.env_names:
        print(f"   environment passed (names only): {', '.join(report.env_names)}")
    if report.proxied_key:
        print(
            f"   model key: ${report.proxied_key} stayed in the worker; the CLI got the step's "
            f"credential proxy and a placeholder"
        )
    if report.lock:
        released = "released" if report.lock_released else "NOT released"
        print(f"   worktree lock: {report.lock} (taken, {released})")
    if report.session_id:
        print(f"   session: {report.session_id}")
    if report.file:
        state = repr(report.file_content) if report.file_content is not None else "missing"
        print(f"   tool call wrote {report.file}: {state}")
    for number, (answer, seconds) in enumerate(
        zip(report.answers, report.timings, strict=False), start=1
    ):
        print(f"   turn {number} ({seconds:.2f}s): {answer.strip()[:200]}")
    if report.resumed_session_id:
        print(f"   resumed as a fork of {report.session_id}: {report.resumed_session_id}")
    if report.model_requests:
        print(f"   model requests served by the local server: {report.model_requests}")
    print(f"   result: {'ok' if report.ok else 'FAILED: ' + (report.error or '?')}")


async def run_demo(kinds: Sequence[str] | None = None) -> list[KindReport]:
    """Run the demo for ``kinds`` (default: every installed kind) and return the reports."""
    chosen = list(kinds) if kinds else default_registry().enabled_kinds()
    reports = []
    with tempfile.TemporaryDirectory(prefix="jigs-demo-") as tmp:
        root = Path(tmp)
        home = root / "home"
        home.mkdir()
        # A scratch HOME keeps the agents' own files (transcripts, shell snapshots) out of the
        # operator's; the jigs data dir (installed CLIs, locks) stays where it is.
        with patched_environ({"JIGS_DATA_DIR": str(data_dir()), "HOME": str(home)}):
            for kind in chosen:
                try:
                    report = await _demo_kind(kind, root)
                except Exception as exc:  # one kind's surprise must not stop the others
                    report = KindReport(kind, error=f"unexpected {type(exc).__name__}: {exc}")
                _print_report(report)
                reports.append(report)
    return reports


def main(kinds: Sequence[str] | None = None) -> int:
    """Entry point of ``jigs demo``."""
    print("jigs demo: every installed harness kind against the local model server (no network)")
    reports = anyio.run(run_demo, kinds)
    passed = [r.kind for r in reports if r.ok]
    skipped = [r.kind for r in reports if r.skipped]
    failed = [r.kind for r in reports if not r.ok and not r.skipped]
    print(f"\n{len(passed)} passed, {len(failed)} failed, {len(skipped)} not run")
    if failed:
        print(f"failed kinds: {', '.join(failed)} (see above; `jigs doctor` shows the fixes)")
    if not reports:
        print("no harness kind is installed; e.g. pip install jigs-harness-claude")
    elif not passed and not failed:
        print("no kind ran (see above; `jigs doctor` shows the fixes)")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
