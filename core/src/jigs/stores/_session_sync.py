"""Moving a step's session between the machine and the session store.

At close (:func:`save_session`) the files the kind declares
(:meth:`jigs.plugin.Harness.session_artifacts`) are stored content-addressed, then a manifest
naming them; the manifest's key and sha256 go into the :class:`~jigs.AgentSessionRef`. Before a
resume (:func:`restore_session`) the manifest is fetched and checked against the ref's digest,
each artifact that is not already here byte for byte is fetched and checked against the
manifest, and only when everything checks out are the files placed (atomically) where the CLI
expects them. Anything missing, truncated or altered raises
:class:`~jigs.errors.AgentSessionError` before any process starts.

Store layout (keys)::

    <run>/<kind>/<session>/manifests/<sha256 of the manifest>.json
    <run>/<kind>/<session>/files/<sha256 of the artifact>

Snapshots are immutable: a retried step resumes from exactly the snapshot its ref names, even
after a later attempt stored a longer transcript.

A session follows the workflow to another machine, not to a sibling worktree: when the
worktree it ran in (recorded in the manifest) still exists on this machine and the step runs in
another one, nothing is fetched and the kind's own ``verify_resume`` decides (Claude refuses a
transcript of another worktree) -- but a local copy there that is not the snapshot is refused
(Codex and Pi keep theirs per run, so a sibling worktree reads the same, editable, files).

The store cannot be dodged: a save that fails raises :class:`~jigs.errors.SessionSaveError`
(the step fails), and a ref without a digest is refused when a local copy exists. Files the
agent could have written are read as bounded regular files (:func:`read_regular`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread

from jigs.errors import AgentSessionError, SessionSaveError, SessionStoreError
from jigs.policy._files import write_atomic
from jigs.policy._paths import _safe, data_dir
from jigs.stores import check_key
from jigs.stores._protocol import sha256_hex

if TYPE_CHECKING:
    from jigs.engine._types import AgentSessionRef, RunMetadata
    from jigs.plugin import Harness, HarnessContext
    from jigs.stores import SessionStore

__all__ = [
    "DIGEST",
    "MAX_ARTIFACT",
    "STORE_TIMEOUT",
    "Snapshot",
    "describe_store",
    "read_regular",
    "record_run",
    "restore_session",
    "save_snapshot",
    "session_prefix",
    "snapshot",
    "stored_fields",
]

#: Seconds one store operation (a whole save or a whole restore) may take.
STORE_TIMEOUT = 30.0
#: The shape of ``AgentSessionRef.digest``.
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
#: Largest session artifact jigs stores (a long Codex rollout is some MB).
MAX_ARTIFACT = 512 * 1024 * 1024
#: Largest manifest jigs reads (a manifest lists names and digests only).
_MAX_MANIFEST = 1024 * 1024
#: A session's record in the run's state dir (what ``jigs runs`` reads without the store).
STORED_DIR = "stored"
RUN_FILE = "run.json"

T = TypeVar("T")


@dataclass(frozen=True)
class Snapshot:
    """A session's artifacts at one moment: the manifest, its key and digest, and the bytes."""

    key: str
    digest: str
    manifest: bytes
    files: Mapping[str, bytes]  # sha256 hex -> bytes
    size: int


def session_prefix(run_id: str, kind: str, session_id: str) -> str:
    """The store prefix of one session (no trailing ``/``)."""
    return f"{_safe(run_id)}/{_safe(kind)}/{_safe(session_id)}"


def record_run(run: RunMetadata) -> None:
    """Note the run's real id in ``<data>/runs/<safe id>/run.json`` (once) for ``jigs runs``:
    a listing, so not fsynced (``jigs runs`` shows the safe name where a machine crash left it
    empty, and the run's next step writes it again)."""
    path = data_dir() / "runs" / _safe(run.workflow_run_id) / RUN_FILE
    with contextlib.suppress(OSError):
        if path.stat().st_size:
            return
    with contextlib.suppress(OSError):
        write_atomic(
            path,
            json.dumps({"run_id": run.workflow_run_id, "created": time.time()}).encode(),
            durable=False,
        )


def snapshot(
    harness: Harness[Any], ctx: HarnessContext, cwd: Path, session_id: str
) -> Snapshot | None:
    """The session's artifacts as they are now, or None when the kind declares none (or none
    exists yet). Reads the files; never raises for a file that vanished meanwhile."""
    paths = harness.session_artifacts(session_id, ctx, cwd)
    if not paths:
        return None
    artifacts: dict[str, dict[str, Any]] = {}
    files: dict[str, bytes] = {}
    for name, path in sorted(paths.items()):
        data = read_regular(path, limit=MAX_ARTIFACT)
        if data is None:  # vanished meanwhile, a link, a FIFO, or larger than any session
            continue
        digest = sha256_hex(data)
        artifacts[name] = {"sha256": digest, "size": len(data)}
        files[digest] = data
    if not artifacts:
        return None
    manifest = json.dumps(
        {
            "version": 1,
            "run_id": ctx.run.workflow_run_id,
            "kind": harness.kind,
            "session_id": session_id,
            "cwd": str(cwd),
            "artifacts": artifacts,
        },
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    digest = sha256_hex(manifest)
    prefix = session_prefix(ctx.run.workflow_run_id, harness.kind, session_id)
    return Snapshot(
        key=f"{prefix}/manifests/{digest}.json",
        digest=f"sha256:{digest}",
        manifest=manifest,
        files=files,
        size=sum(len(b) for b in files.values()),
    )


def _save_sync(store: SessionStore, snap: Snapshot) -> None:
    prefix = snap.key.rsplit("/manifests/", 1)[0]
    for digest, data in snap.files.items():
        key = f"{prefix}/files/{digest}"
        if not store.exists(key):
            store.put(key, data)
    # the manifest last: a manifest never names an artifact that is not stored yet
    store.put(snap.key, snap.manifest)


async def save_snapshot(store: SessionStore, snap: Snapshot, ctx: HarnessContext, log: Any) -> None:
    """Store ``snap`` and record it in the run's state dir. A store that fails is logged
    (``store.session.save_failed``) and raises :class:`~jigs.errors.SessionSaveError`: the
    step that made the session fails rather than hand out a ref nothing can check."""
    started = time.perf_counter()
    try:
        with anyio.fail_after(STORE_TIMEOUT):
            await _in_thread(lambda: _save_sync(store, snap))
    except (SessionStoreError, OSError, TimeoutError) as exc:
        log.error(
            "store.session.save_failed",
            store=describe_store(store),
            key=snap.key,
            error=type(exc).__name__,
            reason=str(exc)[:300],
        )
        raise _save_error(store, snap, exc) from None
    record = {
        "session_id": snap.key.rsplit("/manifests/", 1)[0].rsplit("/", 1)[1],
        "store_key": snap.key,
        "digest": snap.digest,
        "store": describe_store(store),
        "store_name": getattr(store, "name", type(store).__name__),
        "size": snap.size,
        "saved": time.time(),
    }
    name = snap.digest.removeprefix("sha256:")[:32]
    with contextlib.suppress(OSError):  # a listing for ``jigs runs`` (the store is the record)
        write_atomic(
            ctx.state_dir / STORED_DIR / f"{name}.json",
            json.dumps(record).encode(),
            durable=False,
        )
    log.info(
        "store.session.saved",
        store=describe_store(store),
        key=snap.key,
        bytes=snap.size,
        seconds=round(time.perf_counter() - started, 4),
    )


def _save_error(store: SessionStore, snap: Snapshot, exc: BaseException) -> SessionSaveError:
    session_id = snap.key.rsplit("/manifests/", 1)[0].rsplit("/", 1)[1]
    if isinstance(exc, TimeoutError):
        why, retryable = f"it did not answer within {STORE_TIMEOUT:g}s", True
    elif isinstance(exc, SessionStoreError):
        why, retryable = str(exc)[:300], exc.retryable
    else:
        why, retryable = f"{type(exc).__name__}: {getattr(exc, 'strerror', None) or exc}", False
    return SessionSaveError(
        f"the step's session {session_id[:64]} could not be saved to the session store "
        f"({describe_store(store)}): {why}. The step fails: its session could not be resumed "
        f"safely. Fix the store (free space, permissions, a file where a directory of it "
        f"belongs), then retry the step",
        store=describe_store(store),
        session_id=session_id,
        retryable=retryable,
    )


async def restore_session(
    store: SessionStore,
    harness: Harness[Any],
    *,
    ref: AgentSessionRef,
    ctx: HarnessContext,
    cwd: Path,
    log: Any,
) -> None:
    """Make the session ``ref`` names present here, byte for byte, or raise
    :class:`AgentSessionError` (missing, truncated, altered, foreign) before anything starts.
    A ref without store fields (recorded before stores, or by a kind without artifacts) is left
    to the kind's own ``verify_resume``. A store that cannot be reached raises
    :class:`~jigs.errors.SessionStoreError` (retryable)."""
    if ref.store_key is None or ref.digest is None:
        if harness.session_artifacts(ref.id, ctx, cwd):
            # nothing proves the local copy is the one the step left: its save failed (that
            # step failed, see SessionSaveError), or the ref predates session stores
            raise AgentSessionError(
                f"the {ref.harness} session {ref.id[:64]} cannot be resumed: its ref carries no "
                f"store key and digest (the session was never saved to the session store), so "
                f"nothing proves the local copy is the one its step left; start without resume",
                kind=ref.harness,
                session_id=ref.id,
            )
        return
    started = time.perf_counter()
    try:
        with anyio.fail_after(STORE_TIMEOUT):
            placed = await _in_thread(lambda: _restore_sync(store, harness, ref, ctx, cwd))
    except TimeoutError:
        raise SessionStoreError(
            f"the session store ({describe_store(store)}) did not answer within {STORE_TIMEOUT:g}s "
            f"while fetching session {ref.id[:64]}; check the store, then retry the step",
            store=describe_store(store),
            operation="get",
            retryable=True,
        ) from None
    if placed < 0:
        log.info(
            "store.session.not_moved",
            key=ref.store_key,
            reason="the session's worktree is on this machine; resume it there",
        )
        return
    log.info(
        "store.session.restored",
        store=describe_store(store),
        key=ref.store_key,
        fetched=placed,
        seconds=round(time.perf_counter() - started, 4),
    )


def stored_fields(state_dir: Path, session_id: str) -> tuple[str, str] | None:
    """``(store key, digest)`` of the latest snapshot of ``session_id`` this machine stored
    (the run's ``stored/`` records), for a ref made from a bare session id (``jigs run
    --resume``). The records are parsed, size-bounded, and only point at a manifest: the
    resume still checks that manifest against the digest, and the files against it."""
    best: tuple[float, str, str] | None = None
    with contextlib.suppress(OSError):
        for path in (state_dir / STORED_DIR).iterdir():
            data = read_regular(path, limit=64 * 1024)
            try:
                record = json.loads(data or b"")
                key, digest, saved = record["store_key"], record["digest"], record["saved"]
                if record.get("session_id") != session_id or not DIGEST.fullmatch(digest):
                    continue
                newer = best is None or (isinstance(saved, int | float) and saved > best[0])
                if isinstance(key, str) and isinstance(saved, int | float) and newer:
                    best = (float(saved), key, digest)
            except (ValueError, KeyError, TypeError):
                continue
    return (best[1], best[2]) if best else None


def _refuse(ref: AgentSessionRef, why: str) -> AgentSessionError:
    return AgentSessionError(
        f"the {ref.harness} session {ref.id[:64]} cannot be resumed from the session store: "
        f"{why}; start without resume",
        kind=ref.harness,
        session_id=ref.id,
    )


def _restore_sync(
    store: SessionStore,
    harness: Harness[Any],
    ref: AgentSessionRef,
    ctx: HarnessContext,
    cwd: Path,
) -> int:
    """Place the ref's snapshot for ``harness`` in ``cwd``: the number of files written, 0 when
    every one is already here, -1 when the session's own worktree is on this machine (the
    kind's ``verify_resume`` decides). Refuses, before writing anything, whatever does not
    check out."""
    prefix = session_prefix(ctx.run.workflow_run_id, harness.kind, ref.id)
    manifest = _parse_manifest(_fetch_manifest(store, ref, prefix), ref, harness.kind)
    artifacts: dict[str, Any] = manifest["artifacts"]
    try:
        paths = harness.session_artifacts(ref.id, ctx, cwd, names=list(artifacts))
    except ValueError as exc:
        raise _refuse(ref, f"the {harness.kind} kind refuses an artifact name ({exc})") from None
    if set(paths) != set(artifacts):
        raise _refuse(ref, f"the {harness.kind} kind does not place every artifact it names")
    wanted = [(n, i) for n, i in sorted(artifacts.items()) if not _same(paths[n], i)]
    if not wanted:
        return 0
    recorded = manifest.get("cwd")
    if isinstance(recorded, str) and recorded != str(cwd) and Path(recorded).is_dir():
        # the session's own worktree is on this machine: a session follows the workflow to
        # another machine, never to a sibling worktree; the kind's own rules decide -- but
        # only where nothing is there: a local copy the kind would read (Codex and Pi keep
        # theirs per run, not per worktree) that is not the snapshot is refused, not resumed
        for name, _info in wanted:
            if os.path.lexists(paths[name]):
                raise _refuse(
                    ref, f"its local copy ({name}) is not the snapshot the ref names (edited?)"
                )
        return -1
    to_write = [
        (paths[name], _fetch_artifact(store, ref, prefix, name, info)) for name, info in wanted
    ]
    for path, data in to_write:
        write_atomic(path, data)
    return len(to_write)


def _fetch_manifest(store: SessionStore, ref: AgentSessionRef, prefix: str) -> bytes:
    """The manifest the ref names, from this run, kind and session's keys, matching the ref's
    digest."""
    assert ref.store_key is not None
    assert ref.digest is not None
    try:
        check_key(ref.store_key)
    except SessionStoreError:
        raise _refuse(ref, "its store key is not one jigs wrote") from None
    if not ref.store_key.startswith(f"{prefix}/manifests/"):
        raise _refuse(ref, "its store key belongs to another run, kind or session")
    manifest_bytes = store.get(ref.store_key)
    if manifest_bytes is None:
        raise _refuse(ref, f"it is not in the store ({describe_store(store)}; pruned?)")
    if f"sha256:{sha256_hex(manifest_bytes)}" != ref.digest:
        raise _refuse(ref, "its manifest in the store does not match the ref's digest (altered)")
    return manifest_bytes


def _parse_manifest(manifest_bytes: bytes, ref: AgentSessionRef, kind: str) -> dict[str, Any]:
    """The manifest, when it is one jigs wrote for the ref's session and ``kind``: at least one
    artifact, each with a sha256 and a size."""
    try:
        manifest: dict[str, Any] = json.loads(manifest_bytes[:_MAX_MANIFEST])
        artifacts = manifest["artifacts"]
        ok = (
            manifest.get("session_id") == ref.id
            and manifest.get("kind") == kind
            and isinstance(artifacts, dict)
            and artifacts
            and all(
                isinstance(v, dict)
                and isinstance(v.get("sha256"), str)
                and re.fullmatch(r"[0-9a-f]{64}", v["sha256"])
                and isinstance(v.get("size"), int)
                for v in artifacts.values()
            )
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise _refuse(ref, "its manifest is not one jigs wrote for this session")
    return manifest


def _fetch_artifact(
    store: SessionStore, ref: AgentSessionRef, prefix: str, name: str, info: Mapping[str, Any]
) -> bytes:
    """The artifact's bytes from the store, of the manifest's size and digest."""
    data = store.get(f"{prefix}/files/{info['sha256']}")
    if data is None:
        raise _refuse(ref, f"its artifact {name} is missing from the store")
    if len(data) != info["size"]:
        raise _refuse(
            ref, f"its artifact {name} has {len(data)} bytes, not {info['size']} (truncated)"
        )
    if sha256_hex(data) != info["sha256"]:
        raise _refuse(ref, f"its artifact {name} does not match its digest (altered)")
    return data


def _same(path: Path, info: Mapping[str, Any]) -> bool:
    """True when ``path`` is a regular file holding exactly the artifact ``info`` describes
    (never follows a link, never reads past the recorded size)."""
    data = read_regular(path, limit=int(info["size"]))
    return data is not None and len(data) == info["size"] and sha256_hex(data) == info["sha256"]


def read_regular(path: Path, *, limit: int) -> bytes | None:
    """The bytes of ``path`` when it is a regular file (not a link, a FIFO or a device) of at
    most ``limit`` bytes; None otherwise. What the agent could have written is read this way:
    a planted FIFO cannot hang the worker, nor a huge file exhaust its memory."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        data = fh.read(limit + 1)
    return data if len(data) <= limit else None


def describe_store(store: SessionStore) -> str:
    try:
        return str(store.describe())
    except Exception:
        return type(store).__name__


async def _in_thread(fn: Callable[[], T]) -> T:
    return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)
