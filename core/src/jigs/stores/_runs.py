"""Retention: what runs jigs keeps (locally and in the session store), and removing them.

A run is ``<data>/runs/<safe run id>/`` (one dir per kind: the kind's state, ``stored/``
records of the sessions sent to the store) plus every store key under ``<safe run id>/``.
A run is *locked* while an agent of that run holds a worktree lock (the lock's holder record
names the run; :func:`jigs.policy._lock.worktree_locked` proves the lock is live): prune never
touches it. The worktrees :func:`jigs.worktrees.provision` made for a run go with it, under the
rule :func:`jigs.worktrees.release` applies (:func:`jigs.worktrees._retention.removal_problem`):
a run with a worktree that would lose work is refused, whole.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from jigs.policy._lock import worktree_locked
from jigs.policy._paths import data_dir
from jigs.stores._session_sync import RUN_FILE, STORED_DIR
from jigs.worktrees._retention import WORKTREES_FILE, recorded_at, removal_problem, remove

if TYPE_CHECKING:
    from jigs.stores import SessionStore

__all__ = ["PruneReport", "RunInfo", "list_runs", "locked_runs", "parse_age", "prune_runs"]


@dataclass(slots=True)
class RunInfo:
    """One run as ``jigs runs`` shows it."""

    run_id: str
    name: str  # the directory / store prefix (the run id made safe for paths)
    kinds: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    local_bytes: int = 0
    store_bytes: int = 0
    store_keys: int = 0
    modified: float = 0.0
    stores: list[str] = field(default_factory=list)
    local: bool = False
    locked: bool = False
    #: The worktrees jigs provisioned for the run (their paths).
    worktrees: list[str] = field(default_factory=list)

    @property
    def age(self) -> float:
        return max(0.0, time.time() - self.modified)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["age_seconds"] = round(self.age, 1)
        data["size"] = self.local_bytes + self.store_bytes
        return data


@dataclass(slots=True)
class PruneReport:
    removed: list[dict[str, Any]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"removed": self.removed, "refused": self.refused}


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_age(text: str) -> float:
    """``"7d"``, ``"12h"``, ``"30m"``, ``"45s"``, ``"2w"`` -> seconds; ValueError otherwise."""
    number, unit = text[:-1], text[-1:]
    if unit not in _UNITS or not number.isdigit():
        raise ValueError(f"{text!r} is not an age like 7d, 12h, 30m, 45s or 2w")
    return float(int(number) * _UNITS[unit])


def locked_runs() -> set[str]:
    """Run ids that hold a live worktree lock now."""
    locks = data_dir() / "locks"
    found: set[str] = set()
    if not locks.is_dir():
        return found
    for holder in locks.glob("*.holder"):
        try:
            record = json.loads(holder.read_text(encoding="utf-8"))
            run_id, worktree = record["run_id"], record["worktree"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if (
            isinstance(run_id, str)
            and isinstance(worktree, str)
            and worktree_locked(Path(worktree))
        ):
            found.add(run_id)
    return found


def _local_runs() -> dict[str, RunInfo]:
    runs: dict[str, RunInfo] = {}
    root = data_dir() / "runs"
    if not root.is_dir():
        return runs
    for run_dir in sorted(root.iterdir()):
        if not run_dir.is_dir():
            continue
        info = RunInfo(run_id=run_dir.name, name=run_dir.name, local=True)
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            info.run_id = str(json.loads((run_dir / RUN_FILE).read_text())["run_id"])
        sessions: set[str] = set()
        stores: set[str] = set()
        for path in run_dir.rglob("*"):
            try:
                stat = path.lstat()
            except OSError:
                continue
            info.modified = max(info.modified, stat.st_mtime)
            if path.is_file() and not path.is_symlink():
                info.local_bytes += stat.st_size
        for kind_dir in sorted(p for p in run_dir.iterdir() if p.is_dir()):
            info.kinds.append(kind_dir.name)
            for record_path in (kind_dir / STORED_DIR).glob("*.json"):
                try:
                    record = json.loads(record_path.read_text())
                    sessions.add(f"{kind_dir.name}:{record['session_id']}")
                    stores.add(str(record["store"]))
                except (OSError, ValueError, KeyError, TypeError):
                    continue
        info.sessions = sorted(sessions)
        info.stores = sorted(stores)
        info.worktrees = [w.path for w in recorded_at(run_dir / WORKTREES_FILE)]
        runs[info.name] = info
    return runs


def list_runs(store: SessionStore | None) -> list[RunInfo]:
    """Every run kept locally or in ``store``, newest first."""
    runs = _local_runs()
    if store is not None:
        by_run: dict[str, list[Any]] = {}
        for artifact in store.list(""):
            by_run.setdefault(artifact.key.split("/", 1)[0], []).append(artifact)
        where = store.describe()
        for name, artifacts in by_run.items():
            info = runs.get(name)
            if info is None:
                info = runs[name] = RunInfo(run_id=name, name=name)
                manifest = next((a for a in artifacts if "/manifests/" in a.key), None)
                if manifest is not None:
                    with contextlib.suppress(ValueError, KeyError, TypeError):
                        info.run_id = str(json.loads(store.get(manifest.key) or b"")["run_id"])
            info.store_bytes = sum(a.size for a in artifacts)
            info.store_keys = len(artifacts)
            info.modified = max(info.modified, *(a.modified for a in artifacts))
            sessions = {
                f"{a.key.split('/')[1]}:{a.key.split('/')[2]}"
                for a in artifacts
                if a.key.count("/") >= 3
            }
            if not info.local:
                info.kinds = sorted({s.split(":")[0] for s in sessions})
            info.sessions = sorted(set(info.sessions) | sessions)
            if where not in info.stores:
                info.stores.append(where)
    locked = locked_runs()
    for info in runs.values():
        info.locked = info.run_id in locked
    return sorted(runs.values(), key=lambda r: r.modified, reverse=True)


def find_run(runs: Iterable[RunInfo], run: str) -> RunInfo | None:
    """The run whose id (or directory name) is ``run``."""
    for info in runs:
        if run in (info.run_id, info.name):
            return info
    return None


def prune_runs(
    store: SessionStore | None,
    *,
    run: str | None = None,
    older_than: float | None = None,
    dry_run: bool = False,
) -> PruneReport:
    """Remove ``run`` (by id), or every run not modified for ``older_than`` seconds: its local
    dir, its store keys and its provisioned worktrees. A locked run, or one with a worktree that
    would lose work (:func:`~jigs.worktrees._retention.removal_problem`), is refused (listed in
    ``refused``), never touched. With ``dry_run`` nothing is removed; the report says what
    would be. Runs git (hardened) for the worktrees' check: call it outside an event loop's
    thread."""
    report = PruneReport()
    runs = list_runs(store)
    if run is not None:
        found = find_run(runs, run)
        candidates = [found] if found is not None else []
    else:
        limit = older_than if older_than is not None else float("inf")
        candidates = [r for r in runs if r.age >= limit]
    for info in candidates:
        local_dir = data_dir() / "runs" / info.name
        worktrees = recorded_at(local_dir / WORKTREES_FILE)
        problem = (
            "an agent of this run holds a worktree lock"
            if info.locked
            else anyio.run(_worktree_problem, worktrees)
        )
        if problem is not None:
            report.refused.append({"run_id": info.run_id, "reason": problem})
            continue
        keys = [a.key for a in store.list(f"{info.name}/")] if store is not None else []
        if not dry_run:
            # the store first: a run whose keys could not all be removed stays listed locally
            for key in keys:
                store.delete(key)  # type: ignore[union-attr]
            for worktree in worktrees:
                remove(worktree)
            if local_dir.is_dir():
                shutil.rmtree(local_dir)
        report.removed.append(
            {
                "run_id": info.run_id,
                "local_dir": str(local_dir) if info.local else None,
                "local_bytes": info.local_bytes,
                "store_keys": keys,
                "store_bytes": info.store_bytes,
                "worktrees": [w.path for w in worktrees],
                "dry_run": dry_run,
            }
        )
    return report


async def _worktree_problem(worktrees: list[Any]) -> str | None:
    """The first of the run's worktrees that removing would lose work in, and why."""
    for worktree in worktrees:
        problem = await removal_problem(worktree)
        if problem is not None:
            return f"its worktree {worktree.path} is kept: {problem}"
    return None
