"""The conformance kit's isolation checks can fail: each is run on the echo kind against a launch
that lacks the guarantee it proves, and must name what broke.

The checks themselves pass for every kind in ``check_harness`` (echo in
``test_conformance_and_demo.py``, the real CLIs in ``tests/harnesses/test_conformance_kinds.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from pathlib import Path

import pytest
from jigs.descriptors import HarnessDescriptor
from jigs.registry._registry import default_registry
from jigs.sandbox import _isolation
from jigs.sandbox._proctree import kill_procs, processes_under
from jigs_testing import conformance as kit
from jigs_testing.plan import demo_plan_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextmanager
def reaped(root: Path) -> Iterator[None]:
    """Whatever the check under test let escape is killed afterwards."""
    try:
        yield
    finally:
        kill_procs(processes_under(root))


def echo_kit(tmp_path: Path, **settings: str) -> AbstractAsyncContextManager[kit.KitContext]:
    """The kit on echo; ``settings`` are added to its demo descriptor."""
    if not settings:
        return kit.kit_context("echo", tmp_path=tmp_path)

    def descriptor(server: object) -> HarnessDescriptor:
        base = demo_plan_of(default_registry().get("echo"), server).descriptor
        return type(base).from_data({**base.to_data(), **settings})

    return kit.kit_context("echo", descriptor, tmp_path=tmp_path)


def unsandboxed_kit(tmp_path: Path) -> AbstractAsyncContextManager[kit.KitContext]:
    """The kit on echo with ``sandbox="off"``: these tests weaken or choose the isolation jigs
    uses without the sandbox (``jigs.sandbox._isolation``), which a sandboxed step never uses (it gets
    bwrap's namespaces, whatever ``JIGS_ISOLATION`` says)."""
    return echo_kit(tmp_path, sandbox="off")


@pytest.fixture
def namespace_only() -> None:
    assert _isolation.isolation().mode == "namespace", "these tests need the namespace mode"


async def test_the_worker_death_check_passes_for_echo(tmp_path: Path) -> None:
    """The check alone (SIGKILL, SIGTERM, SIGINT); tests/core/test_isolation.py also runs this
    from a parent that ignores SIGINT."""
    with reaped(tmp_path):
        report = await kit.check_harness("echo", tmp_path=tmp_path, only=["worker_death"])
    assert "worker_death" in report.passed, report


async def test_the_worker_death_check_catches_a_worker_without_isolation(
    namespace_only: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the worker process launches its step as a plain process group (no namespace, no
    # parent-death signal): a SIGKILLed worker leaves its agent's commands running
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import jigs.sandbox._isolation as i\n" + REPLACE.replace("NEW", "lambda: i.PLAIN")
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    with reaped(tmp_path):
        async with unsandboxed_kit(tmp_path) as ctx:
            with pytest.raises(
                AssertionError,
                match=r"SIGKILLed mid-turn left .* processes|run in the worker's PID namespace",
            ):
                await kit.CHECKS["worker_death"](ctx)


#: Replaces the probed isolation wherever jigs bound it (importing jigs.sandbox._isolation imports jigs,
#: whose modules import ``isolation`` by name).
REPLACE = """
import sys
_found = i.isolation
for _module in list(sys.modules.values()):
    if getattr(_module, "isolation", None) is _found:
        _module.isolation = NEW
"""

WEAK_NAMESPACE = """
import dataclasses
import jigs.sandbox._isolation as i

_probed = i.isolation


def weak():
    # the namespace without its death links: no parent-death signal, no --kill-child
    found = _probed()
    prefix = list(found.prefix)
    if prefix and prefix[0].endswith("setpriv"):
        prefix = prefix[4:]
    return dataclasses.replace(found, prefix=tuple(a for a in prefix if a != "--kill-child"))


""" + REPLACE.replace("NEW", "weak")


async def test_the_worker_death_check_catches_a_namespace_without_its_death_links(
    namespace_only: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(WEAK_NAMESPACE)
    monkeypatch.setenv("PYTHONPATH", str(site))
    with reaped(tmp_path):
        async with unsandboxed_kit(tmp_path) as ctx:
            with pytest.raises(AssertionError, match=r"SIGKILLed mid-turn left \d+ processes"):
                await kit.CHECKS["worker_death"](ctx)


async def test_the_worker_death_check_catches_a_step_that_never_starts_its_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a run_command that does not run the command: the check must not pass vacuously
    with reaped(tmp_path):
        async with echo_kit(tmp_path) as ctx:
            plan = dataclasses.replace(ctx.plan, run_command=lambda _server, command: "sh:true")
            with pytest.raises(AssertionError, match="before its agent started every descendant"):
                await kit.CHECKS["worker_death"](dataclasses.replace(ctx, plan=plan))


async def test_the_process_view_check_catches_an_agent_that_sees_the_host(
    namespace_only: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the step is launched without a namespace while the kit believes one is in force
    import jigs.processes

    monkeypatch.setattr(jigs.processes, "isolation", lambda: _isolation.PLAIN)
    with reaped(tmp_path):
        async with unsandboxed_kit(tmp_path) as ctx:
            with pytest.raises(AssertionError, match=r"read host canaries|older than its step"):
                await kit.CHECKS["process_view"](ctx)


@pytest.mark.parametrize("mode", ["auto", "tree"])
async def test_the_process_view_check_asserts_what_each_mode_gives(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # namespace: the agent sees its step only; tree: it sees the host (the documented limit)
    monkeypatch.setenv(_isolation.ENV_VAR, mode)
    _isolation.reset_isolation_cache()
    try:
        with reaped(tmp_path):
            async with unsandboxed_kit(tmp_path) as ctx:
                await kit.CHECKS["process_view"](ctx)
    finally:
        _isolation.reset_isolation_cache()


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="tree fallback: after a worker SIGKILL the agent's commands run on in the worktree "
    "(no namespace to take them along); the next step is refused while they do (see "
    "test_tree_fallback_refuses_a_worktree_a_dead_workers_command_still_works_in)",
)
async def test_the_tree_fallback_keeps_a_killed_workers_worktree_locked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(_isolation.ENV_VAR, "tree")
    _isolation.reset_isolation_cache()
    try:
        with reaped(tmp_path):
            async with unsandboxed_kit(tmp_path) as ctx:
                await kit.CHECKS["worker_death"](ctx)
    finally:
        _isolation.reset_isolation_cache()
