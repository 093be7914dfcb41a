"""``jigs runs``: list, show and prune the runs jigs keeps (local state and session store).

Self-contained: :func:`add_parser` adds the subcommand to the ``jigs`` parser. The store is
the one a step would use from the current directory: ``--store URL``, else
``JIGS_SESSION_STORE``, else ``[session_store]`` / ``[tool.jigs.session_store]`` found from the
current directory upward, else the local directory.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jigs.cli._output import table
from jigs.engine._steplog import read_events, step_logs
from jigs.policy._paths import data_dir
from jigs.sandbox._private_dirs import sweep
from jigs.stores._config import configured_store, store_from_url
from jigs.stores._runs import find_run, list_runs, parse_age, prune_runs

__all__ = ["add_parser"]


def _store(args: argparse.Namespace) -> Any:
    if args.store:
        return store_from_url(args.store)
    return configured_store(Path.cwd())


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _age(seconds: float) -> str:
    for unit, span in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= span:
            return f"{seconds / span:.0f}{unit}"
    return f"{seconds:.0f}s"


def cmd_list(args: argparse.Namespace) -> int:
    runs = list_runs(_store(args))
    if args.json:
        print(json.dumps([r.as_dict() for r in runs], indent=2))
        return 0
    if not runs:
        print("no runs are kept")
        return 0
    rows = [
        [
            r.run_id + (" (locked)" if r.locked else ""),
            ",".join(r.kinds) or "-",
            str(len(r.sessions)),
            _size(r.local_bytes + r.store_bytes),
            _age(r.age),
            ", ".join(r.stores) or "-",
        ]
        for r in runs
    ]
    print(table(rows, ["run", "kinds", "sessions", "size", "age", "store"]))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    found = find_run(list_runs(_store(args)), args.run)
    if found is None:
        print(f"jigs: no run {args.run!r} is kept (see `jigs runs list`)", file=sys.stderr)
        return 1
    data = found.as_dict()
    if getattr(args, "events", False):
        return _show_events(found.name, as_json=args.json)
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    for key in (
        "run_id",
        "kinds",
        "sessions",
        "local_bytes",
        "store_bytes",
        "store_keys",
        "age_seconds",
        "stores",
        "locked",
        "worktrees",
    ):
        value = data[key]
        shown = ", ".join(map(str, value)) if isinstance(value, list) else value
        print(f"{key}: {shown if shown not in ('', None) else '-'}")
    return 0


def _show_events(name: str, *, as_json: bool) -> int:
    """Every step's events of a run (the step logs, secret values already redacted)."""
    logs = step_logs(data_dir() / "runs" / name)
    if as_json:
        steps = [
            {"kind": path.parent.parent.name, "log": path.name, "events": list(read_events(path))}
            for path in logs
        ]
        print(json.dumps(steps, indent=2))
        return 0
    if not logs:
        print("no step log is kept for this run on this machine")
        return 0
    for path in logs:
        print(f"== {path.parent.parent.name} step {path.stem}")
        for event in read_events(path):
            print(f"  turn {event.get('turn')}: {_event_line(event)}")
    return 0


def _event_line(event: dict[str, Any]) -> str:
    kind = event.get("type")
    if kind == "tool-call-started":
        shown = json.dumps(event.get("arguments"), default=str)
        return f"> {event.get('name')} {shown[:100]}"
    if kind == "tool-call-finished":
        return f"  {event.get('name')} {'failed' if event.get('is_error') else 'done'}"
    if kind == "text-delta":
        return f"text {str(event.get('text'))[:100]!r}"
    if kind == "usage":
        usage = event.get("usage") or {}
        tokens = f"{usage.get('input_tokens')} in, {usage.get('output_tokens')} out"
        return f"usage {tokens}, cost {usage.get('cost_usd')}"
    if kind == "session":
        return f"session {event.get('session_id')}"
    if kind in ("turn-completed", "turn-failed"):
        return f"{kind} ({event.get('stop_reason') or event.get('reason')})"
    return str(kind)


def cmd_prune(args: argparse.Namespace) -> int:
    if (args.run is None) == (args.older_than is None):
        print(
            "jigs: runs prune needs exactly one of --run RUN or --older-than AGE", file=sys.stderr
        )
        return 2
    try:
        older = parse_age(args.older_than) if args.older_than is not None else None
    except ValueError as exc:
        print(f"jigs: --older-than: {exc}", file=sys.stderr)
        return 2
    report = prune_runs(_store(args), run=args.run, older_than=older, dry_run=args.dry_run)

    swept = [str(path) for path in sweep(dry_run=args.dry_run)]
    missing = args.run is not None and not report.removed and not report.refused
    if args.json:
        print(json.dumps({**report.as_dict(), "stale_private_dirs": swept}, indent=2))
    else:
        verb = "would remove" if args.dry_run else "removed"
        for path in swept:
            print(f"{verb} {path}: a private dir its killed worker left")
        for item in report.removed:
            print(
                f"{verb} {item['run_id']}: {_size(item['local_bytes'])} local, "
                f"{len(item['store_keys'])} store keys ({_size(item['store_bytes'])})"
            )
        for item in report.refused:
            print(f"refused {item['run_id']}: {item['reason']}", file=sys.stderr)
        if not report.removed and not report.refused and not missing and not swept:
            print("nothing to prune")
    if missing:
        print(f"jigs: no run {args.run!r} is kept (see `jigs runs list`)", file=sys.stderr)
        return 1
    return 1 if report.refused else 0


def add_parser(sub: Any, command: Callable[..., argparse.ArgumentParser]) -> None:
    """Add ``jigs runs {list,show,prune}`` to the subparsers ``sub``."""
    json_help = "print one JSON document instead of text (for scripts)"
    store_help = (
        "the session store (a URL: local, local:/dir, postgresql://..., s3://...; default: "
        "JIGS_SESSION_STORE, else the configuration found from here, else the local directory)"
    )
    runs = command(
        sub,
        "runs",
        "list, show and prune the runs jigs keeps (local state and session store)",
        "Exit codes: 0 success; 1 an unknown run or a refused (locked) run; 2 a usage error.",
    )
    inner = runs.add_subparsers(dest="runs_command", required=True, metavar="ACTION")

    p = inner.add_parser("list", help="every run: id, kinds, sessions, size, age, store")
    p.add_argument("--json", action="store_true", help=json_help)
    p.add_argument("--store", metavar="URL", help=store_help)
    p.set_defaults(func=cmd_list)

    p = inner.add_parser("show", help="one run in detail")
    p.add_argument("run", metavar="RUN", help="the run id")
    p.add_argument(
        "--events", action="store_true", help="print every step's events (the step logs)"
    )
    p.add_argument("--json", action="store_true", help=json_help)
    p.add_argument("--store", metavar="URL", help=store_help)
    p.set_defaults(func=cmd_show)

    p = inner.add_parser(
        "prune",
        help=(
            "remove runs (local state and store artifacts), never a run holding a lock, and "
            "the private temp dirs killed workers left"
        ),
    )
    p.add_argument("--run", metavar="RUN", help="remove this run")
    p.add_argument(
        "--older-than", metavar="AGE", help="remove runs untouched for AGE (7d, 12h, 30m, 45s)"
    )
    p.add_argument(
        "--dry-run", action="store_true", help="say what would be removed, remove nothing"
    )
    p.add_argument("--json", action="store_true", help=json_help)
    p.add_argument("--store", metavar="URL", help=store_help)
    p.set_defaults(func=cmd_prune)
