"""The step's model endpoint: a :class:`~jigs.proxy._credential.CredentialProxy` on a thread of
its own.

:func:`prepare_model_endpoint` reads the key a :class:`~jigs.plugin.ModelRoute` names from the
worker's environment, builds the proxy and registers its stop on the step's exit stack, and
returns the :class:`~jigs.plugin.ModelEndpoint` the kind gives its CLI. Each forwarded request is
logged on the step's structlog logger as ``proxy.request`` (method, path after the token, status,
outcome, timings, sizes, model and tokens; never the token or the key).

The proxies run on an event loop of their own in a thread (one per process, kept between steps,
with an anyio blocking portal), not in a task group of the caller's task: a step holds no cancel
scope between ``create_agent_runner`` and ``close()``, so the runner can be opened and closed
from different tasks or cancel scopes, and the proxy keeps answering while the caller's loop is
busy. Its socket is bound, and its arguments checked, before the CLI is launched; the step
begins serving it right after the launch (:func:`prepare_model_endpoint`), so a fresh process's
loop starts while the CLI does, and a request that comes before the proxy serves waits in the
socket's backlog. Closing stops the proxy (the port is closed, open connections are cut) and
waits until it no longer serves; it is bounded by the step's close timeout like every other
cleanup.

**Model calls only, every one counted.** The proxy forwards the route's ``model_calls`` only
(:func:`model_calls_of`: the kind's list, or the ``scheme``'s API by default) and refuses
everything else with 403 (``jigs.proxy.refused``, reason ``not_a_model_call``). Every forwarded
call ends in the step's :class:`ModelLedger`, the CLI's own calls and any the agent makes through
the proxy itself (with the token it can read in its config) alike, so the ledger, not the CLI's
report, is the one source of a proxied step's model calls and tokens: the engine
(:mod:`jigs.engine._engine`) replaces the turn's token counts with the ledger's and counts
``max_turns`` from it too, so nothing is counted twice and nothing the agent did is missed. Only
the CLI knows prices, so a turn's cost is the CLI's reported cost scaled to the ledger's tokens
(the calls it did not see are priced at its own average rate, never below its own figure). Once
that cost is over ``max_budget_usd`` the ledger refuses every further call of the turn (403,
reason ``not_admitted``) and the turn fails with :class:`~jigs.errors.AgentLimitError`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from contextlib import AsyncExitStack
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal

from jigs.errors import DescriptorError
from jigs.plugin import ModelEndpoint, ModelRoute
from jigs.policy._secrets import remember
from jigs.proxy._accounting import ModelLedger, ProxiedRequest
from jigs.proxy._credential import CredentialProxy, loopback_socket
from jigs.proxy._upstream import UpstreamPools

__all__ = [
    "DEFAULT_MODEL_CALLS",
    "ModelLedger",
    "ledger_for",
    "model_calls_of",
    "prepare_model_endpoint",
]

#: The model calls of each scheme's API, for a route that declares none: Anthropic Messages for
#: ``x-api-key``; OpenAI Responses and Chat Completions (under a ``…/v1`` base URL) for
#: ``bearer``. The real CLIs make no other request at start or during a turn (checked by
#: running them against ``jigs_testing``'s model server: tests/core/test_proxy_model_only.py).
DEFAULT_MODEL_CALLS: dict[str, tuple[str, ...]] = {
    "x-api-key": ("POST /v1/messages",),
    "bearer": ("POST /responses", "POST /chat/completions"),
}


def model_calls_of(route: ModelRoute) -> tuple[str, ...]:
    """The requests the step's proxy forwards for ``route``."""
    if route.model_calls is not None:
        return tuple(route.model_calls)
    return DEFAULT_MODEL_CALLS.get(route.scheme, ())


_LEDGERS: dict[str, ModelLedger] = {}


def ledger_for(endpoint: ModelEndpoint | None) -> ModelLedger | None:
    """The ledger of the step whose proxied endpoint is ``endpoint`` (None: not proxied)."""
    return None if endpoint is None else _LEDGERS.get(endpoint.base_url)


class _Loop:
    """The event loop that serves every step's proxy in this process, on a daemon thread of its
    own (``jigs-proxy``), started by the first proxy that begins and kept for the next ones: a
    step pays no thread or loop start and no loop teardown, and its proxy relays through the
    upstream pools the loop keeps (:class:`~jigs.proxy._upstream.UpstreamPools`): no new
    connection, nor TLS handshake, per step. A proxy that begins while the loop is
    still starting is queued and started by the loop itself, so :meth:`start` never waits. A
    loop that cannot start (or that died: a fork, say) is started again for the next proxy."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._portal: BlockingPortal | None = None
        self._pools: UpstreamPools | None = None
        self._thread: threading.Thread | None = None
        self._queued: list[_StepProxy] = []

    def forget(self) -> None:
        """In a forked child: no loop thread here (and the lock may be held by a thread that
        did not come along), and no upstream connection of its own (the parent's are not
        used here: a fresh loop has fresh pools)."""
        self._lock = threading.Lock()
        self._portal, self._pools, self._thread, self._queued = None, None, None, []

    def start(self, proxy: _StepProxy) -> None:
        """Run ``proxy._run`` on the loop (soon); raises ``RuntimeError`` when no thread can be
        had."""
        with self._lock:
            alive = self._thread is not None and self._thread.is_alive()
            if alive and self._portal is not None and self._pools is not None:
                portal, pools = self._portal, self._pools
            else:
                if not alive:
                    self._portal = None
                    thread = threading.Thread(target=self._main, name="jigs-proxy", daemon=True)
                    thread.start()  # it waits for the lock before it takes the queue
                    self._thread = thread
                self._queued.append(proxy)
                return
        try:
            portal.start_task_soon(_guarded, proxy, pools)
        except RuntimeError:  # the loop is ending: a fresh one for this proxy
            with self._lock:
                if self._portal is portal:
                    self._portal = None
                    self._thread = None
            self.start(proxy)

    def _main(self) -> None:
        try:
            anyio.run(self._serve)
        finally:
            with self._lock:
                queued, self._queued = self._queued, []
                if self._thread is threading.current_thread():
                    self._portal, self._pools, self._thread = None, None, None
            for proxy in queued:  # never started: their CLIs are refused at once
                with contextlib.suppress(Exception):
                    proxy.failed(RuntimeError("the proxy loop ended"))

    async def _serve(self) -> None:
        async with BlockingPortal() as portal, anyio.create_task_group() as group:
            pools = UpstreamPools(group)  # kept between steps, closed with the loop
            try:
                with self._lock:
                    queued, self._queued = self._queued, []
                    self._portal, self._pools = portal, pools
                for proxy in queued:  # begun while the loop started
                    group.start_soon(_guarded, proxy, pools)
                await portal.sleep_until_stopped()
            finally:
                await pools.aclose()
                group.cancel_scope.cancel()  # the idle sweep

    def call(self, fn: Callable[[], Awaitable[None]]) -> None:
        """Await ``fn()`` on the loop (from another thread); RuntimeError when it is not
        running."""
        with self._lock:
            portal = self._portal
        if portal is None:
            raise RuntimeError("the proxy loop is not running")
        portal.call(fn)


async def _guarded(proxy: _StepProxy, pools: UpstreamPools) -> None:
    """A proxy's task on the shared loop: whatever it raises stays with that proxy (it is
    reported and its socket closed) and never reaches the loop that serves the others."""
    proxy.pools = pools
    with contextlib.suppress(Exception):
        await proxy._run()


_LOOP = _Loop()
# a forked child has no loop thread (and maybe a lock held by a thread it does not have)
os.register_at_fork(after_in_child=_LOOP.forget)


class _StepProxy:
    """One step's proxy, served on the process's proxy loop (:class:`_Loop`); :meth:`stop` is
    idempotent.

    :meth:`begin` returns at once: the proxy was built (its arguments checked) and its socket
    bound by the caller, so the endpoint is known; the loop starts serving it while the step goes
    on (a CLI that connects sooner waits in the socket's backlog). If it cannot serve, its socket
    is closed (the CLI's connection is refused at once, nothing hangs) and ``jigs.proxy.failed``
    logged."""

    def __init__(self, proxy: CredentialProxy, log: Any) -> None:
        self.proxy = proxy
        self.pools: UpstreamPools | None = None  # the loop's, set when it runs there
        self._log = log
        self._ready = threading.Event()  # set once serving, or once that failed
        self._done = threading.Event()  # set once it no longer serves
        self._serving = False
        self._begun = False
        self._lock = threading.Lock()

    def begin(self) -> None:
        """Start serving (idempotent; not after :meth:`stop`). Never raises: a proxy that cannot
        start is logged and its socket closed."""
        with self._lock:
            if self._begun:
                return
            self._begun = True
        try:
            _LOOP.start(self)
        except RuntimeError as exc:  # no thread to be had
            self.failed(exc)

    def failed(self, exc: BaseException) -> None:
        try:
            self._log.error("jigs.proxy.failed", error=type(exc).__name__)
        finally:
            self._finish()

    def _finish(self) -> None:
        self.proxy.discard()  # if it never served: the CLI's connections are refused
        self._ready.set()
        self._done.set()

    async def _run(self) -> None:
        try:
            await self._serve()
        except BaseException as exc:  # reported: nothing above the loop's task would see it
            self.failed(exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._finish()

    async def _serve(self) -> None:
        async with anyio.create_task_group() as group:
            await group.start(functools.partial(self.proxy.serve, pools=self.pools))
            self._serving = True
            self._ready.set()

    def stop(self) -> None:
        """Stop the proxy (once it serves) and wait until it no longer does; a proxy that never
        began only closes its socket."""
        with self._lock:
            begun, self._begun = self._begun, True  # nothing begins after a stop
        if not begun:
            self._finish()  # its socket closed; a second stop returns at once
            return
        self._ready.wait()
        if self._serving and not self._done.is_set():
            with contextlib.suppress(RuntimeError):  # the loop already ended
                _LOOP.call(self.proxy.aclose)
        self._done.wait()

    async def astop(self) -> None:
        # abandonable: the step's bounded close may give up waiting (the proxy still stops)
        await anyio.to_thread.run_sync(self.stop, abandon_on_cancel=True)


def _hook(log: Any, ledger: ModelLedger) -> Any:
    def on_request(record: ProxiedRequest) -> None:
        ledger.add(record)
        usage = record.usage
        log.info(
            "proxy.request",
            method=record.method,
            path=record.path,
            status=record.status,
            outcome=record.outcome,
            seconds=round(record.seconds, 4),
            first_byte_seconds=None
            if record.first_byte_seconds is None
            else round(record.first_byte_seconds, 4),
            request_bytes=record.request_bytes,
            response_bytes=record.response_bytes,
            model=record.model,
            input_tokens=usage.input_tokens if usage else None,
            output_tokens=usage.output_tokens if usage else None,
        )

    return on_request


def _read_key(route: ModelRoute, kind: str, host: Mapping[str, str]) -> str:
    """The route's key from ``host``, remembered as a secret (redacted by value from every
    error, log line and stderr tail). Raises :class:`~jigs.errors.DescriptorError`."""
    key = host.get(route.key_env)
    if not key:
        raise DescriptorError(
            f"the {kind} descriptor names {route.key_env} for its model key, but it is not set "
            f"in the worker's environment; set it where the service runs",
            kind=kind,
            key="api_key_env",
        )
    remember([key])
    return key


def prepare_model_endpoint(
    route: ModelRoute,
    *,
    kind: str,
    stack: AsyncExitStack,
    log: Any,
    host_env: Mapping[str, str] | None = None,
) -> tuple[
    ModelEndpoint,
    Callable[[], None],
    Callable[[], Coroutine[Any, Any, None]],
    Callable[[socket.socket], None],
]:
    """Bind the step's proxy for ``route``; return the endpoint for the CLI, the function
    that starts its thread serving (call it once the CLI is launched: the thread's start then
    runs while the CLI starts, not before it; a request that comes sooner waits in the socket's
    backlog) and the one that stops it (for a close that knows the CLI is gone before ``stack``
    closes). Both are idempotent and never raise; a stop awaited twice returns once the proxy
    no longer serves.

    The key is read from ``host_env`` (default: the worker's ``os.environ``) by
    ``route.key_env``. Raises :class:`~jigs.errors.DescriptorError` when it is not set,
    :class:`~jigs.errors.CredentialProxyError` for an unusable upstream or key, and ``OSError``
    when no loopback port can be bound. The proxy stops (or, if it never began, its socket
    closes) when ``stack`` closes. The fourth function hands the proxy one more listening
    socket to serve (one made inside a sandboxed launch's network namespace, on the same port).
    """
    key = _read_key(route, kind, os.environ if host_env is None else host_env)
    sock = loopback_socket()
    ledger = ModelLedger()
    try:
        proxy = CredentialProxy(
            route.upstream,
            key,
            scheme=route.scheme,
            model_calls=model_calls_of(route),
            admit=ledger.admit,
            on_request=_hook(log, ledger),
            sock=sock,
        )
    except BaseException:
        sock.close()
        raise
    runner = _StepProxy(proxy, log)
    stack.push_async_callback(runner.astop)
    endpoint = ModelEndpoint(base_url=proxy.base_url, key=proxy.placeholder_key, route=route)
    remember([endpoint.base_url, endpoint.base_url.rsplit("/", 1)[1]])  # the step token
    _LEDGERS[endpoint.base_url] = ledger
    stack.callback(_LEDGERS.pop, endpoint.base_url, None)
    return endpoint, runner.begin, runner.astop, proxy.add_socket
