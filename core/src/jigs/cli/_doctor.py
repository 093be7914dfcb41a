"""``jigs doctor``: every kind's checks as a table (or JSON), with the fix for each failure.

For each kind: its installation checks; its descriptor checks for the descriptor that
``--settings`` describes (``{}``: the kind's defaults), which is where a login or a named model
key is checked (a check a kind lists in both groups runs once; a kind with no default
descriptor, such as pi, gets a ``skipped`` row until ``--settings`` names one); and with
``--cwd`` the just-in-time checks and MCP probes in that worktree. A ``model route`` row per kind
says how that descriptor reaches its model: a named key through the step's credential proxy (the
agent never sees the key), or the operator's own login (which the agent can read), or no key at
all. A kind that cannot be loaded,
or settings that do not make a descriptor, give one failed row. Exit code 0 when every check
passed, 1 when one failed or there was no kind to check.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from jigs.checks import run_checks
from jigs.cli._output import table, wrap
from jigs.engine._pipeline import agent_env_for, jit_stage_checks
from jigs.env import agents_config_for_worktree, build_env, find_agents_config
from jigs.errors import DescriptorError, JigsError
from jigs.harnesses import load
from jigs.plugin import HarnessTarget
from jigs.policy import _secrets
from jigs.registry._registry import default_registry
from jigs.sandbox import sandbox_problem
from jigs.sandbox._isolation import isolation
from jigs.sandbox._probe import FIX

if TYPE_CHECKING:
    from jigs.checks import Check
    from jigs.env import AgentsConfig
    from jigs.registry._registry import Registry

__all__ = ["DoctorRow", "collect", "doctor"]


@dataclass(frozen=True, slots=True)
class DoctorRow:
    """One check's outcome, as ``jigs doctor --json`` prints it."""

    kind: str
    id: str
    check: str
    ok: bool
    detail: str = ""
    reason: str = ""
    repair: str = ""
    skipped: bool = False


async def collect(kinds: list[str], cwd: str | None, settings: dict[str, Any]) -> list[DoctorRow]:
    """Run the checks of ``kinds`` and return one row per check (see the module docstring)."""
    registry = default_registry()
    rows: list[DoctorRow] = []
    worktree = Path(cwd).resolve() if cwd is not None else None
    try:
        config = (
            agents_config_for_worktree(worktree) if worktree else find_agents_config(Path.cwd())
        )
    except JigsError as exc:
        return [
            DoctorRow(
                "*", "agents.env", "agents.env", False, reason=str(exc), repair="fix agents.env"
            )
        ]
    for kind in kinds:
        rows += await _kind_rows(registry, kind, config, worktree, settings)
    return rows


async def _kind_rows(
    registry: Registry,
    kind: str,
    config: AgentsConfig,
    worktree: Path | None,
    settings: dict[str, Any],
) -> list[DoctorRow]:
    """One kind's rows: its checks' outcomes, its model route and its sandbox; one failed row
    when the kind cannot be loaded or the settings do not make a descriptor."""
    try:
        harness = registry.get(kind)
        checks: list[Check] = list(harness.installation_checks(build_env([*config.env])))
        try:
            descriptor = load({"kind": kind, **settings})
        except DescriptorError as exc:
            if settings or worktree is not None:
                raise
            # a kind without usable defaults (pi needs a model): its descriptor checks wait
            # for --settings; the installation checks still run
            return [*await _outcomes(kind, checks), _no_default_row(kind, exc)]
        if worktree is None:
            env, _ = agent_env_for(harness, descriptor, Path.cwd(), list(config.env))
        else:
            env, _ = agent_env_for(harness, descriptor, worktree, None)
        route_row = _route_row(harness, descriptor)
        seen = {c.id for c in checks}  # a kind may list a check in both groups
        checks += [c for c in harness.descriptor_checks(descriptor, env) if c.id not in seen]
        if worktree is not None:
            # the pipeline's own list: the kind's JIT checks, then the MCP probes
            target = HarnessTarget(descriptor=descriptor, cwd=worktree)
            checks += jit_stage_checks(harness, target, env)
    except JigsError as exc:
        return [DoctorRow(kind, "plugin", "plugin and descriptor", False, reason=str(exc))]
    return [*await _outcomes(kind, checks), route_row, _sandbox_row(kind, descriptor)]


def _no_default_row(kind: str, exc: DescriptorError) -> DoctorRow:
    """The skipped descriptor checks of a kind that has no default descriptor."""
    return DoctorRow(
        kind,
        "descriptor",
        "descriptor checks",
        True,
        skipped=True,
        detail=f"the {kind} kind has no default descriptor ({exc}); pass --settings to check one",
    )


def _sandbox_row(kind: str, descriptor: Any) -> DoctorRow:
    """What the descriptor's agent sees and reaches: its sandbox and network, and whether this
    host can give them (a descriptor that asks for the sandbox fails here when it cannot)."""
    if descriptor.sandbox != "on":
        detail = (
            "off (the descriptor opts out): a process namespace only; the agent sees the "
            "host's files and network"
        )
        return DoctorRow(kind, "sandbox", "sandbox and network", True, detail=detail)
    problem = sandbox_problem()
    if problem is not None:
        return DoctorRow(
            kind,
            "sandbox",
            "sandbox and network",
            False,
            reason=f"the descriptor asks for the sandbox and this host cannot build it: {problem}",
            repair=FIX,
        )
    allow = descriptor.network_allow()
    network = (
        "the worker's whole network (network='host')"
        if descriptor.network == "host"
        else f"its model proxy, declared loopback MCP servers and {', '.join(allow)} "
        "(through its egress proxy)"
        if allow
        else "only its model proxy and declared loopback MCP servers"
    )
    detail = f"on: its worktree and private dirs writable, the system read-only; reaches {network}"
    return DoctorRow(kind, "sandbox", "sandbox and network", True, detail=detail)


def _route_row(harness: Any, descriptor: Any) -> DoctorRow:
    """Which route the descriptor's model traffic takes, and what the agent can read of it."""
    route = harness.model_route(descriptor)
    if route is not None:
        detail = (
            f"proxied key: ${route.key_env} stays in the worker; the CLI gets a per-step "
            f"loopback URL and a placeholder, the proxy sends the key to {route.upstream} "
            f"({route.scheme})"
        )
    else:
        login = harness.login_route(descriptor)
        detail = (
            f"operator login: {login}"
            if login
            else "no key named: the CLI's endpoint gets no credential from jigs"
        )
    return DoctorRow(harness.kind, "model.route", "model route", True, detail=detail)


async def _outcomes(kind: str, checks: list[Check]) -> list[DoctorRow]:
    if not checks:
        return [DoctorRow(kind, "", "(no checks)", True)]
    return [
        DoctorRow(
            kind,
            outcome.id,
            outcome.label,
            outcome.ok,
            detail=outcome.detail,
            reason=outcome.reason,
            repair=outcome.repair,
        )
        for outcome in await run_checks(checks)
    ]


def _result(row: DoctorRow) -> str:
    return "skipped" if row.skipped else ("ok" if row.ok else "FAIL")


def isolation_line() -> str:
    """What ``jigs doctor`` prints about process isolation and the sandbox: the mode in force,
    what it means, and (for the fallback, or a host without the sandbox) the fix.
    Informational: neither fails the doctor (a descriptor asking for the sandbox does)."""
    found = isolation()
    line = f"isolation: {found.mode} - {found.detail}"
    lines = [line, f"fix: {found.fix}"] if found.fix else [line]
    problem = sandbox_problem()
    if problem is None:
        lines.append('sandbox: available (bubblewrap; a step gets it with sandbox="on")')
    else:
        lines += [f"sandbox: unavailable - {problem}", f"fix: {FIX}"]
    return "\n".join(lines)


def _sandbox_document() -> dict[str, Any]:
    problem = sandbox_problem()
    return {"available": problem is None, "problem": problem, "fix": FIX if problem else ""}


def doctor(kinds: list[str], cwd: str | None, settings: dict[str, Any], *, as_json: bool) -> int:
    """Print the outcome of :func:`collect` and return the exit code."""
    found = isolation()
    rows = anyio.run(collect, kinds, cwd, settings)
    # every line doctor prints goes through redaction by value (a stderr tail, an env value)
    rows = [
        replace(
            r,
            detail=_secrets.redact_known(r.detail),
            reason=_secrets.redact_known(r.reason),
            repair=_secrets.redact_known(r.repair),
        )
        for r in rows
    ]
    failed = sum(1 for r in rows if not r.ok)
    skipped = sum(1 for r in rows if r.skipped)
    passed = len(rows) - failed - skipped
    code = 1 if failed or not rows else 0
    if as_json:
        document = {
            "ok": code == 0,
            "passed": passed,
            "failed": failed,
            "skipped": skipped,
            "isolation": {"mode": found.mode, "detail": found.detail, "fix": found.fix},
            "sandbox": _sandbox_document(),
            "checks": [asdict(r) for r in rows],
        }
        print(json.dumps(document, indent=2))
        return code
    # informational: the fallback does not fail the doctor
    for line in isolation_line().splitlines():
        print(wrap(line, stream=sys.stdout))
    if rows:
        cells = [[r.kind, r.check, _result(r), r.detail if r.ok else r.reason] for r in rows]
        print(table(cells, ["kind", "check", "result", "detail"], stream=sys.stdout))
    else:
        print("no kinds to check; e.g. pip install jigs-harness-claude")
    for r in rows:
        if not r.ok and r.repair:
            print(wrap(f"fix: {r.kind} / {r.check}: {r.repair}", stream=sys.stdout))
    summary = f"{passed} passed, {failed} failed"
    print(summary + (f", {skipped} skipped" if skipped else ""))
    return code
