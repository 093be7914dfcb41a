"""The jigs command: list, check, install and run the harness kinds of jigs.

Subcommands: ``harnesses``, ``doctor``, ``run``, ``install``, ``model-server``, ``demo``,
``runs`` and ``new-kind`` (``jigs COMMAND --help`` describes each); ``jigs --version`` prints the
version of jigs-core and of each installed kind's distribution. Each subcommand imports what it
needs only when it runs. Output is plain text when stdout is not a terminal; ``--json``
(``harnesses``, ``doctor``, ``run``, ``runs``) prints one JSON document for scripts. Exit codes:
0 success, 1 a failure (a failed check, install, turn or demo, or no kind installed where one is
needed), 2 a usage error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import uuid
from collections.abc import Sequence
from contextlib import nullcontext
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import anyio

from jigs import harnesses
from jigs.cli._doctor import doctor
from jigs.cli._install import install
from jigs.cli._new_kind import new_kind, next_steps
from jigs.cli._output import is_tty, progress, table
from jigs.cli._runs import add_parser as add_runs_parser
from jigs.engine._types import AgentSessionRef, RunMetadata
from jigs.errors import InvalidInputError, JigsError, MissingDistributionError
from jigs.policy._paths import run_state_dir
from jigs.registry._registry import (
    default_registry,
    distribution_of,
    entry_points,
    hidden_test_kinds,
)
from jigs.steps import run_agent
from jigs.stores._session_sync import stored_fields

__all__ = ["build_parser", "main", "versions"]

_DESCRIPTION = (
    "Open coding-agent CLIs (Claude Code, Codex, Pi, ...) for workflow steps: list, check, "
    "install and run the installed harness kinds."
)
_EPILOG = (
    "Exit codes: 0 success; 1 a failed check, install, turn or demo, or no kind installed "
    "where one is needed; 2 a usage error; 130 interrupted."
)


def _configure_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(message)s",
    )


def _settings(text: str) -> dict[str, Any]:
    """``--settings`` as a JSON object, or a usage error (exit 2, as for any bad option)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        # json's reason and position only: never the text, which may hold a value
        raise InvalidInputError(
            f"--settings is not valid JSON ({exc.msg} at line {exc.lineno} column "
            f"{exc.colno}); pass one JSON "
            f'object, e.g. \'{{"model": "sonnet"}}\'',
            argument="--settings",
        ) from None
    if not isinstance(value, dict):
        raise InvalidInputError(
            "--settings must be a JSON object of descriptor settings", argument="--settings"
        )
    return value


def versions() -> list[tuple[str, str, str]]:
    """``(kind, distribution, version)`` for jigs-core (kind ``""``) and each installed kind,
    read from the distributions' metadata without importing any plugin. A kind blocked by
    ``JIGS_DISABLE_PLUGINS`` is listed with ``(disabled)`` after its version; a test kind only
    with ``JIGS_SHOW_TEST_KINDS=1``."""
    try:
        core = version("jigs-core")
    except PackageNotFoundError:  # a source tree on sys.path, not an installed distribution
        core = "unknown"
    found: list[tuple[str, str, str]] = [("", "jigs-core", core)]
    disabled = {k.strip() for k in os.environ.get("JIGS_DISABLE_PLUGINS", "").split(",")}
    hidden = hidden_test_kinds()
    seen = set()
    for ep in sorted(entry_points("jigs.harnesses"), key=lambda e: e.name):
        if ep.name in hidden:
            continue
        name, number = (about or "-" for about in distribution_of(ep))
        if (ep.name, name) in seen:
            continue
        seen.add((ep.name, name))
        found.append((ep.name, name, f"{number} (disabled)" if ep.name in disabled else number))
    return found


class _Version(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        rows = versions()
        print(f"jigs-core {rows[0][2]}")
        for kind, dist, number in rows[1:]:
            print(f"  {kind}: {dist} {number}")
        parser.exit()


def cmd_harnesses(args: argparse.Namespace) -> int:
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
            i.contract or "-",
            i.error or ("disabled" if i.disabled else "ok"),
        ]
        for i in infos
    ]
    print(table(rows, ["kind", "distribution", "version", "model", "contract", "status"]))
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    kinds = [args.harness] if args.harness else default_registry().enabled_kinds()
    return doctor(kinds, args.cwd, _settings(args.settings), as_json=args.json)


async def _run(args: argparse.Namespace) -> int:
    descriptor = harnesses.load({"kind": args.harness, **_settings(args.settings)})
    run = RunMetadata(workflow_run_id=args.run_id or f"cli-{uuid.uuid4().hex[:12]}")
    # what main() prints if the turn is interrupted (Ctrl-C), so that it can be resumed
    args.effective_run_id, args.session_id = run.workflow_run_id, args.resume
    resume = None
    if args.resume:
        # a bare id: the snapshot this machine stored for it, so the resume is digest-checked
        fields = stored_fields(run_state_dir(run.workflow_run_id, args.harness), args.resume)
        resume = AgentSessionRef(
            harness=args.harness,
            id=args.resume,
            descriptor=descriptor.describe(),
            store_key=fields[0] if fields else None,
            digest=fields[1] if fields else None,
        )
    live = is_tty(sys.stderr) and not args.verbose
    started = time.monotonic()

    def show(event: Any) -> None:
        if event.type == "session":
            args.session_id = event.session_id
        # tool calls as they happen (on stderr; the answer alone goes to stdout)
        if args.json:
            return
        clear = "\r\x1b[K" if live else ""
        if event.type == "tool-call-started":
            shown = json.dumps(event.arguments, default=str)
            shown = shown if len(shown) <= 100 else shown[:97] + "..."
            print(f"{clear}> {event.name} {shown}", file=sys.stderr, flush=True)
        elif event.type == "tool-call-finished" and event.is_error:
            print(f"{clear}  {event.name} failed", file=sys.stderr, flush=True)

    with progress(f"{args.harness}: running the turn") if live else nullcontext():
        result = await run_agent(
            harness=descriptor,
            cwd=args.cwd,
            prompt=args.prompt,
            run=run,
            resume=resume,
            on_event=show,
        )
    return _print_result(args, result, run.workflow_run_id, time.monotonic() - started)


def _print_result(args: argparse.Namespace, result: Any, run_id: str, seconds: float) -> int:
    """``jigs run``'s output: the answer on stdout, the ids and usage on stderr (or --json)."""
    session = result.session.id if result.session else None
    usage = {
        name: getattr(result.usage, name, None)
        for name in ("input_tokens", "output_tokens", "cached_input_tokens", "cost_usd")
    }
    if args.json:
        document = {
            "text": result.text,
            "session": session,
            "run": run_id,
            "seconds": round(seconds, 3),
            "usage": usage,
        }
        print(json.dumps(document, indent=2))
        return 0
    print(result.text)
    print(f"session: {session or '-'}", file=sys.stderr)
    print(f"run: {run_id}", file=sys.stderr)
    tokens = ", ".join(
        f"{usage[name]} {label}"
        for name, label in (("input_tokens", "in"), ("output_tokens", "out"))
        if usage[name] is not None
    )
    cost = f", ${usage['cost_usd']:.4f}" if usage["cost_usd"] is not None else ""
    print(f"took {seconds:.1f}s; tokens: {tokens or '-'}{cost}", file=sys.stderr)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    return anyio.run(_run, args)


def cmd_install(args: argparse.Namespace) -> int:
    return install(list(args.kinds))


def _testing(module: str, command: str) -> Any:
    """``jigs_testing.<module>``, imported when the command runs; jigs-testing is a distribution
    of its own, so a missing one is a :class:`~jigs.errors.MissingDistributionError` naming the
    ``pip install``."""
    try:
        return import_module(f"jigs_testing.{module}")
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != "jigs_testing":
            raise
        raise MissingDistributionError("jigs-testing", needed_for=f"jigs {command}") from exc


def cmd_model_server(args: argparse.Namespace) -> int:
    server_main = _testing("_server.cli", "model-server").main
    argv = ["--port", str(args.port), "--host", args.host]
    if args.script is not None:
        argv += ["--script", args.script]
    for model in args.model:
        argv += ["--model", model]
    return int(server_main(argv))


def cmd_demo(args: argparse.Namespace) -> int:
    demo = _testing("demo", "demo")
    if args.workflow == "dbos":
        try:
            from jigs_dbos._demo import main as workflow_demo
        except ImportError:
            print(
                "jigs demo --workflow dbos needs jigs-dbos: pip install jigs-dbos", file=sys.stderr
            )
            return 1
        result: int = workflow_demo(kinds=args.harness or None)
        return result
    result = demo.main(kinds=args.harness or None)
    return int(result)


def cmd_new_kind(args: argparse.Namespace) -> int:
    try:
        target = new_kind(args.name, Path(args.dir))
    except InvalidInputError as exc:
        print(f"jigs new-kind: {exc}", file=sys.stderr)
        return 2
    print(f"created {target} (the {args.name!r} harness kind)")

    taken = [ep for ep in entry_points("jigs.harnesses") if ep.name == args.name]
    if taken:
        dist = distribution_of(taken[0])[0] or "?"
        print(
            f"jigs new-kind: warning: {dist} already provides the kind {args.name!r} here; two "
            f"distributions of one kind are both refused (rename it, or uninstall {dist})",
            file=sys.stderr,
        )
    print(f"next: {next_steps(target)}")
    return 0


def _command(sub: Any, name: str, summary: str, details: str = "") -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        description=f"{summary[0].upper()}{summary[1:]}." + (f" {details}" if details else ""),
    )
    return parser


_JSON_HELP = "print one JSON document instead of text (for scripts)"
_SETTINGS_HELP = 'descriptor settings as a JSON object, e.g. \'{"model": "..."}\' (default: {})'


def build_parser() -> argparse.ArgumentParser:
    """The ``jigs`` command line: the global options, then one subcommand each."""
    parser = argparse.ArgumentParser(prog="jigs", description=_DESCRIPTION, epilog=_EPILOG)
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log every pipeline stage on stderr"
    )
    parser.add_argument(
        "--version",
        action=_Version,
        help="print the version of jigs-core and of each installed kind's distribution, and exit",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_harnesses(sub)
    _add_doctor(sub)
    _add_run(sub)
    _add_install(sub)
    _add_model_server(sub)
    _add_demo(sub)
    _add_new_kind(sub)
    add_runs_parser(sub, _command)
    return parser


def _add_harnesses(sub: Any) -> None:
    """``jigs harnesses``: the installed kinds."""
    p = _command(sub, "harnesses", "list the installed harness kinds")
    p.add_argument("--json", action="store_true", help=_JSON_HELP)
    p.set_defaults(func=cmd_harnesses)


def _add_doctor(sub: Any) -> None:
    """``jigs doctor``: each kind's checks."""
    p = _command(
        sub,
        "doctor",
        "check each kind's CLI, login or model key (and with --cwd the worktree)",
        "Prints a table of checks and the fix for each failure; exits 1 if any check failed "
        "or no kind is installed.",
    )
    p.add_argument("--harness", metavar="KIND", help="check this kind only (default: every kind)")
    p.add_argument(
        "--cwd", metavar="DIR", help="also run the just-in-time checks and MCP probes in DIR"
    )
    p.add_argument("--settings", default="{}", metavar="JSON", help=_SETTINGS_HELP)
    p.add_argument("--json", action="store_true", help=_JSON_HELP)
    p.set_defaults(func=cmd_doctor)


def _add_run(sub: Any) -> None:
    """``jigs run``: one turn."""
    p = _command(
        sub,
        "run",
        "run one agent turn and print the answer",
        "The answer goes to stdout; the session id, run id, duration and token counts to stderr.",
    )
    p.add_argument("--harness", metavar="KIND", required=True, help="the harness kind to run")
    p.add_argument("--cwd", metavar="DIR", required=True, help="the worktree the agent works in")
    p.add_argument(
        "--resume", metavar="SESSION_ID", help="continue this session (from an earlier run)"
    )
    p.add_argument(
        "--run-id", metavar="ID", help="the workflow run id (sessions are per run; default: new)"
    )
    p.add_argument("--settings", default="{}", metavar="JSON", help=_SETTINGS_HELP)
    p.add_argument("--json", action="store_true", help=_JSON_HELP)
    p.add_argument("prompt", help="what to ask the agent")
    p.set_defaults(func=cmd_run)


def _add_install(sub: Any) -> None:
    """``jigs install``: the CLIs pip does not bring."""
    p = _command(
        sub,
        "install",
        "install the CLIs that pip does not bring (e.g. pi)",
        "Exits 1 if an install failed, a kind is unknown, or no kind is installed.",
    )
    p.add_argument(
        "kinds", nargs="*", metavar="KIND", help="the kinds to install (default: every kind)"
    )
    p.set_defaults(func=cmd_install)


def _add_model_server(sub: Any) -> None:
    """``jigs model-server``: the scripted fake model API."""
    p = _command(
        sub,
        "model-server",
        "serve a scripted fake model API on the loopback interface",
        "Speaks the Anthropic Messages, OpenAI Responses and Chat Completions APIs; prints the "
        "base URL on stdout and serves until SIGINT or SIGTERM.",
    )
    p.add_argument(
        "--script",
        metavar="FILE",
        help="JSON or YAML list of replies, one per model request (default: none)",
    )
    p.add_argument(
        "--port", type=int, default=0, metavar="N", help="TCP port (default: a free one)"
    )
    p.add_argument(
        "--host", default="127.0.0.1", metavar="ADDR", help="address (default: 127.0.0.1)"
    )
    p.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="ID",
        help="a model id for GET /v1/models (repeatable; default: fake-model)",
    )
    p.set_defaults(func=cmd_model_server)


def _add_demo(sub: Any) -> None:
    """``jigs demo``: every kind end to end, or a workflow on DBOS."""
    p = _command(
        sub,
        "demo",
        "run every installed kind end to end against the local model server",
        "No credentials, no network. Exits 1 if a kind failed or none could run.",
    )
    p.add_argument(
        "--harness",
        metavar="KIND",
        action="append",
        help="demo this kind only (repeatable; default: every kind)",
    )
    p.add_argument(
        "--workflow",
        choices=["dbos"],
        help="instead, a two-step workflow on DBOS (SQLite) whose worker is killed during step 2 "
        "and recovered by a second worker (needs jigs-dbos; the first installed of the --harness "
        "kinds, default claude, codex, pi)",
    )
    p.set_defaults(func=cmd_demo)


def _add_new_kind(sub: Any) -> None:
    """``jigs new-kind``: a new harness distribution."""
    p = _command(
        sub,
        "new-kind",
        "create a harness distribution jigs-harness-NAME that passes the conformance kit",
        "Writes a pyproject with the jigs.harnesses entry point, a harness driving a small "
        "stand-in CLI to replace with yours, a README and tests/test_conformance.py. Exits 2 for "
        "a bad NAME or a target directory that is not empty.",
    )
    p.add_argument("name", metavar="NAME", help="the kind name, e.g. mykind (lower-case)")
    p.add_argument(
        "--dir", default=".", metavar="DIR", help="create jigs-harness-NAME in DIR (default: .)"
    )
    p.set_defaults(func=cmd_new_kind)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _configure_logging(args.verbose)
    try:
        code: Any = args.func(args)
    except InvalidInputError as exc:
        print(f"jigs: {type(exc).__name__}: {exc}", file=sys.stderr)
        # a bad command-line option is a usage error, as argparse's own are
        return 2 if exc.argument.startswith("--") else 1
    except JigsError as exc:
        print(f"jigs: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"jigs {args.command}: interrupted{_interrupted_ids(args)}", file=sys.stderr)
        return 130
    return int(code)


def _interrupted_ids(args: argparse.Namespace) -> str:
    """For ``jigs run``: the session and run ids of the interrupted turn, so that it can be
    resumed (``--resume``) or pruned (``jigs runs``); "" for other commands."""
    run_id = getattr(args, "effective_run_id", None)
    if run_id is None:
        return ""
    session = getattr(args, "session_id", None)
    return f" (session: {session or '- (the CLI had not started one)'}; run: {run_id})"
