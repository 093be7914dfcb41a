"""Launching and stopping harness CLIs: the one module every kind uses.

A launched process gets exactly the environment it is given (nothing inherited), has stdin
closed unless asked for a pipe, and writes stderr to an anonymous file whose tail is kept for
error messages (no reader task is needed, so a process can outlive the task that started it).

**Isolation** (see :mod:`jigs.sandbox._isolation`; :func:`jigs.sandbox._isolation.isolation` says
which is in force): where the kernel allows it, the CLI runs in a process namespace of its own (PID
+ mount, plus a user namespace for a non-root worker, with a fresh ``/proc``): the agent sees only
its own step's processes, stopping the step kills everything in the namespace (``setsid``,
``nohup`` and double-forked descendants included), and a worker that dies, SIGKILL included,
takes the namespace with it (parent-death signal). Elsewhere every descendant is tracked and
killed at stop time. File descriptors given in ``pass_fds`` (the worktree lock's) are inherited
by the step's processes, so what they hold lives exactly as long as the step's last process.

:meth:`ManagedProcess.stop` is shielded from cancellation and bounded in time: SIGTERM to every
process of the step, a grace period, then SIGKILL of the whole step. Every open step is tracked;
an ``atexit`` reaper SIGKILLs what is left.

**SIGTERM** (how containers and service managers stop workers) skips ``atexit``. At the first
launch, when SIGTERM still has its default disposition, jigs installs a handler that stops every
open step the way :meth:`ManagedProcess.stop` does (TERM, grace, KILL), then lets the process die
of SIGTERM as before. An application opts out by installing its own SIGTERM handler before the
first launch or by calling :func:`sigterm_handling` with ``False``; its own handler can call
:func:`stop_all` to stop the steps the same way. SIGINT is left alone (cancellation stops steps).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from shutil import which
from types import TracebackType
from typing import IO, TYPE_CHECKING, Literal, Self

import anyio
import anyio.abc
import sniffio
from anyio.streams.buffered import BufferedByteReceiveStream

from jigs.engine._logging import logger
from jigs.errors import AgentOutputError
from jigs.policy._files import anonymous_file
from jigs.policy._redact import redact_known, secret_values
from jigs.sandbox import _proctree, _view
from jigs.sandbox._isolation import Isolation, isolation
from jigs.sandbox._listeners import Listeners
from jigs.sandbox._probe import sandbox_isolation
from jigs.sandbox._runtime import runtime_paths
from jigs.sandbox._tracker import Watch

if TYPE_CHECKING:
    from jigs.sandbox._view import SandboxView

__all__ = [
    "DEFAULT_GRACE",
    "MAX_LINE_BYTES",
    "Launch",
    "ManagedProcess",
    "group_alive",
    "launch",
    "live_groups",
    "observe_launches",
    "sigterm_handling",
    "stop_all",
    "value_digest",
]

#: Seconds between SIGTERM and SIGKILL when stopping a group.
DEFAULT_GRACE = 1.0
#: Longest output line a reader accepts before raising :class:`AgentOutputError`.
MAX_LINE_BYTES = 64 * 1024 * 1024
_STDERR_TAIL = 4000
#: Bytes read before the tail, so a secret straddling its start is still redacted whole.
_TAIL_MARGIN = 1024


@dataclass(frozen=True)
class Launch:
    """What jigs launched: the CLI's argv (without the isolation prefix), the environment's names
    and value digests (never values), cwd, pgid and the isolation mode."""

    argv: tuple[str, ...]
    env_names: frozenset[str]
    value_digests: frozenset[str]
    cwd: Path
    pgid: int
    owner: str
    isolation: str = "namespace"


_open_lock = threading.Lock()
_open: dict[int, ManagedProcess] = {}
_observers: list[list[Launch]] = []


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
    """Steps jigs started and has not yet stopped: pgid of the launched process -> owner label."""
    return {pgid: process.owner for pgid, process in dict(_open).items()}


def _track(process: ManagedProcess) -> None:
    with _open_lock:
        _open[process.pgid] = process


def _untrack(process: ManagedProcess) -> None:
    with _open_lock:
        if _open.get(process.pgid) is process:
            del _open[process.pgid]


def _polls(cap: float) -> Iterator[float]:
    """Sleeps between checks for a stopped tree's end: from 1 ms, doubling up to ``cap`` (a
    killed tree is often gone within a few ms; a fixed interval added up to one to every stop)."""
    delay = 0.001
    while True:
        yield delay
        delay = min(delay * 2, cap)


def _wait_gone(processes: Sequence[ManagedProcess], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    polls = _polls(0.02)
    while any(p._alive() for p in processes) and time.monotonic() < deadline:
        time.sleep(next(polls))


def stop_all(grace: float = DEFAULT_GRACE) -> None:
    """Stop every open step at once, synchronously: SIGTERM to each step's processes, up to
    ``grace`` seconds for them to exit, then SIGKILL of what is left (bounded: about
    ``grace + 1`` seconds). Safe to call from a signal handler; the :class:`ManagedProcess`
    objects are left for their owners to close (their ``stop`` then returns at once)."""
    processes = list(dict(_open).values())  # no lock: a signal handler may interrupt a holder
    futile = [p for p in processes if p._killed or p._term_is_futile()]
    for process in processes:
        if not process._killed and process._alive():
            process._signal(signal.SIGTERM)
    _wait_gone([p for p in processes if p not in futile], grace)
    for process in processes:
        if process._alive():  # a killed one again too: harmless, and it may be mid-kill
            process._signal(signal.SIGKILL)
    _wait_gone(processes, 1.0)


def _reap_all() -> None:
    """SIGKILL every step jigs started and has not stopped (at interpreter exit)."""
    processes = list(dict(_open).values())
    for process in processes:
        if process._alive():
            process._signal(signal.SIGKILL)
    _wait_gone(processes, 1.0)


atexit.register(_reap_all)
_sigterm = {"installed": False, "wanted": True}


def _on_sigterm(signum: int, frame: object) -> None:
    stop_all()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def sigterm_handling(enabled: bool) -> None:
    """Whether jigs handles SIGTERM (default: yes, when the application has not claimed it).

    ``False`` opts out: the handler is not installed at the next launch, and removed if it is the
    current one. An application that does so and still wants the steps stopped on its own
    shutdown path calls :func:`stop_all` there. ``True`` re-enables it (installed at the next
    launch, if SIGTERM then has its default disposition).
    """
    _sigterm["wanted"] = enabled
    if enabled:
        _sigterm["installed"] = False
        return
    main = threading.current_thread() is threading.main_thread()
    if main and signal.getsignal(signal.SIGTERM) is _on_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _install_sigterm_reaper() -> None:
    """Install :func:`_on_sigterm` once, from the main thread, if SIGTERM is still SIG_DFL."""
    if (
        _sigterm["installed"]
        or not _sigterm["wanted"]
        or threading.current_thread() is not threading.main_thread()
    ):
        return
    _sigterm["installed"] = True
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)


def _group_members(pgid: int) -> list[int]:
    """Live (non-zombie) pids in the group, read from /proc; [] when /proc is unavailable."""
    return [pid for pid, _ in _proctree.group_members(pgid)]


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


def _start(pid: int) -> str | None:
    info = _proctree.stat(pid)
    return info[1] if info is not None else None


class ManagedProcess:
    """A harness CLI, isolated as :mod:`jigs.sandbox._isolation` describes. Use as an async context
    manager, or call :meth:`stop` yourself; both are idempotent.

    ``pid`` and ``pgid`` are those of the process jigs started (in namespace mode the
    ``unshare`` process outside the namespace, whose exit means the namespace is empty).
    """

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
        isolation: Isolation | None = None,
    ) -> None:
        self._process = process
        self.argv = tuple(argv)
        self.owner = owner
        self.kind = kind
        self.pid = process.pid
        self.pgid = process.pid  # start_new_session: the child leads its own group
        self.isolation = isolation
        self._namespaced = isolation is not None and isolation.namespaced
        self._stderr = stderr_file
        self._secrets = secrets
        self._max_line = max_line_bytes
        self._reader: BufferedByteReceiveStream | None = None
        self._stdout_ended = False
        self._stopped = False
        self._killed = False
        self._reaps_killed = False  # unshare was left to reap the namespace jigs killed
        self._stop_lock = anyio.Lock()
        self._init: _proctree.Proc | None = None  # the namespace's first process, outer pid
        self._cli_unborn = False
        self._namespace: str | None = None
        tracked = isolation is not None and isolation.mode == "tree"
        self._watch = Watch(self.pid) if tracked else None
        _track(self)

    @property
    def returncode(self) -> int | None:
        """The exit code; a death by signal N is ``-N`` (in namespace mode too)."""
        return self._translate(self._process.returncode)

    def _translate(self, code: int | None) -> int | None:
        # ``timeout``, the namespace's first process, reports a CLI killed by signal N as 128+N
        if self._namespaced and code is not None and 128 < code < 128 + signal.NSIG:
            return 128 - code
        if self._reaps_killed and code == 1:
            # unshare, left to reap the first process jigs killed, re-raises its SIGKILL on
            # itself, which util-linux 2.38 cannot do ("sigprocmask unblock failed"): exit 1
            return -signal.SIGKILL
        return code

    @property
    def stdin(self) -> anyio.abc.ByteSendStream | None:
        return self._process.stdin

    def stderr_tail(self, limit: int = _STDERR_TAIL) -> str:
        """The last ``limit`` characters the process wrote to stderr, with every secret value
        redacted (it goes into error messages): the secret values of its environment, whatever
        their names, and every value the step registered (:mod:`jigs.policy._secrets`). More is read
        than is kept, so a secret cut at the start of the tail is redacted too."""
        try:
            size = os.fstat(self._stderr.fileno()).st_size
            self._stderr.seek(max(0, size - limit - _TAIL_MARGIN))
            text = self._stderr.read().decode("utf-8", errors="replace")
        except (OSError, ValueError):
            return ""
        text = redact_known(text, self._secrets)
        return text[-limit:] if len(text) > limit else text

    @property
    def stdout_ended(self) -> bool:
        """Whether :meth:`read_line` has met the end of stdout (so a final line it returned
        without a newline was cut short by the end of the stream)."""
        return self._stdout_ended

    async def read_line(self) -> bytes | None:
        """The next stdout line without its newline, or None at end of stream.

        A final line without a newline is returned as is (:attr:`stdout_ended` is then True). A
        line longer than the limit raises :class:`AgentOutputError` (the reader never buffers
        without bound).
        """
        stdout = self._process.stdout
        if stdout is None:
            raise RuntimeError("this process was launched without a stdout pipe")
        if self._reader is None:
            self._reader = BufferedByteReceiveStream(stdout)
        try:
            return await self._reader.receive_until(b"\n", self._max_line)
        except anyio.IncompleteRead:
            self._stdout_ended = True
            rest = bytes(self._reader.buffer)
            self._reader = type(self._reader)(stdout)
            return rest or None
        except anyio.DelimiterNotFound:
            raise AgentOutputError(
                f"{self.owner} printed a line longer than {self._max_line} bytes; jigs stopped "
                f"reading it (a harness bug or garbage output)",
                kind=self.kind,
            ) from None
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._stdout_ended = True
            return None

    def lines(self) -> AsyncIterator[bytes]:
        """Iterate stdout lines until the stream ends (a plain iterator, not a generator, so
        leaving the loop early needs no ``aclosing``)."""
        return _Lines(self)

    async def wait(self) -> int:
        """Wait for the CLI to exit; returns its exit code (negative: a signal). In namespace
        mode this returns once the whole namespace is gone."""
        code = self._translate(await self._process.wait())
        assert code is not None
        return code

    async def stop(self, grace: float = DEFAULT_GRACE) -> None:
        """Stop every process of the step: SIGTERM, up to ``grace`` seconds, then SIGKILL
        (``grace=0``: SIGKILL at once, no TERM).

        Shielded from cancellation and bounded (about ``grace + 1`` seconds). Idempotent.
        Returns once no process of the step is left (namespace mode), or once the group and
        every tracked descendant is gone (tree mode), or at the bound.
        """
        with anyio.CancelScope(shield=True):
            async with self._stop_lock:
                if self._stopped:
                    return
                try:
                    await self._stop_step(grace)
                finally:
                    self._stopped = True
                    _untrack(self)
                    if self._watch is not None:
                        self._watch.close()
                    await self._close_streams()

    def kill(self) -> None:
        """SIGKILL every process of the step now, without waiting for them to be gone (the
        kernel tears them down meanwhile; :meth:`stop` then only waits). For a caller with
        work that does not need them gone to do first. Idempotent; never raises."""
        if self._killed or self._stopped:
            return
        if self._alive():
            self._signal(signal.SIGKILL)
        self._killed = True  # only once sent: a SIGTERM handler meanwhile signals it itself

    # -- the step's processes, synchronously (also used from the SIGTERM handler) -------------

    def _find_init(self) -> None:
        """Remember the namespace's first process (the child of ``unshare``) and its namespace."""
        if self._init is not None or not self._namespaced:
            return
        for child in _proctree.children_of(self.pid):
            info = _proctree.stat(child)
            namespace = _proctree.pid_namespace(child)
            if info is not None and namespace is not None:
                self._init, self._namespace = (child, info[1]), namespace
                return

    def _leader_running(self) -> bool:
        return self._process.returncode is None and _proctree.stat(self.pid) is not None

    def _alive(self) -> bool:
        """Whether any process of the step may be left."""
        if self._namespaced:
            self._find_init()
            init_alive = self._init is not None and bool(_proctree.live([self._init]))
            return self._leader_running() or init_alive
        if self._leader_running() or (self._group_is_ours() and group_alive(self.pgid)):
            return True
        return self._watch is not None and bool(self._watch.sample())

    def _group_is_ours(self) -> bool:
        """Whether signalling ``-pgid`` can only reach our group: the leader is not yet reaped
        (its pid cannot be reused), or members still hold the group id."""
        return self._process.returncode is None or group_alive(self.pgid)

    def _signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to every process of the step (namespace: SIGKILL goes to the namespace's
        first process, which makes the kernel kill the rest)."""
        if self._namespaced:
            self._signal_namespace(sig)
            return
        known = self._watch.sample() if self._watch is not None else []
        if self._group_is_ours():
            _signal_group(self.pgid, sig)
        _proctree.signal_procs(known, sig)

    def _signal_namespace(self, sig: signal.Signals) -> None:
        self._find_init()
        deadline = time.monotonic() + 0.1
        while self._init is None and self._leader_running() and time.monotonic() < deadline:
            time.sleep(0.001)  # stopped right after launch: unshare has not forked yet
            self._find_init()
        if sig != signal.SIGKILL:
            if self._namespace is not None:
                members = _proctree.namespace_members(self._namespace)
                # only the first process: a TERM that reaches ``timeout`` before it has forked
                # the CLI is lost, so the CLI, once forked, must get its own (_term_late_cli)
                self._cli_unborn = [p for p, _ in members] == [self._init and self._init[0]]
                _proctree.signal_procs(members, sig)
            return
        frozen = killed = False
        try:
            known = self._init is not None and bool(_proctree.live([self._init]))
            if self._process.returncode is None and not known:
                # no live first process yet: freeze unshare so it cannot be between fork() and
                # its child's PR_SET_PDEATHSIG while we look for that child once more
                with contextlib.suppress(OSError):
                    os.kill(self.pid, signal.SIGSTOP)
                    frozen = True
                _proctree.wait_stopped(self.pid, 0.05)
                self._init = None
                self._find_init()
            if self._init is not None:
                killed = _proctree.kill_procs([self._init]) > 0
        finally:  # whatever interrupts the above, unshare is never left frozen
            if self._process.returncode is None:
                # with its child killed (or gone by itself), unshare is left running: it reaps
                # that child, which happens once the namespace is empty, and exits, so its exit
                # (which the event loop sees at once) is the namespace's end and nobody polls
                # for it; with no child found, it is killed as well (the child, if any, dies
                # with it: PR_SET_PDEATHSIG)
                self._reaps_killed = killed
                resume = signal.SIGCONT if self._init is not None else signal.SIGKILL
                if frozen or resume == signal.SIGKILL:
                    with contextlib.suppress(OSError):
                        os.kill(self.pid, resume)

    async def _term_late_cli(self) -> None:
        """After a TERM sent before ``timeout`` forked the CLI: TERM the CLI once it appears."""
        while self._cli_unborn and self._process.returncode is None and self._init is not None:
            children = _proctree.children_of(self._init[0])
            if children:
                self._cli_unborn = False
                cli = [(c, s) for c in children if (s := _start(c)) is not None]
                _proctree.signal_procs(cli, signal.SIGTERM)
                return
            await anyio.sleep(0.005)

    async def _wait_gone(self, seconds: float) -> None:
        with anyio.move_on_after(seconds):
            await self._term_late_cli()
            if self._process.returncode is None:
                # in a namespace: unshare exits only once its child, the namespace's first
                # process, is reaped, which happens only once every other process in it is gone
                await self._process.wait()
            polls = _polls(0.01)
            while self._alive():
                await anyio.sleep(next(polls))

    def _term_is_futile(self) -> bool:
        """Stopped right after launch, the namespace's first process may not yet be ``timeout``
        with its handlers (an init ignores signals it does not catch), so no CLI is running
        yet: nothing to wait for, go straight to SIGKILL."""
        self._find_init()
        return (
            self._namespaced
            and self._init is not None
            and not _proctree.catches(self._init[0], signal.SIGTERM)
        )

    async def _stop_step(self, grace: float) -> None:
        # no grace: a TERM could not be acted on, KILL at once; after kill(), only wait
        if not self._killed and grace > 0 and self._alive():
            futile = self._term_is_futile()  # before: timeout ignores TERM once it forwarded it
            self._signal(signal.SIGTERM)
            if not futile:
                await self._wait_gone(grace)
        if not self._killed and self._alive():
            self._signal(signal.SIGKILL)
            self._killed = True
        if self._killed:
            await self._wait_gone(1.0)
        with anyio.move_on_after(0.5):
            await self._process.wait()  # reap the leader (at once when it is already reaped)

    async def _close_streams(self) -> None:
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                with contextlib.suppress(
                    OSError, anyio.BrokenResourceError, anyio.ClosedResourceError
                ):
                    await stream.aclose()
        if self._process.returncode is not None:
            # also close the pipe transports: a descendant that inherited stdout may still
            # hold its write end for a moment (the namespace's last processes dying)
            with contextlib.suppress(OSError, anyio.BrokenResourceError):
                await self._process.aclose()
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


def _resolve(executable: str, cwd: Path, env: Mapping[str, str]) -> str:
    """The path ``subprocess`` would execute for ``executable``: raises FileNotFoundError or
    PermissionError as it would (the isolation wrapper must not turn them into exit codes)."""
    if os.sep in executable:
        path = executable if os.path.isabs(executable) else os.path.join(cwd, executable)
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), executable)
    else:
        found = which(executable, path=os.pathsep.join(os.get_exec_path(dict(env))))
        if found is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), executable)
        path = found
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), executable)
    return os.path.abspath(path)


def _on_asyncio() -> bool:
    """Whether a parent-death signal may be used for this launch.

    A parent-death signal follows the *thread* that forked. asyncio forks on the event loop's
    thread, which lives as long as the worker; trio forks in a worker thread it retires after
    ~10 s idle, which would kill a healthy agent mid-turn. Under trio the namespace still dies
    with its step (close, SIGTERM, atexit), but a SIGKILLed worker does not take it along (its
    processes keep the worktree lock, so no second agent starts there)."""
    try:
        return sniffio.current_async_library() == "asyncio"
    except sniffio.AsyncLibraryNotFoundError:
        return False


def _command(
    mode: Isolation,
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    *,
    sandbox: SandboxView | None,
    listeners: Listeners | None,
) -> list[str]:
    """The argv that runs ``argv`` under ``mode`` (its namespace chain, or as is), or in
    ``sandbox`` when one is given (``mode`` is then the sandbox's, see
    :func:`jigs.sandbox.sandbox_isolation`), with ``listeners``' plumbing when it has any."""
    resolved = _resolve(argv[0], cwd, env) if mode.prefix or sandbox is not None else argv[0]
    if sandbox is None:
        prefix = mode.prefix
        if prefix and os.path.basename(prefix[0]) == "setpriv" and not _on_asyncio():
            prefix = prefix[4:]  # no parent-death signal off asyncio (see _on_asyncio)
        return [*prefix, resolved, *argv[1:]] if prefix else list(argv)
    for path in runtime_paths(resolved, env):  # what the executable runs from, read-only
        sandbox.expose(path)
    info_fd, block_fd = listeners.bwrap_fds() if listeners else (None, None)
    options = _view.bwrap_args(
        listeners.shown() if listeners else sandbox,
        cwd=cwd,
        info_fd=info_fd,
        block_fd=block_fd,
        die_with_parent=_on_asyncio(),
    )
    first = listeners.first() if listeners else []
    return [mode.prefix[0], *options, "--", *first, *mode.prefix[1:], resolved, *argv[1:]]


async def _open_listeners(
    process: anyio.abc.Process, listeners: Listeners, stderr: IO[bytes]
) -> None:
    """Open ``listeners`` inside the sandbox (see :mod:`jigs.sandbox._listeners`); on failure
    the whole launch is killed and reaped, and the ``OSError`` raised."""
    listeners.spawned()
    try:
        await listeners.open(stderr)
    except BaseException:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            await process.aclose()  # reaped, and its pipes closed: nothing of it stays open
        stderr.close()
        raise


def _plan(
    mode: Isolation,
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    *,
    sandbox: SandboxView | None,
) -> tuple[Listeners | None, list[str]]:
    """The sandbox's listeners (a sandbox without network that serves ports has some) and the
    command to start; the listeners are closed when the command cannot be built."""
    listeners = None
    if sandbox is not None and sandbox.network == "deny" and sandbox.listen:
        listeners = Listeners(sandbox)
    try:
        return listeners, _command(mode, argv, cwd, env, sandbox=sandbox, listeners=listeners)
    except BaseException:
        if listeners is not None:
            listeners.close()
        raise


async def _open_process(
    command: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdin: Literal["closed", "pipe"],
    stdout: Literal["pipe", "discard"],
    stderr_file: IO[bytes],
    pass_fds: Sequence[int],
    listeners: Listeners | None,
) -> anyio.abc.Process:
    """Start ``command`` in a session of its own, its stderr to ``stderr_file``, then open the
    sandbox's ``listeners``; whatever fails, the file and the listeners are closed."""
    try:
        process = await anyio.open_process(
            command,
            stdin=subprocess.PIPE if stdin == "pipe" else subprocess.DEVNULL,
            stdout=subprocess.PIPE if stdout == "pipe" else subprocess.DEVNULL,
            stderr=stderr_file,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
            pass_fds=(*pass_fds, *(listeners.inherited if listeners else ())),
        )
    except BaseException:
        stderr_file.close()
        if listeners is not None:
            listeners.close()
        raise
    if listeners is not None:
        await _open_listeners(process, listeners, stderr_file)
    return process


def _record_launch(
    pid: int,
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    owner: str,
    mode: Isolation,
    started: float,
) -> None:
    """Log the launch (the variables' names, never their values) and tell the observers."""
    logger.debug(
        "process.launched",
        owner=owner,
        pid=pid,
        executable=argv[0],
        env_names=sorted(env),
        isolation=mode.mode,
        seconds=round(time.perf_counter() - started, 4),
    )
    for seen in _observers:
        digests = frozenset(value_digest(v) for v in env.values())
        seen.append(Launch(tuple(argv), frozenset(env), digests, Path(cwd), pid, owner, mode.mode))


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
    pass_fds: Sequence[int] = (),
    isolation_override: Isolation | None = None,
    sandbox: SandboxView | None = None,
) -> ManagedProcess:
    """Start ``argv`` in ``cwd`` with exactly ``env``, isolated (see the module docstring).

    ``pass_fds``: descriptors the step's processes inherit (e.g.
    :attr:`jigs.policy._lock.WorktreeLock.fds`, so the worktree stays locked until the step's last
    process is gone, worker death included). ``isolation_override`` replaces the probed
    :func:`~jigs.sandbox._isolation.isolation` (benchmarks and tests). ``sandbox``: run it in a
    bubblewrap sandbox showing only what the :class:`~jigs.sandbox.SandboxView` lists (its own
    namespaces, the parent-death link; :func:`jigs.sandbox.sandbox_isolation` must have found
    the host able); before the command starts, each of ``sandbox.listen``'s ports is opened
    inside its network namespace and handed to its server.

    Raises :class:`FileNotFoundError` / :class:`PermissionError` when the executable cannot run;
    callers turn that into their kind's :class:`~jigs.errors.CliNotFoundError`.
    """
    _install_sigterm_reaper()
    if sandbox is not None:
        mode = sandbox_isolation()
    else:
        mode = isolation_override if isolation_override is not None else isolation()
    listeners, command = _plan(mode, argv, Path(cwd), env, sandbox=sandbox)
    stderr_file = anonymous_file("jigs-stderr-")  # owned by the process
    started = time.perf_counter()
    process = await _open_process(
        command,
        cwd=cwd,
        env=env,
        stdin=stdin,
        stdout=stdout,
        stderr_file=stderr_file,
        pass_fds=pass_fds,
        listeners=listeners,
    )
    _record_launch(process.pid, argv, cwd=cwd, env=env, owner=owner, mode=mode, started=started)
    return ManagedProcess(
        process,
        argv=argv,
        owner=owner,
        kind=kind,
        stderr_file=stderr_file,
        max_line_bytes=max_line_bytes,
        secrets=secret_values(env),
        isolation=mode,
    )
