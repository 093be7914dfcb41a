"""The ``jigs`` command.

``jigs harnesses [--json]``, ``jigs doctor [--harness KIND] [--cwd DIR]``,
``jigs run --harness KIND --cwd DIR [--resume ID] PROMPT``, ``jigs install KIND...``,
``jigs model-server --script FILE [--port N]`` and ``jigs demo``. Each subcommand imports what it
needs only when it runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import uuid
from collections.abc import Sequence
from typing import Any

__all__ = ["main"]


def _configure_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(message)s",
    )


def _table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += [
        "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
    return "\n".join(lines)


def _settings(text: str) -> dict[str, Any]:
    """``--settings`` as a JSON object, or a clear error."""
    from jigs.errors import DescriptorError

    try:
        value = json.loads(text)
    except ValueError as exc:
        raise DescriptorError(f"--settings is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise DescriptorError("--settings must be a JSON object of descriptor settings")
    return value


def cmd_harnesses(args: argparse.Namespace) -> int:
    from jigs._registry import default_registry

    infos = default_registry().all_info()
    if args.json:
        print(json.dumps([i.as_dict() for i in infos], indent=2))
        return 0
    if not infos:
        print("no harness kinds are installed; e.g. pip install jigs-harness-claude")
        return 0
    rows = [
        [
            i.kind,
            i.distribution or "-",
            i.version or "-",
            "-" if i.has_model is None else ("yes" if i.has_model else "no"),
            i.error or ("disabled" if i.disabled else "ok"),
        ]
        for i in infos
    ]
    print(_table(rows, ["kind", "distribution", "version", "model", "status"]))
    return 0


async def _doctor(kinds: list[str], cwd: str | None, settings: dict[str, Any]) -> int:
    from pathlib import Path

    from jigs._pipeline import agent_env_for
    from jigs._registry import default_registry
    from jigs.checks import Check, run_checks
    from jigs.env import agents_config_for_worktree, build_env, find_agents_config
    from jigs.errors import JigsError
    from jigs.harnesses import load
    from jigs.plugin import HarnessTarget

    registry = default_registry()
    rows: list[list[str]] = []
    failed = 0
    fixes: list[str] = []
    worktree = Path(cwd).resolve() if cwd is not None else None
    try:
        config = (
            agents_config_for_worktree(worktree) if worktree else find_agents_config(Path.cwd())
        )
    except JigsError as exc:
        from jigs._secrets import redact_known

        print(f"FAIL agents.env: {redact_known(str(exc))}")
        return 1
    for kind in kinds:
        try:
            harness = registry.get(kind)
            env = build_env([*config.env])
            checks: list[Check] = list(harness.installation_checks(env))
            if worktree is not None:
                descriptor = load({"kind": kind, **settings})
                env, _ = agent_env_for(harness, descriptor, worktree, None)
                target = HarnessTarget(descriptor=descriptor, cwd=worktree)
                checks += harness.descriptor_checks(descriptor, env)
                checks += harness.jit_checks(target, env)
                if descriptor.mcp_servers:
                    from jigs._mcp_probe import mcp_probe_checks

                    checks += mcp_probe_checks(
                        descriptor.mcp_servers,
                        cwd=worktree,
                        env=env,
                        private=frozenset(harness.env_allowlist(descriptor)),
                    )
        except JigsError as exc:
            rows.append([kind, "plugin and descriptor", "FAIL", str(exc)])
            failed += 1
            continue
        for outcome in await run_checks(checks):
            status = "ok" if outcome.ok else "FAIL"
            rows.append([kind, outcome.label, status, outcome.detail or outcome.reason])
            if not outcome.ok:
                failed += 1
                fixes.append(f"{kind} / {outcome.label}: {outcome.repair}")
        if not checks:
            rows.append([kind, "(no checks)", "ok", ""])
    from jigs._secrets import redact_known

    # every secret the checks' environments hold was registered by build_env; no line shows one
    rows = [[redact_known(cell) for cell in row] for row in rows]
    print(_table(rows, ["kind", "check", "result", "detail"]) if rows else "no kinds to check")
    for fix in fixes:
        print(f"fix: {redact_known(fix)}")
    print(f"{len(rows) - failed} passed, {failed} failed")
    return 1 if failed else 0


def cmd_doctor(args: argparse.Namespace) -> int:
    import anyio

    from jigs._registry import default_registry

    kinds = [args.harness] if args.harness else default_registry().enabled_kinds()
    return anyio.run(_doctor, kinds, args.cwd, _settings(args.settings))


async def _run(args: argparse.Namespace) -> int:
    from jigs import harnesses
    from jigs._types import AgentSessionRef, RunMetadata
    from jigs.steps import run_agent

    descriptor = harnesses.load({"kind": args.harness, **_settings(args.settings)})
    resume = (
        AgentSessionRef(harness=args.harness, id=args.resume, descriptor=descriptor.describe())
        if args.resume
        else None
    )
    run = RunMetadata(workflow_run_id=args.run_id or f"cli-{uuid.uuid4().hex[:12]}")
    result = await run_agent(
        harness=descriptor, cwd=args.cwd, prompt=args.prompt, run=run, resume=resume
    )
    print(result.text)
    print(f"session: {result.session.id if result.session else '-'}", file=sys.stderr)
    print(f"run: {run.workflow_run_id}", file=sys.stderr)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    import anyio

    return anyio.run(_run, args)


async def _install(kinds: list[str]) -> int:
    from jigs._registry import default_registry
    from jigs.env import build_env

    registry = default_registry()
    status = 0
    for kind in kinds:
        harness = registry.get(kind)
        try:
            what = await harness.install(build_env([]))
        except NotImplementedError:
            print(
                f"{kind}: nothing to install (its CLI comes with pip install jigs-harness-{kind})"
            )
            continue
        print(f"{kind}: {what}")
    return status


def cmd_install(args: argparse.Namespace) -> int:
    import anyio

    from jigs._registry import default_registry

    kinds = args.kinds or default_registry().enabled_kinds()
    return anyio.run(_install, kinds)


def cmd_model_server(args: argparse.Namespace) -> int:
    from jigs.testing._server.cli import main as server_main

    return server_main(args.rest)


def cmd_demo(args: argparse.Namespace) -> int:
    from jigs.testing.demo import main as demo_main

    return demo_main(kinds=args.harness or None)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jigs", description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log every pipeline stage")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("harnesses", help="list installed harness kinds")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_harnesses)

    p = sub.add_parser("doctor", help="run installation checks (and JIT checks with --cwd)")
    p.add_argument("--harness", metavar="KIND")
    p.add_argument(
        "--cwd", metavar="DIR", help="also run the just-in-time checks and MCP probes here"
    )
    p.add_argument("--settings", default="{}", help="descriptor settings as JSON (with --cwd)")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("run", help="run one agent turn and print the answer")
    p.add_argument("--harness", metavar="KIND", required=True)
    p.add_argument("--cwd", metavar="DIR", required=True)
    p.add_argument("--resume", metavar="SESSION_ID")
    p.add_argument("--run-id", metavar="ID", help="the workflow run id (sessions are per run)")
    p.add_argument("--settings", default="{}", help="descriptor settings as JSON")
    p.add_argument("prompt")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("install", help="install the CLI of harness kinds that need it (e.g. pi)")
    p.add_argument("kinds", nargs="*", metavar="KIND")
    p.set_defaults(func=cmd_install)

    p = sub.add_parser("model-server", help="serve a scripted loopback model server")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_model_server)

    p = sub.add_parser("demo", help="run every installed kind against the local model server")
    p.add_argument("--harness", metavar="KIND", action="append")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from jigs.errors import JigsError

    args = build_parser().parse_args(argv)
    _configure_logging(args.verbose)
    try:
        code: Any = args.func(args)
    except JigsError as exc:
        print(f"jigs: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
