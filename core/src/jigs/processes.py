"""Launching and stopping harness CLIs: the one module every kind uses.

A launched process gets exactly the environment it is given (nothing inherited), runs in its own
process group, has stdin closed unless asked for a pipe, and writes stderr to an anonymous file
whose tail is kept for error messages (no reader task is needed, so a process can outlive the task
that started it). :meth:`ManagedProcess.stop` is shielded from cancellation and bounded in time:
SIGTERM to the whole group, a grace period, then SIGKILL. Every live group is tracked, and an
``atexit`` reaper (and, unless the application handles SIGTERM itself, a SIGTERM handler) kills
what is left so no child outlives the Python process. SIGKILL of Python itself cannot be caught,
so on Linux under asyncio the CLI is started through util-linux ``setpriv --pdeathsig KILL``: the
kernel kills it when the thread that launched it (the event loop's) dies, so a SIGKILLed workflow
worker takes its agents with it.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Literal, Self

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from jigs._redact import redact, secret_values
from jigs.errors import AgentOutputError

__all__ = [
    "DEFAULT_GRACE",
    "MAX_LINE_BYTES",
    "Launch",
    "ManagedProcess",
    "group_alive",
    "launch",
    "live_groups",
    "observe_launches",
    "value_digest",
]

#: Seconds between SIGTERM and SIGKILL when stopping a group.
DEFAULT_GRACE = 1.0
#: Longest output line a reader accepts before raising :class:`AgentOutputError`.
MAX_LINE_BYTES = 64 * 1024 * 1024
_STDERR_TAIL = 4000

_groups_lock = threading.Lock()
_groups: dict[int, str] = {}
_observers: list[list[Launch]] = []


@dataclass(frozen=True, slots=True)
class Launch:
    """What jigs launched: argv, the environment's names and value digests (never values), cwd
    and pgid."""

    argv: tuple[str, ...]
    env_names: frozenset[str]
    value_digests: frozenset[str]
    cwd: Path
    pgid: int
    owner: str


def value_digest(value: str) -> str:
    """A SHA-256 digest of an environment value, so tests can look for one without holding it."""
    return hashlib.sha256(value.encode()).hexdigest()


@contextmanager
def observe_launches() -> Iterator[list[Launch]]:
    """Record every launch made while the block runs (used by the conformance kit)."""
    seen: list[Launch] = []
    _observers.append(seen)
    try:
        yield seen
    finally:
        _observers.remove(seen)


def live_groups() -> dict[int, str]:
    """Process groups jigs started and has not yet stopped: pgid -> owner label."""
    with _groups_lock:
        return dict(_groups)


def _track(pgid: int, owner: str) -> None:
    with _groups_lock:
        _groups[pgid] = owner


def _untrack(pgid: int) -> None:
    with _groups_lock:
        _groups.pop(pgid, None)


def _reap_all() -> None:
    """SIGKILL every group jigs started and has not stopped (skipping groups already gone)."""
    for pgid in live_groups():
        if group_alive(pgid):
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)
        _untrack(pgid)


atexit.register(_reap_all)
_sigterm_installed = threading.Event()


def _on_sigterm(signum: int, frame: object) -> None:
    _reap_all()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _install_sigterm_reaper() -> None:
    """SIGTERM (how containers and service managers stop workers) skips ``atexit``: when the
    application has not claimed SIGTERM itself, reap the groups first, then die as before."""
    if _sigterm_installed.is_set() or threading.current_thread() is not threading.main_thread():
        return
    _sigterm_installed.set()
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)


def _group_members(pgid: int) -> list[int]:
    """Live (non-zombie) pids in the group, read from /proc; [] when /proc is unavailable."""
    members: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return members
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue
        # fields after the parenthesised command: state ppid pgrp ...
        rest = stat.rsplit(")", 1)[-1].split()
        if len(rest) >= 3 and rest[0] != "Z" and rest[2] == str(pgid):
            members.append(int(entry))
    return members


def group_alive(pgid: int) -> bool:
    """True while any non-zombie process of the group exists."""
    if os.path.isdir("/proc"):
        return bool(_group_members(pgid))
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class ManagedProcess:
    """A harness CLI in its own process group. Use as an async context manager, or call
    :meth:`stop` yourself; both are idempotent."""

    def __init__(
        self,
        process: anyio.abc.Process,
        *,
        argv: Sequence[str],
        owner: str,
        kind: str,
        stderr_file: IO[bytes],
        max_line_bytes: int,
        secrets: Sequence[str] = (),
    ) -> None:
        self._process = process
        self.argv = tuple(argv)
        self.owner = owner
        self.kind = kind
        self.pid = process.pid
        self.pgid = process.pid  # start_new_session: the child leads its own group
        self._stderr = stderr_file
        self._secrets = secrets
        self._max_line = max_line_bytes
        self._reader: BufferedByteReceiveStream | None = None
        self._stopped = False
        self._stop_lock = anyio.Lock()
        _track(self.pgid, owner)

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    @property
    def stdin(self) -> anyio.abc.ByteSendStream | None:
        return self._process.stdin

    def stderr_tail(self, limit: int = _STDERR_TAIL) -> str:
        """The last ``limit`` characters the process wrote to stderr, with the values of
        secret-looking variables of its environment redacted (it goes into error messages)."""
        try:
            size = os.fstat(self._stderr.fileno()).st_size
            self._stderr.seek(max(0, size - limit))
            text = self._stderr.read().decode("utf-8", errors="replace")
        except (OSError, ValueError):
            return ""
        return redact(text, self._secrets)

    async def read_line(self) -> bytes | None:
        """The next stdout line without its newline, or None at end of stream.

        A final line without a newline is returned as is. A line longer than the limit raises
        :class:`AgentOutputError` (the reader never buffers without bound).
        """
        stdout = self._process.stdout
        if stdout is None:
            raise RuntimeError("this process was launched without a stdout pipe")
        if self._reader is None:
            self._reader = BufferedByteReceiveStream(stdout)
        try:
            return await self._reader.receive_until(b"\n", self._max_line)
        except anyio.IncompleteRead:
            rest = bytes(self._reader.buffer)
            self._reader = BufferedByteReceiveStream(stdout)
            return rest or None
        except anyio.DelimiterNotFound:
            raise AgentOutputError(
                f"{self.owner} printed a line longer than {self._max_line} bytes; jigs stopped "
                f"reading it (a harness bug or garbage output)",
                kind=self.kind,
            ) from None
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return None

    def lines(self) -> AsyncIterator[bytes]:
        """Iterate stdout lines until the stream ends (a plain iterator, not a generator, so
        leaving the loop early needs no ``aclosing``)."""
        return _Lines(self)

    async def wait(self) -> int:
        """Wait for the group leader to exit; returns its exit code (negative: a signal)."""
        return await self._process.wait()

    async def stop(self, grace: float = DEFAULT_GRACE) -> None:
        """Stop the whole group: SIGTERM, up to ``grace`` seconds, then SIGKILL.

        Shielded from cancellation and bounded (about ``grace + 1`` seconds). Idempotent.
        """
        with anyio.CancelScope(shield=True):
            async with self._stop_lock:
                if self._stopped:
                    return
                try:
                    await self._stop_group(grace)
                finally:
                    self._stopped = True
                    _untrack(self.pgid)
                    await self._close_streams()

    def _group_is_ours(self) -> bool:
        """Whether signalling ``-pgid`` can only reach our group: the leader is not yet reaped
        (its pid cannot be reused), or members still hold the group id."""
        return self._process.returncode is None or group_alive(self.pgid)

    async def _stop_group(self, grace: float) -> None:
        if self._group_is_ours():
            _signal_group(self.pgid, signal.SIGTERM)
            with anyio.move_on_after(grace):
                await self._process.wait()
                while group_alive(self.pgid):
                    await anyio.sleep(0.02)
        if self._group_is_ours():
            _signal_group(self.pgid, signal.SIGKILL)
            with anyio.move_on_after(1.0):
                await self._process.wait()
                while group_alive(self.pgid):
                    await anyio.sleep(0.02)

    async def _close_streams(self) -> None:
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                with contextlib.suppress(
                    OSError, anyio.BrokenResourceError, anyio.ClosedResourceError
                ):
                    await stream.aclose()
        self._stderr.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


class _Lines:
    def __init__(self, process: ManagedProcess) -> None:
        self._process = process

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> bytes:
        line = await self._process.read_line()
        if line is None:
            raise StopAsyncIteration
        return line


_SETPRIV = "/usr/bin/setpriv"


def _with_parent_death(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """``argv`` behind ``setpriv --pdeathsig KILL`` (the signal survives the exec) when that
    tool exists and ``argv[0]`` is an executable file; otherwise ``argv`` as is, so a missing
    executable still raises :class:`FileNotFoundError` here.

    Only on asyncio, which forks from the event loop's thread (alive as long as the process is
    used). Trio forks from a cached worker thread that exits when idle, which would kill the
    CLI mid-turn, so under trio the atexit/SIGTERM reapers are the only guard."""
    import asyncio
    import shutil

    if sys.platform != "linux" or not os.access(_SETPRIV, os.X_OK):
        return list(argv)
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # trio (or no loop at all)
        return list(argv)
    exe = argv[0] if os.path.isabs(argv[0]) else shutil.which(argv[0], path=env.get("PATH", ""))
    if exe is None or not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        return list(argv)
    return [_SETPRIV, "--pdeathsig", "KILL", "--", *argv]


async def launch(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    owner: str,
    kind: str = "unknown",
    stdin: Literal["closed", "pipe"] = "closed",
    stdout: Literal["pipe", "discard"] = "pipe",
    max_line_bytes: int = MAX_LINE_BYTES,
) -> ManagedProcess:
    """Start ``argv`` in ``cwd`` with exactly ``env``, in a new process group.

    Raises :class:`FileNotFoundError` / :class:`PermissionError` when the executable cannot run;
    callers turn that into their kind's :class:`~jigs.errors.CliNotFoundError`.
    """
    _install_sigterm_reaper()
    stderr_file = tempfile.TemporaryFile(prefix="jigs-stderr-")  # noqa: SIM115 - owned by the process
    started = time.perf_counter()
    try:
        process = await anyio.open_process(
            _with_parent_death(argv, env),
            stdin=subprocess.PIPE if stdin == "pipe" else subprocess.DEVNULL,
            stdout=subprocess.PIPE if stdout == "pipe" else subprocess.DEVNULL,
            stderr=stderr_file,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
        )
    except BaseException:
        stderr_file.close()
        raise
    from jigs._logging import logger

    logger.debug(
        "process.launched",
        owner=owner,
        pid=process.pid,
        executable=argv[0],
        env_names=sorted(env),
        seconds=round(time.perf_counter() - started, 4),
    )
    for seen in _observers:
        digests = frozenset(value_digest(v) for v in env.values())
        seen.append(Launch(tuple(argv), frozenset(env), digests, Path(cwd), process.pid, owner))
    return ManagedProcess(
        process,
        argv=argv,
        owner=owner,
        kind=kind,
        stderr_file=stderr_file,
        max_line_bytes=max_line_bytes,
        secrets=secret_values(env),
    )
